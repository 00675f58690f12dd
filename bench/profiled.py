"""Run a Python module under cProfile: `profiled.py OUT -- PYTHON -m MODULE ARGS…`.

The wrapper `bench/breakdown.py` puts in front of `sift serve` and `sift-worker` (`Sift(wrap=…)`):
the profile is written to OUT when the module returns, which both do after SIGTERM. Time in a
coroutine counts only while it runs on the event loop, so a step's cumulative time is what it
costs the process, not the wall time it waits.
"""

from __future__ import annotations

import cProfile
import runpy
import sys


def main() -> None:
    out, rest = sys.argv[1], sys.argv[sys.argv.index("--") + 1 :]
    assert rest[1] == "-m", rest
    sys.argv = [rest[2], *rest[3:]]
    profile = cProfile.Profile()
    profile.enable()
    try:
        runpy.run_module(rest[2], run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    finally:
        profile.disable()
        profile.dump_stats(out)


if __name__ == "__main__":
    main()
