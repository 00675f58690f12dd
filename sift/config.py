"""Sift's configuration: one TOML file, every key optional, settings as data.

Each block is a frozen dataclass; each field carries its TOML name, kind, bounds and a one-line
help in its metadata, so the loader, the validation messages and docs/OPERATIONS.md all come
from one place (a test checks the docs against `describe()`).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from enum import Enum, StrEnum
from pathlib import Path
from typing import Any

log = logging.getLogger("sift.config")

MAX_DRAIN_TASKS = 2  # each job is serial; two tasks already keep two jobs moving at once


ROBOTS_MODES = ("batch", "always", "never")
CONTENT_SIGNALS_MODES = ("obey", "ignore")


class ConfigError(Exception):
    """The configuration is not valid; the message names the key."""


class Kind(StrEnum):
    """What a setting's TOML value is, so the loader knows how to read and check it."""

    STR = "str"
    INT = "int"
    DURATION = "duration"  # seconds, or a string like "2s", "24h"
    SIZE = "size"  # bytes, or a string like "64MiB"
    PATH = "path"
    PORTS = "ports"  # a list of TCP ports
    NETWORKS = "networks"  # a list of CIDR networks


class Zero(Enum):
    """What a 0 in the file means for one setting: declared per setting, never per block."""

    VALUE = "value"  # 0 is a value like any other (often "off")
    DEFAULT = "default"  # 0 means "use the default" (the [batch] limits and times)


