"""The distribution's name and version, from one source: the installed package metadata.

The import package is `sift`, but the distribution is `sift-fetch`, because the name `sift` on
the public package index belongs to an unrelated project (docs/OPERATIONS.md §Installing).
`sift --version` and the OpenAPI document's `info.version` both read `version()`, so a release
moves them together (CHANGELOG.md).
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _metadata_version

DISTRIBUTION = "sift-fetch"
UNKNOWN = "0+unknown"  # run from a source tree that was never installed


@cache
def version() -> str:
    try:
        return _metadata_version(DISTRIBUTION)
    except PackageNotFoundError:
        return UNKNOWN
