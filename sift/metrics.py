"""Prometheus metrics: the API's own fetch series plus the batch series from the database.

The batch counters and histograms are written by both processes into the `counter` table in the
same transaction as the event they count (see `sift.store.series`); the gauges are computed
from the job tables at scrape time. So one scrape of the API shows the worker's series too, and
they stay correct across a worker restart, with no shared memory between the processes. The
route reads that snapshot on the store's reader thread (`Store.batch_series`) and hands it to
`render`, which only formats.
"""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)

from sift.constants import (
    BYTES_BUCKETS,
    JOB_OUTCOMES,
    SECONDS_BUCKETS,
    TARGET_OUTCOMES,
    WEBHOOK_OUTCOMES,
)
from sift.store import BatchSeries
from sift.store import series as C

FETCH_OUTCOMES = (*TARGET_OUTCOMES, "invalid")  # interactive adds malformed requests

_HISTOGRAMS = {
    C.JOB_SECONDS: ("Submit-to-terminal time of a batch job.", SECONDS_BUCKETS),
    C.TARGET_SECONDS: ("Fetch time of one batch target.", SECONDS_BUCKETS),
    C.RESULT_BYTES: ("Size of one stored batch result.", BYTES_BUCKETS),
}


class BatchCollector:
    """Yields the batch series of the snapshot the scrape read (`series`)."""

    def __init__(self) -> None:
        self.series: BatchSeries | None = None
        self.workers_live: int | None = None

    def collect(self):
        if self.series is None:
            return
        rows, depth, inflight = self.series.counters, self.series.queue_depth, self.series.inflight
        for name, known, doc in (
            (C.JOBS_TOTAL, JOB_OUTCOMES, "Batch jobs by outcome."),
            (C.TARGETS_TOTAL, TARGET_OUTCOMES, "Batch targets by outcome."),
            (C.WEBHOOK_DELIVERIES, WEBHOOK_OUTCOMES, "Webhook delivery tries by outcome."),
        ):
            fam = CounterMetricFamily(name.removesuffix("_total"), doc, labels=["outcome"])
            for outcome in (*known, "other"):
                fam.add_metric([outcome], rows.get((name, outcome), 0.0))
            yield fam
        yield GaugeMetricFamily(
            "sift_batch_queue_depth", "Live (queued or running) batch jobs.", value=depth
        )
        yield GaugeMetricFamily(
            "sift_batch_targets_inflight", "Batch targets being fetched now.", value=inflight
        )
        if self.workers_live is not None:
            yield GaugeMetricFamily(
                "sift_workers_live",
                "Worker processes with a heartbeat under 10 s old (all boxes).",
                value=self.workers_live,
            )
        for name, (doc, bounds) in _HISTOGRAMS.items():
            buckets = [
                (_le(b) if b != "+Inf" else b, n) for b, n in C.cumulative(rows, name, bounds)
            ]
            yield HistogramMetricFamily(
                name, doc, buckets=buckets, sum_value=rows.get((name, "sum"), 0.0)
            )


def _le(bound: float) -> str:
    return str(float(bound)) if not math.isinf(bound) else "+Inf"


class ApiMetrics:
    """The API process's registry: interactive fetch series plus the batch collector."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.fetch_requests = Counter(
            "sift_fetch_requests",
            "Interactive fetches by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self.fetch_seconds = Histogram(
            "sift_fetch_seconds",
            "Interactive fetch latency.",
            buckets=SECONDS_BUCKETS,
            registry=self.registry,
        )
        self.fetch_cached = Counter(
            "sift_fetch_cache_hits", "Fetches served from the cache.", registry=self.registry
        )
        for outcome in (*FETCH_OUTCOMES, "other"):
            self.fetch_requests.labels(outcome)
        self.refused = Counter(
            "sift_requests_refused",
            "Requests refused before any work, by outcome (rate_limited: the per-key rate).",
            ["outcome"],
            registry=self.registry,
        )
        self.refused.labels("rate_limited")
        self._batch = BatchCollector()
        self.registry.register(self._batch)

    def observe_fetch(self, outcome: str, seconds: float, *, cached: bool = False) -> None:
        self.fetch_requests.labels(C.fold(outcome, FETCH_OUTCOMES)).inc()
        self.fetch_seconds.observe(seconds)
        if cached:
            self.fetch_cached.inc()

    def observe_refused(self, outcome: str) -> None:
        self.refused.labels(outcome).inc()

    def render(
        self, series: BatchSeries | None = None, *, workers_live: int | None = None
    ) -> bytes:
        """The exposition text; `series` is the batch snapshot read for this scrape."""
        self._batch.series = series
        self._batch.workers_live = workers_live
        return generate_latest(self.registry)