def _opt(
    default: Any,
    help: str,
    kind: Kind,
    *,
    key: str | None = None,
    lo=None,
    hi=None,
    zero: Zero = Zero.VALUE,
):
    if not isinstance(kind, Kind) or not isinstance(zero, Zero):
        raise TypeError(f"setting {key or help!r}: kind must be a Kind and zero a Zero")
    meta = {"help": help, "kind": kind, "key": key, "lo": lo, "hi": hi, "zero": zero}
    if isinstance(default, (list, tuple)):
        return field(default=tuple(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class ServerConfig:
    host: str = _opt("127.0.0.1", "Address the API binds to.", Kind.STR)
    port: int = _opt(8077, "TCP port of the API.", Kind.INT, lo=0, hi=65535)
    header_timeout: float = _opt(
        10.0,
        "A connection must send a request head within this (also the keep-alive idle time).",
        Kind.DURATION,
        lo=0.5,
    )
    body_timeout: float = _opt(
        10.0, "A request body must arrive within this (else 408).", Kind.DURATION, lo=0.5
    )
    max_connections: int = _opt(
        512, "Open client connections at most; one more is answered 503.", Kind.INT, lo=1
    )
    send_timeout: float = _opt(
        30.0,
        "A reply the client has not taken within this closes its connection.",
        Kind.DURATION,
        lo=1,
    )
    status_reads: int = _opt(
        4, "Status reads with results in flight per caller (429 past it).", Kind.INT, lo=1
    )
    status_bytes: int = _opt(
        64 * 1024 * 1024,
        "Result bytes of status replies in flight past each caller's first (429 past it).",
        Kind.SIZE,
        lo=1024 * 1024,
    )
    status_cache: int = _opt(
        16 * 1024 * 1024, "Bodies of finished jobs kept for repeated reads.", Kind.SIZE, lo=0
    )
    status_page: int = _opt(
        4 * 1024 * 1024,
        "Result bytes in one status reply; later results are paged with next_cursor.",
        Kind.SIZE,
        lo=64 * 1024,
    )
    event_heartbeat: float = _opt(
        15.0,
        "An event stream with nothing to say sends a comment this often.",
        Kind.DURATION,
        lo=0.05,
    )


@dataclass(frozen=True)
class StoreConfig:
    state_dir: Path = _opt(
        Path("var"),
        "Folder for sift.db, gates/, worker.lock and worker.sock (relative to the config file).",
        Kind.PATH,
    )
    busy_timeout: float = _opt(
        10.0, "How long a database write waits for another process's lock.", Kind.DURATION, lo=0
    )
    engine: str = _opt(
        "sqlite",
        "Where jobs, gates and wake-ups live: sqlite (one box) or postgres (several boxes).",
        Kind.STR,
    )
    dsn: str = _opt(
        "",
        "PostgreSQL connection string for engine postgres ($SIFT_DATABASE_URL wins over it).",
        Kind.STR,
    )
    worker_dead_after: float = _opt(
        15.0,
        "A worker silent this long is dead: /healthz says so, and on engine postgres its "
        "in-flight targets fail. Also accepted as `worker_lease`.",
        Kind.DURATION,
        lo=5,  # well above the 2 s heartbeat, so a live worker never looks dead
    )


@dataclass(frozen=True)
class FetchConfig:
    timeout: float = _opt(
        20.0, "Total time for one upstream fetch, redirects included.", Kind.DURATION, lo=0.1
    )
    connect_timeout: float = _opt(
        5.0, "Time to connect to one upstream address.", Kind.DURATION, lo=0.1
    )
    max_body: int = _opt(
        10 * 1024 * 1024, "Raw body cap, counted after decompression.", Kind.SIZE, lo=1024
    )
    output_cap: int = _opt(100_000, "Characters of content returned at most.", Kind.INT, lo=100)
    max_redirects: int = _opt(5, "Redirect hops followed at most.", Kind.INT, lo=0, hi=20)
    max_pdf_pages: int = _opt(
        500, "PDFs with more pages than this are refused (413).", Kind.INT, lo=1
    )
    user_agent: str = _opt(
        "Sift/0.1 (+web-fetch for AI agents)", "User-Agent sent upstream.", Kind.STR
    )
    robots: str = _opt(
        "batch",
        "Who obeys robots.txt: 'batch' (batch targets), 'always' (every fetch) or 'never'.",
        Kind.STR,
    )
    content_signals: str = _opt(
        "obey",
        "robots.txt Content-Signal ai-input=no: 'obey' (refuse the fetches that obey robots.txt) "
        "or 'ignore'.",
        Kind.STR,
    )
    robots_ttl: float = _opt(
        86400.0,
        "How long a site's robots.txt is kept (24 h at most).",
        Kind.DURATION,
        lo=60,
        hi=86400,
    )
    crawl_delay_max: float = _opt(
        10.0, "Longest robots.txt Crawl-delay honoured between batch fetches.", Kind.DURATION, lo=0
    )
    retry_after_max: float = _opt(
        300.0, "Longest upstream Retry-After a host's batch fetches wait.", Kind.DURATION, lo=0
    )


@dataclass(frozen=True)
class RenderConfig:
    children: int = _opt(
        6, "Render child processes at most (started on demand, then reused).", Kind.INT, lo=1, hi=64
    )
    per_caller: int = _opt(
        2, "Render children one caller may occupy at once in one process.", Kind.INT, lo=1, hi=64
    )
    memory: int = _opt(
        512 * 1024 * 1024,
        "Address-space limit of each render child and jq child; lowered to the child's size"
        " at start plus pool_memory where that is less.",
        Kind.SIZE,
        lo=128 * 1024**2,
    )
    timeout: float = _opt(
        10.0,
        "Time for everything after the download (render, grep, jq, question); also the render"
        " child's CPU limit per step.",
        Kind.DURATION,
        lo=0.1,
    )
    demote_after: float = _opt(
        0.5, "A render running longer than this drops to a lower CPU priority.", Kind.DURATION, lo=0
    )
    recycle_rss: int = _opt(
        256 * 1024 * 1024, "A render child whose RSS grows past this is replaced.", Kind.SIZE, lo=0
    )
    pool_memory: int = _opt(
        128 * 1024 * 1024,
        "PSS of the fork server, render children and jq children of one process together;"
        " past it idle children are recycled, then the largest busy one is killed (413).",
        Kind.SIZE,
        lo=48 * 1024 * 1024,
    )
    pdf_stream_max: int = _opt(
        64 * 1024 * 1024,
        "A PDF stream that inflates past this is refused (413).",
        Kind.SIZE,
        lo=1024,
    )


@dataclass(frozen=True)
class GuardConfig:
    allowed_ports: tuple[int, ...] = _opt((80, 443), "Upstream ports a URL may name.", Kind.PORTS)
    allow_networks: tuple[str, ...] = _opt(
        (),
        "Networks allowed even though they are not public (e.g. a loopback test site).",
        Kind.NETWORKS,
    )


@dataclass(frozen=True)
class GatesConfig:
    global_: int = _opt(
        8,
        "Fetches in flight at once, both processes together.",
        Kind.INT,
        key="global",
        lo=1,
        hi=256,
    )
    per_host: int = _opt(2, "Fetches in flight at once to one host.", Kind.INT, lo=1, hi=64)
    per_caller: int = _opt(4, "Fetches in flight at once for one caller.", Kind.INT, lo=1, hi=64)
    host_buckets: int = _opt(
        4096,
        "Host buckets of the gate files (bounds their number; engine postgres: one per host).",
        Kind.INT,
        lo=1,
        hi=65536,
    )
    requests_per_second: int = _opt(
        20,
        "Requests one API key may make a second, sustained, per API process (0: no limit).",
        Kind.INT,
        lo=0,
        hi=100_000,
    )
    request_burst: int = _opt(
        100,
        "Requests one API key may make at once before `requests_per_second` applies.",
        Kind.INT,
        lo=1,
        hi=100_000,
    )


@dataclass(frozen=True)
class CacheConfig:
    ttl: float = _opt(
        900.0, "How long a raw response is served from the content cache.", Kind.DURATION, lo=0
    )
    max_bytes: int = _opt(
        256 * 1024 * 1024, "Content cache size; least recently used goes first.", Kind.SIZE, lo=0
    )


def _zero_default(default: Any, help: str, kind: Kind, **bounds):
    """A setting where 0 means its default (docs/OPERATIONS.md §Configuration)."""
    return _opt(default, help, kind, zero=Zero.DEFAULT, **bounds)


@dataclass(frozen=True)
class BatchConfig:
    targets_per_job: int = _zero_default(32, "Targets one job may hold.", Kind.INT, lo=0, hi=10_000)
    jobs_per_caller: int = _zero_default(
        1, "Live (queued or running) jobs one caller may have.", Kind.INT, lo=0
    )
    jobs_total: int = _zero_default(8, "Live jobs in total.", Kind.INT, lo=0)
    ttl: float = _zero_default(
        86400.0, "A job is kept this long after its last activity.", Kind.DURATION, lo=0
    )
    max_bytes: int = _zero_default(
        64 * 1024 * 1024, "Budget for stored batch results.", Kind.SIZE, lo=0
    )
    drain_tasks: int = _zero_default(
        1,
        "Drain tasks in the worker process (1 or 2; larger values become 2). "
        "Also accepted as `workers`.",
        Kind.INT,
        lo=0,
    )
    hand_off_after: float = _zero_default(
        0.25,
        "A target still running after this no longer holds its drain task: it finishes on "
        "its own while the task serves other jobs (at once, when another caller's job is "
        "ready and the slow lane has a place).",
        Kind.DURATION,
        lo=0,
    )
    slow_targets: int = _zero_default(
        2,
        "Handed-off targets in flight at once; a second one of a caller only while another "
        "caller has a ready job.",
        Kind.INT,
        lo=0,
        hi=8,
    )
    retry_wait: float = _zero_default(
        2.0, "Wait before a busy target is tried again.", Kind.DURATION, lo=0
    )
    retry_for: float = _zero_default(
        600.0, "A target busy for longer than this is stored failed.", Kind.DURATION, lo=0
    )
    poll_interval: float = _zero_default(
        2.0, "Worker polls the job tables this often (nudges aside).", Kind.DURATION, lo=0
    )
    grace: float = _zero_default(
        10.0, "On shutdown, how long the in-flight fetch may finish.", Kind.DURATION, lo=0
    )
    webhook_timeout: float = _opt(
        10.0, "One webhook delivery try must be answered within this.", Kind.DURATION, lo=0.1
    )
    webhook_sends: int = _opt(8, "Webhook deliveries in flight at once.", Kind.INT, lo=1, hi=256)


@dataclass(frozen=True)
class DigestConfig:
    backend: str = _opt(
        "extractive",
        "'extractive' (no network; a question returns the best passages) or 'openai'.",
        Kind.STR,
    )
    base_url: str = _opt("", "OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1.", Kind.STR)
    model: str = _opt("", "Chat model name for the openai backend.", Kind.STR)
    api_key_env: str = _opt(
        "OPENAI_API_KEY", "Environment variable holding the endpoint's key.", Kind.STR
    )
    timeout: float = _opt(
        30.0, "Time allowed for one answer from the endpoint.", Kind.DURATION, lo=0.1
    )
    passages: int = _opt(4, "Passages ranked and returned as context.", Kind.INT, lo=1, hi=50)


@dataclass(frozen=True)
class RecoverConfig:
    archive_url: str = _opt("https://archive.org", "Web archive used by recover: true.", Kind.STR)


@dataclass(frozen=True)
class AuthConfig:
    keys_file: Path = _opt(
        Path(""), "Keys file (TOML); default keys.toml in the state dir.", Kind.PATH
    )


@dataclass(frozen=True)
class LogConfig:
    level: str = _opt("info", "debug, info, warning or error.", Kind.STR)
    format: str = _opt(
        "auto", "'json', 'kv', or 'auto' (kv on a terminal, json otherwise).", Kind.STR
    )


BLOCKS: dict[str, type] = {
    "server": ServerConfig,
    "store": StoreConfig,
    "fetch": FetchConfig,
    "render": RenderConfig,
    "guard": GuardConfig,
    "gates": GatesConfig,
    "cache": CacheConfig,
    "batch": BatchConfig,
    "digest": DigestConfig,
    "recover": RecoverConfig,
    "auth": AuthConfig,
    "log": LogConfig,
}


@dataclass(frozen=True)
class Config:
    server: ServerConfig = field(default_factory=ServerConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    fetch: FetchConfig = field(default_factory=FetchConfig)
    render: RenderConfig = field(default_factory=RenderConfig)
    guard: GuardConfig = field(default_factory=GuardConfig)
    gates: GatesConfig = field(default_factory=GatesConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    batch: BatchConfig = field(default_factory=BatchConfig)
    digest: DigestConfig = field(default_factory=DigestConfig)
    recover: RecoverConfig = field(default_factory=RecoverConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    log: LogConfig = field(default_factory=LogConfig)

    @property
    def state_dir(self) -> Path:
        return self.store.state_dir

    @property
    def db_path(self) -> Path:
        return self.store.state_dir / "sift.db"

    @property
    def keys_file(self) -> Path:
        return self.auth.keys_file


def toml_key(f) -> str:
    return f.metadata.get("key") or f.name


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_DURATION_UNITS = {None: 1, "ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {
    None: 1,
    "b": 1,
    "kb": 1000,
    "kib": 1024,
    "mb": 1000**2,
    "mib": 1024**2,
    "gb": 1000**3,
    "gib": 1024**3,
}


def parse_duration(value: Any) -> float:
    """Seconds from a number or a string such as "24h", "2s", "500ms"."""
    if isinstance(value, bool):
        raise ValueError('expected a duration (seconds or a string like "2s", "24h")')
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            return float(m.group(1)) * _DURATION_UNITS[m.group(2)]
    raise ValueError(f'expected a duration (seconds or a string like "2s", "24h"), got {value!r}')


def parse_size(value: Any) -> int:
    """Bytes from an integer or a string such as "64MiB"."""
    if isinstance(value, bool):
        raise ValueError('expected a size in bytes (or a string like "64MiB")')
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        m = _SIZE.match(value)
        if m:
            return int(float(m.group(1)) * _SIZE_UNITS[(m.group(2) or "b").lower() or None])
    raise ValueError(f'expected a size in bytes (or a string like "64MiB"), got {value!r}')


def _convert(kind: Kind, value: Any) -> Any:
    if kind is Kind.STR:
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {type(value).__name__}")
        return value
    if kind is Kind.INT:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {value!r}")
        return value
    if kind is Kind.DURATION:
        return parse_duration(value)
    if kind is Kind.SIZE:
        return parse_size(value)
    if kind is Kind.PATH:
        if not isinstance(value, str):
            raise ValueError(f"expected a path string, got {type(value).__name__}")
        return Path(value)
    if kind is Kind.PORTS:
        if not isinstance(value, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and 1 <= p <= 65535 for p in value
        ):
            raise ValueError("expected a list of ports (integers 1-65535)")
        return tuple(value)
    if kind is Kind.NETWORKS:
        if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
            raise ValueError('expected a list of networks such as "127.0.0.1/32"')
        try:
            return tuple(str(ipaddress.ip_network(n, strict=False)) for n in value)
        except ValueError as e:
            raise ValueError(f"not a network: {e}") from None
    raise AssertionError(kind)


# Keys renamed since the first release, still accepted: (block, old key) -> new key.
ALIASES = {
    ("batch", "workers"): "drain_tasks",
    ("store", "worker_lease"): "worker_dead_after",
}


def _unalias(name: str, raw: dict) -> dict:
    for (block, old), new in ALIASES.items():
        if block == name and old in raw:
            if new in raw:
                raise ConfigError(f"[{name}] {old}: an old name of {new}; set only {new}")
            raw = {(new if k == old else k): v for k, v in raw.items()}
    return raw


def _build_block(name: str, cls: type, raw: Any):
    if not isinstance(raw, dict):
        raise ConfigError(f"[{name}]: expected a table")
    raw = _unalias(name, raw)
    by_key = {toml_key(f): f for f in fields(cls)}
    unknown = sorted(set(raw) - set(by_key))
    if unknown:
        raise ConfigError(
            f"[{name}] {unknown[0]}: unknown key (known: {', '.join(sorted(by_key))})"
        )
    values = {}
    for key, value in raw.items():
        f = by_key[key]
        meta = f.metadata
        try:
            v = _convert(meta["kind"], value)
        except ValueError as e:
            raise ConfigError(f"[{name}] {key}: {e}") from None
        lo, hi = meta["lo"], meta["hi"]
        if lo is not None and v < lo:
            raise ConfigError(f"[{name}] {key}: must be at least {lo}, got {value!r}")
        if hi is not None and v > hi:
            raise ConfigError(f"[{name}] {key}: must be at most {hi}, got {value!r}")
        values[f.name] = v
    return cls(**values)


def _finish(cfg: Config, base: Path) -> Config:
    """Resolve paths, apply zero-means-default where a setting says so, and the drain-task
    clamp."""
    state_dir = cfg.store.state_dir
    if not state_dir.is_absolute():
        state_dir = (base / state_dir).resolve()
    keys = cfg.auth.keys_file
    if str(keys) in ("", "."):
        keys = state_dir / "keys.toml"
    elif not keys.is_absolute():
        keys = (base / keys).resolve()
    cfg = replace(cfg, **{name: _zero_to_default(getattr(cfg, name)) for name in BLOCKS})
    batch = cfg.batch
    if batch.drain_tasks > MAX_DRAIN_TASKS:
        log.warning("config: [batch] drain_tasks=%d clamped to 2", batch.drain_tasks)
        batch = replace(batch, drain_tasks=MAX_DRAIN_TASKS)
    if cfg.digest.backend not in ("extractive", "openai"):
        raise ConfigError(
            f"[digest] backend: must be 'extractive' or 'openai', got {cfg.digest.backend!r}"
        )
    if cfg.digest.backend == "openai" and not (cfg.digest.base_url and cfg.digest.model):
        raise ConfigError("[digest] base_url: the openai backend needs base_url and model")
    store = _finish_store(cfg.store)
    if cfg.fetch.robots not in ROBOTS_MODES:
        raise ConfigError(
            f"[fetch] robots: must be 'batch', 'always' or 'never', got {cfg.fetch.robots!r}"
        )
    if cfg.fetch.content_signals not in CONTENT_SIGNALS_MODES:
        raise ConfigError(
            "[fetch] content_signals: must be 'obey' or 'ignore', "
            f"got {cfg.fetch.content_signals!r}"
        )
    if cfg.log.level.lower() not in ("debug", "info", "warning", "error"):
        raise ConfigError(
            f"[log] level: must be debug, info, warning or error, got {cfg.log.level!r}"
        )
    if cfg.log.format not in ("auto", "json", "kv"):
        raise ConfigError(f"[log] format: must be auto, json or kv, got {cfg.log.format!r}")
    return replace(
        cfg,
        store=replace(store, state_dir=state_dir),
        auth=replace(cfg.auth, keys_file=keys),
        batch=batch,
    )


def _zero_to_default(block):
    """`block` with each 0 of a `Zero.DEFAULT` setting replaced by that setting's default."""
    changes = {
        f.name: f.default
        for f in fields(block)
        if f.metadata["zero"] is Zero.DEFAULT and getattr(block, f.name) == 0
    }
    return replace(block, **changes)


DATABASE_URL_ENV = "SIFT_DATABASE_URL"


def _finish_store(store: StoreConfig) -> StoreConfig:
    """The engine and its DSN: $SIFT_DATABASE_URL (kept out of config files, since a DSN may
    carry a password) wins over `[store] dsn`."""
    if store.engine not in ("sqlite", "postgres"):
        raise ConfigError(f"[store] engine: must be 'sqlite' or 'postgres', got {store.engine!r}")
    dsn = os.environ.get(DATABASE_URL_ENV) or store.dsn
    if store.engine == "postgres" and not dsn:
        raise ConfigError(f"[store] dsn: engine postgres needs dsn (or ${DATABASE_URL_ENV})")
    return replace(store, dsn=dsn)


def from_dict(raw: dict, base: Path | None = None) -> Config:
    """Build a Config from parsed TOML; `base` is the folder relative paths start from."""
    unknown = sorted(set(raw) - set(BLOCKS))
    if unknown:
        raise ConfigError(f"[{unknown[0]}]: unknown block (known: {', '.join(BLOCKS)})")
    blocks = {name: _build_block(name, BLOCKS[name], raw.get(name, {})) for name in BLOCKS}
    return _finish(Config(**blocks), base or Path.cwd())


def load(path: str | os.PathLike | None = None) -> Config:
    """Load `path`, else $SIFT_CONFIG, else the embedded defaults."""
    path = path or os.environ.get("SIFT_CONFIG") or None
    if path is None:
        return from_dict({}, Path.cwd())
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"config {p}: cannot read: {e.strerror}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config {p}: not valid TOML: {e}") from None
    return from_dict(raw, p.resolve().parent)


def describe() -> list[tuple[str, str, Any, str]]:
    """(block, key, default, help) for every setting, for docs and their drift test."""
    rows = []
    for name, cls in BLOCKS.items():
        for f in fields(cls):
            rows.append((name, toml_key(f), f.default, f.metadata["help"]))
    return rows
