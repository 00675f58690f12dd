"""Run a process with its steps timed by the wall clock: `timeline.py OUT -- PYTHON -m MOD …`.

The wrapper part 4 of `bench/breakdown.py` puts in front of `sift-worker` and `sift serve`: each
step of a drained target or a `/v1/fetch` (`Runner._one`, the pipeline, the host's pace, the
download, the render round trip, the store) appends (step, "b" or "e", `perf_counter()`) as
it begins and ends, and the list is written to OUT as JSON when the process returns (after
SIGTERM). Wall time, not loop time: what a step waits for (the site, the render child, the
database) counts, which a profile cannot show.
"""

from __future__ import annotations

import functools
import os
import runpy
import sys
import time

import orjson

STEPS = (  # (module, class or None, function, step)
    ("worker.drain", "Runner", "_one", "target"),
    ("worker.drain", None, "settle", "store"),
    ("sift.fetch.pipeline", "Pipeline", "fetch_target", "pipeline"),
    ("sift.fetch.pipeline", "Pipeline", "_pace", "pace"),
    ("sift.fetch.http", "HttpClient", "get", "download"),
    ("sift.fetch.renderpool", "RenderPool", "run", "render"),
)


def timed(fn, step: str, events: list):
    @functools.wraps(fn)
    async def wrapper(*args, **kwargs):
        events.append((step, "b", time.perf_counter()))
        try:
            return await fn(*args, **kwargs)
        finally:
            events.append((step, "e", time.perf_counter()))

    return wrapper


def main() -> None:
    out, rest = sys.argv[1], sys.argv[sys.argv.index("--") + 1 :]
    assert rest[1] == "-m", rest
    sys.argv = [rest[2], *rest[3:]]
    events: list = []
    for module, cls, name, step in STEPS:
        owner = __import__(module, fromlist=[name])
        owner = getattr(owner, cls) if cls else owner
        setattr(owner, name, timed(getattr(owner, name), step, events))
    pid = os.getpid()
    try:
        runpy.run_module(rest[2], run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    finally:
        if os.getpid() == pid:  # not in a forked render child
            with open(out, "wb") as f:
                f.write(orjson.dumps(events))


if __name__ == "__main__":
    main()
