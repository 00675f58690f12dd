"""The deploy files: systemd units that pass `systemd-analyze`, and the Procfile.

`systemd-analyze verify` exits 0 even for an unknown directive or a bad value (it only prints a
warning), so these tests read what it prints. The shipped units name the documented install
path `/opt/sift/.venv`; verify would complain that it is not executable here, so it checks
copies whose ExecStart points at this environment's own `sift` and `sift-worker`.
"""

from __future__ import annotations

import ctypes.util
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sift.config import BatchConfig, parse_duration

ROOT = Path(__file__).resolve().parents[2]
UNITS = ("sift-api.service", "sift-worker.service")
INSTALL_BIN = "/opt/sift/.venv/bin/"
ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(
    ANALYZE is None, reason="systemd-analyze is not installed (Debian package: systemd)"
)


def parse_unit(path: Path) -> dict[str, list[tuple[str, str]]]:
    """Sections → (key, value) pairs in order; keys may repeat, as systemd allows."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), [])
            continue
        key, _, value = line.partition("=")
        current.append((key.strip(), value.strip()))
    return sections


def values(unit: str, section: str, key: str) -> list[str]:
    return [v for k, v in parse_unit(ROOT / "systemd" / unit)[section] if k == key]


def one(unit: str, section: str, key: str) -> str:
    found = values(unit, section, key)
    assert len(found) == 1, f"{unit}: expected one {key}=, got {found}"
    return found[0]


def _copies_with_real_binaries(tmp_path: Path) -> list[Path]:
    bindir = Path(sys.executable).parent
    for name in ("sift", "sift-worker"):
        if not (bindir / name).is_file():
            pytest.skip(f"{bindir / name} is not installed (pip install -e .)")
    copies = []
    for unit in UNITS:
        original = (ROOT / "systemd" / unit).read_text()
        text = original.replace(INSTALL_BIN, f"{bindir}/")
        changed = [
            a for a, b in zip(original.splitlines(), text.splitlines(), strict=True) if a != b
        ]
        assert changed and all(line.startswith("ExecStart=") for line in changed)
        (tmp_path / unit).write_text(text)
        copies.append(tmp_path / unit)
    return copies


def _verify(paths: list[Path], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [ANALYZE, "verify", *[f"./{p.name}" for p in paths]],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


@needs_analyze
def test_units_pass_systemd_analyze_verify_without_a_warning(tmp_path):
    copies = _copies_with_real_binaries(tmp_path)
    result = _verify(copies, tmp_path)
    output = (result.stdout + result.stderr).splitlines()
    about_ours = [line for line in output if any(u in line for u in UNITS)]
    assert result.returncode == 0, output
    assert about_ours == []


@needs_analyze
def test_verify_here_reports_a_bad_directive(tmp_path):
    """The check above can fail: verify on this machine does name a broken unit."""
    copies = _copies_with_real_binaries(tmp_path)
    api = copies[0]
    api.write_text(api.read_text().replace("ProtectSystem=strict", "ProtectSystem=sometimes"))
    result = _verify([api], tmp_path)
    assert "sift-api.service" in result.stdout + result.stderr


@needs_analyze
@pytest.mark.parametrize("unit", UNITS)
def test_each_unit_has_an_exposure_score_of_at_most_2(unit):
    result = subprocess.run(
        [ANALYZE, "security", "--offline=yes", str(ROOT / "systemd" / unit)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "--offline" in result.stderr and result.returncode != 0:
        pytest.skip("this systemd-analyze has no --offline (systemd < 250)")
    score = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", result.stdout)
    assert score, result.stdout[-500:] + result.stderr
    assert float(score.group(1)) <= 2.0


def test_both_units_run_as_one_dynamic_user_sharing_one_state_dir():
    for unit in UNITS:
        assert one(unit, "Service", "DynamicUser") == "yes"
        assert one(unit, "Service", "User") == "sift"
        assert one(unit, "Service", "StateDirectory") == "sift"
        assert one(unit, "Service", "UMask") == "0077"


def test_both_units_read_the_same_config_file():
    for unit in UNITS:
        env = " ".join(values(unit, "Service", "Environment")).split()
        assert "SIFT_CONFIG=/etc/sift/sift.toml" in env


def test_exec_start_uses_the_documented_install_path():
    assert one("sift-api.service", "Service", "ExecStart") == INSTALL_BIN + "sift serve"
    assert one("sift-worker.service", "Service", "ExecStart") == INSTALL_BIN + "sift-worker"
    assert "/opt/sift/.venv" in (ROOT / "docs" / "OPERATIONS.md").read_text()


def test_worker_stops_on_sigterm_with_time_beyond_its_grace():
    grace = BatchConfig().grace
    for unit in UNITS:
        assert one(unit, "Service", "KillSignal") == "SIGTERM"
    stop = parse_duration(one("sift-worker.service", "Service", "TimeoutStopSec"))
    assert stop > grace + 5


def test_worker_is_ordered_after_the_api():
    after = " ".join(values("sift-worker.service", "Unit", "After")).split()
    wants = " ".join(values("sift-worker.service", "Unit", "Wants")).split()
    assert "sift-api.service" in after and "sift-api.service" in wants


def test_units_allow_exactly_unix_and_internet_sockets():
    for unit in UNITS:
        families = one(unit, "Service", "RestrictAddressFamilies").split()
        assert sorted(families) == ["AF_INET", "AF_INET6", "AF_UNIX"]


def test_each_unit_has_a_memory_ceiling_that_covers_its_render_children():
    for unit in UNITS:
        assert one(unit, "Service", "MemoryMax") == "1G"


HARDENING = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectKernelLogs": "yes",
    "ProtectControlGroups": "yes",
    "ProtectClock": "yes",
    "ProtectHostname": "yes",
    "ProtectProc": "invisible",
    "ProcSubset": "pid",
    "RestrictNamespaces": "yes",
    "RestrictRealtime": "yes",
    "RestrictSUIDSGID": "yes",
    "LockPersonality": "yes",
    "MemoryDenyWriteExecute": "yes",
    "CapabilityBoundingSet": "",
    "SystemCallArchitectures": "native",
    "Restart": "on-failure",
}


@pytest.mark.parametrize("unit", UNITS)
def test_units_carry_the_hardening_settings(unit):
    settings = dict(parse_unit(ROOT / "systemd" / unit)["Service"])
    wrong = {k: settings.get(k) for k, v in HARDENING.items() if settings.get(k) != v}
    assert wrong == {}
    assert "@system-service" in values(unit, "Service", "SystemCallFilter")


def test_procfile_runs_the_api_and_the_worker():
    lines = (ROOT / "Procfile").read_text().splitlines()
    assert lines == ["api: sift serve", "worker: sift-worker"]


# -- MemoryDenyWriteExecute ---------------------------------------------------------------
#
# The units set MemoryDenyWriteExecute=yes. This runs every extraction library Sift loads under
# the same rules, as systemd applies them: a seccomp filter (systemd 252) or the kernel's
# PR_SET_MDWE (newer systemd on newer kernels). The probe first checks that a W+X mapping is
# really refused, so a filter that failed to load cannot pass.

SANDBOX = textwrap.dedent(
    """
    import ctypes, errno, os, sys
    PROT_WRITE, PROT_EXEC, SHM_EXEC = 0x2, 0x4, 0o100000

    class ArgCmp(ctypes.Structure):
        _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                    ("a", ctypes.c_uint64), ("b", ctypes.c_uint64)]

    def seccomp(libname):
        lib = ctypes.CDLL(libname)
        lib.seccomp_init.restype = ctypes.c_void_p
        lib.seccomp_init.argtypes = [ctypes.c_uint32]
        lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
        lib.seccomp_rule_add_array.argtypes = [
            ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
            ctypes.POINTER(ArgCmp)]
        lib.seccomp_load.argtypes = [ctypes.c_void_p]
        ctx = lib.seccomp_init(0x7FFF0000)  # allow everything else
        deny = 0x00050000 | errno.EPERM
        for name, mask in (("mmap", PROT_EXEC | PROT_WRITE), ("mprotect", PROT_EXEC),
                           ("pkey_mprotect", PROT_EXEC), ("shmat", SHM_EXEC)):
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            cmp = (ArgCmp * 1)(ArgCmp(2, 7, mask, mask))  # arg 2, SCMP_CMP_MASKED_EQ
            assert lib.seccomp_rule_add_array(ctx, deny, nr, 1, cmp) == 0, name
        libc = ctypes.CDLL(None)
        assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
        assert lib.seccomp_load(ctx) == 0

    def prctl():
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(65, 1, 0, 0, 0) != 0:  # PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN
            print("UNSUPPORTED", flush=True)
            sys.exit(0)

    seccomp(sys.argv[2]) if sys.argv[1] == "seccomp" else prctl()
    os.execv(sys.executable, [sys.executable, "-c", sys.argv[3]])
    """
)

PROBE = textwrap.dedent(
    """
    import ctypes, io, mmap, pathlib
    try:
        mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        raise SystemExit("the W^X rules are not in force")
    except PermissionError:
        pass
    assert ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda x: x + 1)(41) == 42
    import apsw, charset_normalizer, html_to_markdown, jq, lxml.html, orjson, re2, ssl, trafilatura
    import pypdfium2, pypdfium2.raw as raw
    import sift.api.app, sift.fetch.pipeline, worker.process
    html = next(pathlib.Path("tests/fixtures/pages").glob("*.html")).read_text()
    assert trafilatura.extract(html, output_format="markdown")
    assert html_to_markdown.convert(html).content and lxml.html.fromstring(html).text_content()
    assert re2.compile(r"(a+)+$").search("aaaa")
    assert jq.compile(".a[]").input_value({"a": [1, 2]}).all() == [1, 2]
    assert apsw.Connection(":memory:").execute("select 1").fetchall() == [(1,)]
    assert orjson.loads(orjson.dumps({"a": 1})) == {"a": 1}
    ssl.create_default_context()
    assert charset_normalizer.from_bytes("gr\\u00fc\\u00dfe".encode("latin-1")).best()
    pdf = pypdfium2.PdfDocument.new()
    page = pdf.new_page(200, 200)
    text = raw.FPDFPageObj_NewTextObj(pdf, b"Helvetica", ctypes.c_float(12))
    s = "hello pdf"
    raw.FPDFText_SetText(text, (ctypes.c_ushort * (len(s) + 1))(*map(ord, s), 0))
    raw.FPDFPageObj_Transform(text, 1, 0, 0, 1, 20, 100)
    raw.FPDFPage_InsertObject(page, text)
    raw.FPDFPage_GenerateContent(page)
    out = io.BytesIO()
    pdf.save(out)
    assert pypdfium2.PdfDocument(out.getvalue())[0].get_textpage().get_text_range() == s
    print("PROBE OK", flush=True)
    """
)


@pytest.mark.parametrize("mode", ["seccomp", "prctl"])
def test_extraction_libraries_run_under_memory_deny_write_execute(mode):
    libseccomp = ctypes.util.find_library("seccomp") or ""
    if mode == "seccomp" and not libseccomp:
        pytest.skip("libseccomp is not installed")
    result = subprocess.run(
        [sys.executable, "-c", SANDBOX, mode, libseccomp, PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.stdout.startswith("UNSUPPORTED"):
        pytest.skip("this kernel has no PR_SET_MDWE (Linux < 6.3)")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("PROBE OK")


@pytest.mark.parametrize("unit", UNITS)
def test_units_let_render_children_restrict_themselves_with_landlock(unit):
    allowed = " ".join(v for v in values(unit, "Service", "SystemCallFilter") if v[:1] != "~")
    for call in ("landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"):
        assert call in allowed.split()
