"""`sift mcp` through the official SDK's client session over stdio, against the real API and
worker over loopback (docs/MCP.md): the tools, their schemas, content equal to /v1/fetch's,
failures with their hints, progress while batch_wait holds, cancel, and the max_length bound."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys

from jsonschema import Draft202012Validator
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.e2e.procs import ROOT, wait_until

TOOLS = {
    "fetch",
    "batch_submit",
    "batch_wait",
    "batch_result",
    "batch_cancel",
    "batch_retry",
    "batch_list",
}
NEXT = re.compile(r"start_index=(\d+) to continue\]$")


def server_env(sift, who: str = "alice") -> dict[str, str]:
    return {"SIFT_URL": sift.base, "SIFT_KEY": sift.keys[who], "PYTHONPATH": str(ROOT)}


@contextlib.asynccontextmanager
async def mcp_session(sift, who: str = "alice"):
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "sift", "mcp"], env=server_env(sift, who), cwd=ROOT
    )
    async with stdio_client(params) as streams, ClientSession(*streams) as session:
        await session.initialize()
        yield session


async def call(session, name: str, args: dict, **kw):
    result = await session.call_tool(name, args, **kw)
    return result, result.content[0].text if result.content else ""


def content_of(answer: str) -> str:
    """The content of a one-page fetch or batch_result answer (after its heading)."""
    return answer.split("\n\n", 1)[1]


async def test_tools_are_listed_with_valid_schemas_and_descriptions(sift):
    async with mcp_session(sift) as s:
        tools = (await s.list_tools()).tools
    assert {t.name for t in tools} == TOOLS
    for tool in tools:
        Draft202012Validator.check_schema(tool.input_schema)
        if tool.output_schema:
            Draft202012Validator.check_schema(tool.output_schema)
        assert len(tool.description) > 80 and "\n " not in tool.description, tool.name
    fetch = next(t for t in tools if t.name == "fetch")
    assert set(fetch.input_schema["properties"]) >= {
        *("url", "mode", "question", "pages", "grep", "jq", "context", "recover"),
        *("start_index", "max_length"),
    }


async def test_fetch_returns_the_content_of_v1_fetch(sift, site, tag):
    url = site.url(f"/article/7?{tag}")
    async with mcp_session(sift) as s:
        result, text = await call(s, "fetch", {"url": url, "question": "What will it cost?"})
    status, direct = sift.call("POST", "/v1/fetch", {"url": url, "question": "What will it cost?"})
    assert status == 200 and not result.is_error
    assert text.startswith(f"Title: {direct['title']}\nURL: {url}\n")
    assert direct["context"] and all(p in direct["content"] for p in direct["context"])
    assert content_of(text) == direct["content"]  # the passages once, not again under a heading
    assert "Supporting passages:" not in text


async def test_a_failed_fetch_is_a_tool_error_with_the_error_and_its_hint(sift, site, tag):
    async with mcp_session(sift) as s:
        result, text = await call(s, "fetch", {"url": site.url(f"/status/404?{tag}")})
        refused, why = await call(s, "fetch", {"url": "http://10.0.0.1/"})
    assert result.is_error
    assert (
        "upstream answered HTTP 404 (HTTP 502) (hint: recover: try again with recover=true" in text
    )
    assert refused.is_error and "(HTTP 422)" in why


async def test_a_batch_of_three_through_submit_wait_result_equals_v1_fetch(sift, site, tag):
    targets = [
        {"url": site.url(f"/article/8?{tag}")},
        {"url": site.url(f"/data.json?{tag}"), "jq": ".items[].name"},
        {"url": site.url(f"/plain.txt?{tag}"), "grep": "needle", "mode": "raw"},
    ]
    async with mcp_session(sift) as s:
        sub, _ = await call(s, "batch_submit", {"targets": [targets[0]["url"], *targets[1:]]})
        job = sub.structured_content
        assert not sub.is_error and job["targets"] == 3 and job["status"] == "queued"
        waited, _ = await call(s, "batch_wait", {"job_id": job["job_id"], "timeout": 60})
        summary = waited.structured_content
        reads = [
            await call(s, "batch_result", {"job_id": job["job_id"], "idx": i}) for i in range(3)
        ]
    assert summary["status"] == "done" and summary["ended"] is True
    assert [t["status"] for t in summary["targets"]] == ["done"] * 3
    for i, target in enumerate(targets):
        status, direct = sift.call("POST", "/v1/fetch", target)
        assert status == 200
        assert summary["targets"][i]["chars"] == direct["chars"]
        assert not reads[i][0].is_error and content_of(reads[i][1]) == direct["content"]


async def test_a_failed_target_shows_its_hint_in_wait_and_in_its_result(sift, site, tag):
    async with mcp_session(sift) as s:
        sub, _ = await call(s, "batch_submit", {"targets": [site.url(f"/status/503?{tag}")]})
        job_id = sub.structured_content["job_id"]
        waited, _ = await call(s, "batch_wait", {"job_id": job_id})
        result, text = await call(s, "batch_result", {"job_id": job_id, "idx": 0})
    _, direct = sift.call("POST", "/v1/fetch", {"url": site.url(f"/status/503?{tag}")})
    failed = waited.structured_content["targets"][0]
    assert waited.structured_content["status"] == "failed" and direct["hint"]
    assert (failed["error"], failed["hint"]) == (direct["error"], direct["hint"])
    assert result.is_error
    assert f"target 0 failed: {direct['error']} (hint: {direct['hint']}: " in text


async def test_batch_wait_sends_progress_while_it_holds(sift, site, tag):
    urls = [site.url(f"/article/9?{tag}"), site.url(f"/article/10?{tag}"), site.held(tag)]
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))
        if done >= 2:
            site.release(tag)  # the job can end only after a notification reported 2 of 3

    try:
        async with mcp_session(sift) as s:
            sub, _ = await call(s, "batch_submit", {"targets": urls})
            args = {"job_id": sub.structured_content["job_id"], "timeout": 60}
            waited, _ = await call(s, "batch_wait", args, progress_callback=on_progress)
    finally:
        site.release(tag)
    assert waited.structured_content["status"] == "done"
    dones = [p[0] for p in progress]
    assert 2 in dones and dones == sorted(set(dones)) and dones[-1] == 3
    assert all(p[1] == 3 for p in progress) and progress[0][2].startswith(
        f"running: {int(dones[0])} of 3 finished ("
    )


async def test_cancel_stops_a_live_job_and_a_finished_one_is_a_tool_error(sift, site, tag):
    try:
        async with mcp_session(sift) as s:
            sub, _ = await call(
                s, "batch_submit", {"targets": [site.held(tag), site.url(f"/article/11?{tag}")]}
            )
            job_id = sub.structured_content["job_id"]
            cancelled, _ = await call(s, "batch_cancel", {"job_id": job_id})
            site.release(tag)
            waited, _ = await call(s, "batch_wait", {"job_id": job_id})
            again, _ = await call(s, "batch_cancel", {"job_id": job_id})
            pending, why = await call(s, "batch_result", {"job_id": job_id, "idx": 1})
    finally:
        site.release(tag)
    assert cancelled.structured_content["status"] == "cancelled"
    assert waited.structured_content["status"] == "cancelled"
    assert waited.structured_content["targets"][1]["status"] == "pending"
    assert not again.is_error and again.structured_content["status"] == "cancelled"
    assert pending.is_error and "target 1 is pending, not fetched yet: call batch_wait" in why


async def test_cancel_of_a_finished_job_names_its_status(sift, site, tag):
    async with mcp_session(sift) as s:
        sub, _ = await call(s, "batch_submit", {"targets": [site.url(f"/article/12?{tag}")]})
        job_id = sub.structured_content["job_id"]
        await call(s, "batch_wait", {"job_id": job_id})
        result, text = await call(s, "batch_cancel", {"job_id": job_id})
    assert result.is_error and "job already finished: done (HTTP 409)" in text


async def test_no_tool_answer_exceeds_max_length_and_pages_join_to_the_content(sift, site, tag):
    url = site.url(f"/big?words=6000&{tag}")
    status, direct = sift.call("POST", "/v1/fetch", {"url": url})
    assert status == 200 and direct["chars"] > 30_000
    async with mcp_session(sift) as s:
        sub, _ = await call(s, "batch_submit", {"targets": [url]})
        job_id = sub.structured_content["job_id"]
        await call(s, "batch_wait", {"job_id": job_id})
        for tool, args in (("fetch", {"url": url}), ("batch_result", {"job_id": job_id, "idx": 0})):
            for max_length in (1000, 4321, 100_000):
                start, parts = 0, []
                while True:
                    args_now = {**args, "start_index": start, "max_length": max_length}
                    result, text = await call(s, tool, args_now)
                    assert not result.is_error and len(text) <= max_length, (tool, max_length)
                    body = content_of(text)
                    m = NEXT.search(text)
                    if not m:
                        parts.append(body)
                        break
                    parts.append(body[: int(m.group(1)) - start])
                    start = int(m.group(1))
                assert "".join(parts) == direct["content"], (tool, max_length)
        past, why = await call(s, "fetch", {"url": url, "start_index": 10**7})
        small, _ = await call(s, "fetch", {"url": url, "max_length": 10})
    assert past.is_error and f"the content has {direct['chars']} characters" in why
    assert small.is_error  # below the schema's minimum


async def test_batch_retry_and_batch_list_through_mcp(sift, site, tag):
    urls = [site.url(f"/article/14?{tag}"), site.url(f"/status/500?{tag}")]
    async with mcp_session(sift) as s:
        sub, _ = await call(s, "batch_submit", {"targets": urls})
        job_id = sub.structured_content["job_id"]
        await call(s, "batch_wait", {"job_id": job_id})
        retried, _ = await call(s, "batch_retry", {"job_id": job_id})
        new_id = retried.structured_content["job_id"]
        waited, _ = await call(s, "batch_wait", {"job_id": new_id})
        again, why = await call(s, "batch_retry", {"job_id": new_id, "only_retryable": False})
        listed, _ = await call(s, "batch_list", {"limit": 100})
    assert retried.structured_content["retry_of"] == job_id
    assert retried.structured_content["targets"] == 1
    assert [t["url"] for t in waited.structured_content["targets"]] == urls[1:]
    assert waited.structured_content["retry_of"] == job_id
    assert again.is_error is False or "(HTTP 4" in why
    ids = [j["job_id"] for j in listed.structured_content["jobs"]]
    assert new_id in ids and job_id in ids and ids.index(new_id) < ids.index(job_id)


async def test_batch_retry_of_a_live_job_is_a_tool_error_naming_the_conflict(sift, site, tag):
    try:
        async with mcp_session(sift) as s:
            sub, _ = await call(s, "batch_submit", {"targets": [site.held(tag)]})
            result, text = await call(
                s, "batch_retry", {"job_id": sub.structured_content["job_id"]}
            )
    finally:
        site.release(tag)
    assert result.is_error and "(HTTP 409)" in text


async def test_a_wrong_key_is_a_tool_error_and_a_missing_key_stops_the_server(sift, site):
    sift.keys["nobody"] = "sk-sift-unknown"
    async with mcp_session(sift, "nobody") as s:
        result, text = await call(s, "fetch", {"url": site.url("/article/1")})
    assert result.is_error and "unknown API key (HTTP 401)" in text
    env = {k: v for k, v in os.environ.items() if k not in ("SIFT_KEY", "SIFT_URL")}
    done = subprocess.run(
        [sys.executable, "-m", "sift", "mcp"],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().startswith("sift: SIFT_KEY is not set")
    json.dumps(result.model_dump())  # the whole answer is plain JSON


async def test_the_target_in_flight_at_cancel_is_readable_once_stored(sift, site, tag):
    try:
        async with mcp_session(sift) as s:
            targets = [site.held(tag), site.url(f"/article/13?{tag}")]
            sub, _ = await call(s, "batch_submit", {"targets": targets})
            job_id = sub.structured_content["job_id"]
            wait_until(lambda: any(h.endswith(f"/held/{tag}") for h in list(site.hits)))
            await call(s, "batch_cancel", {"job_id": job_id})
            waited, _ = await call(s, "batch_wait", {"job_id": job_id})
            early, why = await call(s, "batch_result", {"job_id": job_id, "idx": 0})
            site.release(tag)
            wait_until(lambda: sift.job(job_id)["targets"][0]["status"] == "done")
            late, text = await call(s, "batch_result", {"job_id": job_id, "idx": 0})
    finally:
        site.release(tag)
    assert waited.structured_content["status"] == "cancelled"
    assert early.is_error and "target 0 is running" in why
    assert not late.is_error and content_of(text) == "released"


async def test_fetch_passes_links_and_images_through(sift, site, tag):
    args = {"url": site.url(f"/article/15?{tag}"), "mode": "markdown", "links": False}
    async with mcp_session(sift) as s:
        result, text = await call(s, "fetch", {**args, "images": False})
    status, direct = sift.call("POST", "/v1/fetch", {**args, "images": False})
    assert status == 200 and not result.is_error
    assert content_of(text) == direct["content"] and "](" not in direct["content"]


async def test_print_config_gives_a_host_entry_that_starts_a_working_server(sift):
    """docs/MCP.md §Host configuration: the printed entry, as a host would run it (absolute
    command, its env only), serves the tools."""
    printed = subprocess.run(
        [sys.executable, "-m", "sift", "mcp", "--print-config"],
        env={**os.environ, **server_env(sift)},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    entry = json.loads(printed.stdout)["mcpServers"]["sift"]
    assert os.path.isabs(entry["command"]) and os.access(entry["command"], os.X_OK)
    assert entry["env"] == {"SIFT_URL": sift.base, "SIFT_KEY": sift.keys["alice"]}
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"])
    async with stdio_client(params) as streams, ClientSession(*streams) as session:
        await session.initialize()
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS


async def test_batch_wait_says_what_a_live_job_waits_on_and_its_eta(sift, site, tag):
    """docs/MCP.md §Tools, docs/API.md §Waiting targets: the same facts as the status body."""
    status, sub = sift.submit([site.held(tag), site.url(f"/article/46?{tag}")])
    assert status == 202, sub
    try:
        wait_until(
            lambda: sift.job(sub["job_id"])["targets"][0]["status"] == "running",
            what="target 0 running",
        )
        async with mcp_session(sift) as s:
            waited, _ = await call(s, "batch_wait", {"job_id": sub["job_id"], "timeout": 0})
        summary = waited.structured_content
        assert summary["ended"] is False and 0 <= summary["eta"]["min"] <= summary["eta"]["max"]
        assert summary["waiting_on"] == f"fetching #0 {site.held(tag)}"
        assert summary["targets"][1]["waiting"]["reason"] == "turn"
    finally:
        site.release(tag)
