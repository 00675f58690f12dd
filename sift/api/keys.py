"""Typed application state: one `web.AppKey` per shared resource."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from sift.auth import KeyRing
from sift.config import Config
from sift.store import Store

CONFIG = web.AppKey("config", Config)
STORE = web.AppKey("store", Store)
KEYS = web.AppKey("keys", KeyRing)
PIPELINE = web.AppKey("pipeline", Any)
NUDGE = web.AppKey("nudge", Any)
CLOCK = web.AppKey("clock", Any)
METRICS = web.AppKey("metrics", Any)
CALLER = web.RequestKey("caller", Any)
WAITER = web.AppKey("waiter", Any)
