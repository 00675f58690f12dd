"""Typed application state: one aiohttp `web.AppKey` per shared resource (not API keys: those
are `sift.auth`)."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from sift.api.event_reads import SharedReads
from sift.api.status_reads import StatusReads
from sift.api.waiter import JobWaiter
from sift.api.worker_watch import WorkerWatch
from sift.auth import Caller, KeysFile
from sift.config import Config
from sift.fetch.pipeline import Pipeline
from sift.gates.rate import RequestRate
from sift.metrics import ApiMetrics
from sift.nudge import Nudger
from sift.signing import WebhookSecrets
from sift.store import Store

CONFIG = web.AppKey("config", Config)
STORE = web.AppKey("store", Store)
KEYS = web.AppKey("keys", KeysFile)
PIPELINE = web.AppKey("pipeline", Pipeline)
NUDGE = web.AppKey("nudge", Nudger)
CLOCK = web.AppKey("clock", Callable[[], float])
METRICS = web.AppKey("metrics", ApiMetrics)
WAITER = web.AppKey("waiter", JobWaiter)
READS = web.AppKey("reads", StatusReads)
EVENT_READS = web.AppKey("event_reads", SharedReads)
WORKER = web.AppKey("worker", WorkerWatch)
SECRETS = web.AppKey("secrets", WebhookSecrets)
RATE = web.AppKey("rate", RequestRate)
CALLER = web.RequestKey("caller", Caller)
