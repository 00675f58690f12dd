"""Config rules: every key optional, fixed names, durations, clear errors naming the key."""

from __future__ import annotations

import logging
from dataclasses import fields
from pathlib import Path

import pytest

from sift import config
from sift.config import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "sift.toml"
    p.write_text(text)
    return p


def test_every_key_is_optional_and_defaults_match_the_spec(tmp_path):
    cfg = config.load(write(tmp_path, ""))
    assert (cfg.server.host, cfg.server.port) == ("127.0.0.1", 8077)
    assert cfg.guard.allowed_ports == (80, 443)
    assert cfg.guard.allow_networks == ()
    assert (cfg.gates.global_, cfg.gates.per_host, cfg.gates.per_caller) == (8, 2, 4)
    b = cfg.batch
    assert (b.targets_per_job, b.jobs_per_caller, b.jobs_total, b.drain_tasks) == (32, 1, 8, 1)
    assert (b.ttl, b.max_bytes, b.retry_wait, b.retry_for, b.poll_interval) == (
        86400.0,
        64 * 1024 * 1024,
        2.0,
        600.0,
        2.0,
    )
    assert cfg.cache.ttl == 900.0
    assert cfg.fetch.output_cap == 100_000 and cfg.fetch.max_redirects == 5
    assert cfg.fetch.max_body == 10 * 1024 * 1024
    assert cfg.recover.archive_url == "https://archive.org"
    assert cfg.digest.backend == "extractive"


def test_relative_state_dir_is_relative_to_the_config_files_folder(tmp_path):
    cfg = config.load(write(tmp_path, '[store]\nstate_dir = "data"\n'))
    assert cfg.state_dir == (tmp_path / "data").resolve()
    assert cfg.keys_file == cfg.state_dir / "keys.toml"


def test_without_a_config_file_state_dir_is_relative_to_the_working_directory(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SIFT_CONFIG", raising=False)
    assert config.load().state_dir == (tmp_path / "var").resolve()


def test_sift_config_environment_variable_names_the_file(tmp_path, monkeypatch):
    p = write(tmp_path, "[server]\nport = 9999\n")
    monkeypatch.setenv("SIFT_CONFIG", str(p))
    assert config.load().server.port == 9999


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ('ttl = "24h"', 86400.0),
        ('ttl = "2s"', 2.0),
        ("ttl = 30", 30.0),
        ('ttl = "500ms"', 0.5),
        ('ttl = "15m"', 900.0),
        ("ttl = 1.5", 1.5),
    ],
)
def test_durations_are_numbers_or_strings_with_units(tmp_path, text, seconds):
    assert config.load(write(tmp_path, f"[batch]\n{text}\n")).batch.ttl == seconds


def test_sizes_accept_bytes_or_units(tmp_path):
    cfg = config.load(write(tmp_path, '[batch]\nmax_bytes = "2MiB"\n[fetch]\nmax_body = 4096\n'))
    assert cfg.batch.max_bytes == 2 * 1024 * 1024
    assert cfg.fetch.max_body == 4096


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("[server]\nprot = 1\n", "[server] prot"),
        ("[nope]\nx = 1\n", "[nope]"),
        ("[server]\nport = 70000\n", "[server] port"),
        ('[server]\nport = "80"\n', "[server] port"),
        ("[batch]\nttl = -1\n", "[batch] ttl"),
        ('[batch]\nttl = "soon"\n', "[batch] ttl"),
        ("[cache]\nmax_bytes = -5\n", "[cache] max_bytes"),
        ("[guard]\nallowed_ports = [0]\n", "[guard] allowed_ports"),
        ('[guard]\nallow_networks = ["not-a-net"]\n', "[guard] allow_networks"),
        ("[gates]\nglobal = true\n", "[gates] global"),
        ('[digest]\nbackend = "magic"\n', "[digest] backend"),
        ("[server]\nhost = [1]\n", "[server] host"),
    ],
)
def test_bad_values_are_rejected_with_one_message_naming_the_key(tmp_path, text, names):
    with pytest.raises(ConfigError) as e:
        config.load(write(tmp_path, text))
    assert names in str(e.value)
    assert "\n" not in str(e.value)


