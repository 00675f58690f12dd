"""jq runs callers' programs in a limited subprocess: right answers, jq's errors, hard limits."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import pytest

from sift.errors import InvalidTarget
from sift.fetch.jq import CHILD, LIMIT_MESSAGE, run_jq

DOC = json.dumps(
    {"items": [{"name": "mill", "age": 240}, {"name": "quay", "age": 310}], "town": "Saltmarsh"}
)


async def test_results_are_compact_json_one_per_line():
    out = await run_jq(".items[] | {name}", DOC)
    assert out == '{"name":"mill"}\n{"name":"quay"}\n'


async def test_strings_are_json_encoded_and_unicode_kept():
    assert await run_jq('.town, "é"', DOC) == '"Saltmarsh"\n"é"\n'


async def test_bytes_input_works_and_big_integers_survive():
    assert await run_jq(".", b"123456789012345678901234567890") != ""


async def test_compile_error_is_invalid_target_with_jq_message():
    with pytest.raises(InvalidTarget) as e:
        await run_jq(".items[", DOC)
    assert e.value.status == 400
    assert e.value.msg.startswith("jq: syntax error")


async def test_runtime_error_is_invalid_target_with_jq_message():
    with pytest.raises(InvalidTarget) as e:
        await run_jq(".town.name", DOC)
    assert e.value.msg == 'jq: Cannot index string with string ("name")'


async def test_non_json_input_is_invalid_target():
    with pytest.raises(InvalidTarget) as e:
        await run_jq(".", "<html>not json</html>")
    assert e.value.msg == "jq needs a JSON response"


async def test_child_sees_no_environment(monkeypatch):
    monkeypatch.setenv("SIFT_TEST_SECRET", "hunter2")
    out = await run_jq("$ENV | keys", "{}")
    assert "SIFT_TEST_SECRET" not in out
    assert "hunter2" not in await run_jq("env | tostring", "{}")


async def test_child_cannot_import_files_from_the_working_folder(tmp_path, monkeypatch):
    (tmp_path / "secret.json").write_text('{"key": "hunter2"}')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidTarget) as e:
        await run_jq('import "secret" as $s; $s', "{}")
    assert "module not found" in e.value.msg


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "program", ["def f: f; f", "repeat(.)", "[range(1e9)]", "last(range(1e12))"]
)
async def test_runaway_program_hits_the_limit(program):
    timeout = 1.5
    t0 = time.monotonic()
    with pytest.raises(InvalidTarget) as e:
        await run_jq(program, "{}", timeout=timeout, max_output=100_000)
    assert e.value.msg == LIMIT_MESSAGE
    assert time.monotonic() - t0 < timeout * 4


async def test_output_past_max_output_is_the_limit_error():
    with pytest.raises(InvalidTarget) as e:
        await run_jq("range(100000)", "null", max_output=1000)
    assert e.value.msg == LIMIT_MESSAGE


@pytest.mark.timeout(30)
async def test_event_loop_keeps_serving_while_jq_runs():
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    t0 = time.monotonic()
    with pytest.raises(InvalidTarget):
        await run_jq("def f: f; f", "{}", timeout=1.0)
    elapsed = time.monotonic() - t0
    task.cancel()
    # A blocked loop would tick about once; a free one close to elapsed / 10 ms.
    assert ticks > (elapsed / 0.01) * 0.3


async def test_concurrent_programs_do_not_mix_outputs():
    outs = await asyncio.gather(*(run_jq(f".items[{i % 2}].name", DOC) for i in range(6)))
    assert outs == ['"mill"\n', '"quay"\n'] * 3


async def test_overlong_program_is_invalid_target():
    with pytest.raises(InvalidTarget):
        await run_jq("." * 20000, "{}")


def _run_child(program: str, cpu: int, memory: int) -> int:
    proc = subprocess.run(
        [sys.executable, "-I", CHILD, str(cpu), str(memory)],
        input=json.dumps(program).encode() + b"\n{}",
        capture_output=True,
        timeout=30,
        env={},
    )
    return proc.returncode


@pytest.mark.timeout(40)
def test_child_cpu_limit_stops_it_on_its_own():
    """Even with no parent watching, RLIMIT_CPU ends a program that never stops."""
    assert _run_child("def f: f; f", cpu=1, memory=1 << 30) != 0


@pytest.mark.timeout(40)
def test_child_memory_limit_stops_it_on_its_own():
    assert _run_child("[range(1e9)] | length", cpu=20, memory=300 << 20) != 0


async def test_debug_output_does_not_hide_jq_errors():
    with pytest.raises(InvalidTarget) as e:
        await run_jq('debug | stderr | error("boom")', '{"a": 1}')
    assert e.value.msg == "jq: boom"


async def test_json_with_a_byte_order_mark_is_json():
    assert await run_jq(".a", b'\xef\xbb\xbf{"a": 1}') == "1\n"
