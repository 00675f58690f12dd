"""Fixtures for the end-to-end tests: one test site and one process pair per module, and
fresh pairs for the fault tests (which kill processes)."""

from __future__ import annotations

import hashlib

import pytest

from tests.e2e.procs import SiftProcs, serve_site


def pytest_collection_modifyitems(items):
    for item in items:
        if "/tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="module")
def site():
    s = serve_site()
    yield s
    s.close()


@pytest.fixture(scope="module")
def sift(site):
    """One API and one worker for the whole module; tests use distinct target lists."""
    procs = SiftProcs(
        [site.port, site.blocked_port],
        batch={"jobs_per_caller": 8, "jobs_total": 16},
    )
    with procs:
        yield procs


@pytest.fixture
def fresh(site):
    """A factory of new process pairs (`fresh(start=True, **SiftProcs options)`), all closed
    after the test."""
    made: list[SiftProcs] = []

    def make(*, start: bool = True, **kw) -> SiftProcs:
        procs = SiftProcs([site.port, site.blocked_port], **kw)
        made.append(procs)
        return procs.start() if start else procs

    yield make
    for procs in made:
        procs.close()


@pytest.fixture
def tag(request) -> str:
    """A short value unique to the test: added to URLs so that no two tests share a target
    list (idempotency) or a cached page."""
    return hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:10]
