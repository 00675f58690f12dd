"""Confinement for the children that parse hostile bytes (render and jq children): a network
namespace of their own, and Landlock: read only the code they may still import, no TCP, no
signals or abstract Unix sockets outside their own domain (docs/SECURITY.md §What a render
child can reach). Standard library only: the jq child loads this file by path.

Landlock is the kernel's unprivileged sandbox (Linux 5.13+; TCP rules from ABI 4, scopes from
ABI 6). There is no Python binding for it in the standard library and no well-kept package, so
the three system calls are made through ctypes here; each feature is used only when the
running kernel's ABI has it, and a kernel without Landlock leaves the child as it was
(`restrict` says what it did). A child restricted this way cannot open the service's database,
keys file or config by path, whatever their permissions.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import site
import stat
import sys
from collections.abc import Iterable

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # same on every arch
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | (1 << 14) | (1 << 15)  # what a file rule may hold
_NET_TCP = (1 << 0) | (1 << 1)  # bind, connect (ABI 4)
_SCOPES = (1 << 0) | (1 << 1)  # abstract Unix sockets, signals (ABI 6)
_SYSTEM_CODE = ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib")


CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000


def unshare_network() -> bool:
    """Move this (single-threaded) process into a user and network namespace of its own, where
    no interface is up; False where the kernel refuses (no root needed where it allows)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.unshare(ctypes.c_int(CLONE_NEWUSER | CLONE_NEWNET)) == 0
    except (OSError, AttributeError):
        return False


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


def code_paths() -> tuple[list[str], list[str]]:
    """What a child may read: (trees it may read and run code from, folders it may only list).

    The interpreter's and the environment's library trees, the system's library folders, and
    the top-level package (or module file) of every module this process has loaded, never a
    whole folder on `sys.path` (the repository root may hold `var/`, the default state dir):
    those are only listable, so the import system's folder scans still work."""
    trees = {
        os.path.join(prefix, "lib")
        for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    }
    with contextlib.suppress(AttributeError):
        trees.update(site.getsitepackages())
    trees.update(_SYSTEM_CODE)
    trees = {os.path.realpath(t) for t in trees if os.path.exists(t)}
    covered = tuple(t + os.sep for t in trees)
    entries = [os.path.realpath(p or os.getcwd()) for p in sys.path]
    folders: dict[str, str] = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str):
            continue
        folder = os.path.dirname(path)
        if folder not in folders:
            folders[folder] = os.path.realpath(folder)
        path = os.path.join(folders[folder], os.path.basename(path))
        if path.startswith(covered):
            continue
        for entry in entries:
            if path.startswith(entry + os.sep):
                trees.add(os.path.join(entry, path[len(entry) + 1 :].split(os.sep, 1)[0]))
                break
    trees.discard("/")
    listable = {e for e in entries if os.path.isdir(e) and e != "/"}
    return sorted(trees), sorted(listable - trees)


def abi() -> int:
    """The kernel's Landlock ABI version; 0 when it has none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        version = libc.syscall(
            _SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION
        )
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def restrict(trees: Iterable[str], listable: Iterable[str]) -> dict[str, bool]:
    """Restrict this process (and its future children) for good; what it achieved."""
    version = abi()
    done = {"files": False, "tcp": False, "scopes": False}
    if version < 1:
        return done
    libc = ctypes.CDLL(None, use_errno=True)
    fs = _FS_BY_ABI[max(v for v in _FS_BY_ABI if v <= version)]
    attr = _RulesetAttr(fs, _NET_TCP if version >= 4 else 0, _SCOPES if version >= 6 else 0)
    size = 24 if version >= 6 else 16 if version >= 4 else 8
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        return done
    try:
        for path in trees:
            _allow(libc, ruleset, path, EXECUTE | READ_FILE | READ_DIR)
        for path in listable:
            _allow(libc, ruleset, path, READ_DIR)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return done
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) != 0:
            return done
    finally:
        os.close(ruleset)
    return {"files": True, "tcp": version >= 4, "scopes": version >= 6}


def _allow(libc, ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= _FILE_RIGHTS
        rule = _PathBeneath(access, fd)
        libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0)
    finally:
        os.close(fd)
