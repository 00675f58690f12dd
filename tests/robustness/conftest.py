"""Fixtures for the robustness suite: the end-to-end fixtures (test site, fresh process pairs,
per-test tag) reused as they are."""

from __future__ import annotations

from tests.e2e.conftest import fresh, site, tag

__all__ = ["fresh", "site", "tag"]