def test_invalid_toml_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="not valid TOML"):
        config.load(write(tmp_path, "[server\n"))


def test_zero_in_batch_means_the_default(tmp_path):
    cfg = config.load(write(tmp_path, "[batch]\ntargets_per_job = 0\njobs_total = 0\nttl = 0\n"))
    assert (cfg.batch.targets_per_job, cfg.batch.jobs_total, cfg.batch.ttl) == (32, 8, 86400.0)


def test_drain_tasks_above_two_are_clamped_to_two_with_a_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="sift.config"):
        cfg = config.load(write(tmp_path, "[batch]\ndrain_tasks = 5\n"))
    assert cfg.batch.drain_tasks == 2
    assert "clamped" in caplog.text


def test_batch_workers_is_still_accepted_as_the_old_name_of_drain_tasks(tmp_path):
    assert config.load(write(tmp_path, "[batch]\nworkers = 2\n")).batch.drain_tasks == 2


def test_batch_workers_and_drain_tasks_together_are_rejected(tmp_path):
    with pytest.raises(config.ConfigError, match="set only drain_tasks"):
        config.load(write(tmp_path, "[batch]\nworkers = 2\ndrain_tasks = 1\n"))


def test_gates_global_uses_its_fixed_name(tmp_path):
    assert config.load(write(tmp_path, "[gates]\nglobal = 3\n")).gates.global_ == 3


def test_allow_networks_are_normalised(tmp_path):
    cfg = config.load(write(tmp_path, '[guard]\nallow_networks = ["127.0.0.1", "::1/128"]\n'))
    assert cfg.guard.allow_networks == ("127.0.0.1/32", "::1/128")


def test_describe_lists_every_setting_with_help():
    rows = config.describe()
    assert ("gates", "global", 8, rows[[r[:2] for r in rows].index(("gates", "global"))][3]) in rows
    assert all(help_ for *_, help_ in rows)
    assert {b for b, *_ in rows} == set(config.BLOCKS)


def test_store_engine_is_sqlite_by_default_and_must_be_sqlite_or_postgres(monkeypatch):
    monkeypatch.delenv("SIFT_DATABASE_URL", raising=False)
    assert config.from_dict({}).store.engine == "sqlite"
    with pytest.raises(config.ConfigError, match=r"\[store\] engine"):
        config.from_dict({"store": {"engine": "mysql"}})


def test_engine_postgres_needs_a_dsn(monkeypatch):
    monkeypatch.delenv("SIFT_DATABASE_URL", raising=False)
    with pytest.raises(config.ConfigError, match=r"\[store\] dsn.*SIFT_DATABASE_URL"):
        config.from_dict({"store": {"engine": "postgres"}})


def test_sift_database_url_wins_over_the_configured_dsn(monkeypatch):
    monkeypatch.setenv("SIFT_DATABASE_URL", "postgresql://env@/sift")
    cfg = config.from_dict({"store": {"engine": "postgres", "dsn": "postgresql://file@/sift"}})
    assert cfg.store.dsn == "postgresql://env@/sift"


# -- settings as typed data: kind and the meaning of 0 (docs/OPERATIONS.md §Configuration) ------


def test_a_setting_kind_must_be_a_kind_not_a_bare_string():
    with pytest.raises(TypeError, match="Kind"):
        config._opt(0, "a setting", "int")


def test_every_setting_declares_its_kind_and_what_its_zero_means():
    for cls in config.BLOCKS.values():
        for f in fields(cls):
            assert isinstance(f.metadata["kind"], config.Kind), f.name
            assert isinstance(f.metadata["zero"], config.Zero), f.name


def test_zero_means_the_default_only_where_the_setting_says_so():
    cfg = config.from_dict(
        {"batch": {"hand_off_after": 0, "retry_wait": "0s"}, "fetch": {"crawl_delay_max": 0}}
    )
    assert (cfg.batch.hand_off_after, cfg.batch.retry_wait) == (0.25, 2.0)
    assert cfg.fetch.crawl_delay_max == 0.0
