"""A throwaway PostgreSQL server for the Postgres tier of the suite.

`PgServer` runs `initdb` and `pg_ctl` in a temporary directory, listens on a Unix socket in that
directory only (no TCP port at all), and is stopped and deleted at the end. As root it runs the
server as the `postgres` system user (the server refuses to run as root). Each test gets a
database of its own (`fresh_database`), created from an empty template in milliseconds.

When no server can be had (no `initdb` on PATH, no `postgres` user while root, or the server
does not start), `unavailable()` says why and the Postgres tier is skipped with that message;
`scripts/test` installs the server first where it can (README.md §Tests and benchmarks).
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

SKIP_PREFIX = "Postgres tier skipped: "
_ids = itertools.count()


def _bin(tool: str) -> str | None:
    """`tool` from PATH, else from Debian's versioned directory (its package leaves the server
    binaries off PATH)."""
    found = shutil.which(tool)
    if found:
        return found
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.access(os.path.join(d, tool), os.X_OK):
            return os.path.join(d, tool)
    return None


def _postgres_user() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        return None


def unavailable() -> str | None:
    """Why no server can be started here, or None when one can."""
    if os.environ.get("SIFT_TEST_NO_POSTGRES"):
        return "SIFT_TEST_NO_POSTGRES is set"
    for tool in ("initdb", "pg_ctl"):
        if _bin(tool) is None:
            return f"no `{tool}` on PATH or under /usr/lib/postgresql (install `postgresql`)"
    if os.geteuid() == 0 and _postgres_user() is None:
        return "running as root and there is no `postgres` system user to run the server as"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "the psycopg driver is not installed (pip install -e '.[test]')"
    return None


class PgServer:
    """One server in a temporary directory; a context manager."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="sift-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.user = _postgres_user()

    @property
    def socket_dir(self) -> str:
        return str(self.dir)

    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@/{dbname}?host={self.socket_dir}"

    def _run(self, *argv: str) -> None:
        kwargs = {}
        if self.user is not None:
            kwargs = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
        subprocess.run(
            [_bin(argv[0]) or argv[0], *argv[1:]],
            check=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=self.dir,
            timeout=120,
            **kwargs,
        )

    def start(self) -> PgServer:
        if self.user is not None:
            os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
        try:
            self._run(
                "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                "--no-sync", "-E", "UTF8", "--locale=C",
            )  # fmt: skip
            opts = (
                f"-c listen_addresses='' -c unix_socket_directories='{self.socket_dir}' "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                "-c max_connections=200 -c shared_buffers=32MB"
            )
            self._run(
                "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", opts, "-w", "start"
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
            out = getattr(e, "stdout", b"") or b""
            self.close()
            msg = f"the server did not start: {e}\n{out.decode(errors='replace')}"
            raise RuntimeError(msg) from None
        return self

    def fresh_database(self) -> str:
        """A new empty database; its DSN."""
        import psycopg

        name = f"sift_{os.getpid()}_{next(_ids)}"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'create database "{name}" template template0')
        return self.dsn(name)

    def restart(self) -> None:
        """Stop the server (every session is cut off) and start it again on the same data.
        `fast`, not `immediate`: with synchronous_commit off, an immediate stop may lose the
        last commits, which a real server with its defaults would not."""
        # `-l`: the new server must not inherit our stdout pipe, or this call never returns.
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-m", "fast", "-w", "restart"
        )  # fmt: skip

    def close(self) -> None:
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PgServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
