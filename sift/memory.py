"""Memory the process has freed goes back to the system (glibc; elsewhere nothing to do).

Response bodies of up to `[fetch] max_body` and status replies of megabytes pass through the
API and the worker. glibc serves blocks above its mmap threshold with their own mappings,
returned on free, but raises that threshold each time such a block is freed, after which the
same sizes come from the heap and its high-water mark stays resident. Pinning the threshold at
1 MiB keeps large blocks returnable; `trim()` hands back the heap's free top after a burst.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number
MMAP_THRESHOLD = 1024 * 1024


def _libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        lib = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    if lib is None or not (hasattr(lib, "malloc_trim") and hasattr(lib, "mallopt")):
        return None
    return lib


_LIBC = _libc()


def keep_large_blocks_returnable() -> None:
    """Pin glibc's mmap threshold (called once at process start)."""
    if _LIBC is not None:
        _LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def trim() -> None:
    """Give the heap's free memory back to the system."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
