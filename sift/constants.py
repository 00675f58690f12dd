"""Numbers that are part of the contract rather than configuration."""

FETCH_BODY_CAP = 64 * 1024  # bytes of a /v1/fetch (and any non-batch) request body
BATCH_BODY_CAP = 256 * 1024  # bytes of a POST /v1/batch body
WAIT_MAX = 60.0  # seconds a GET /v1/batch/{id}?wait=S may hold
HEARTBEAT_EVERY = 2.0  # seconds between worker heartbeats
DEFAULT_URL = "http://127.0.0.1:8077"

# sift_webhook_deliveries_total{outcome} (docs/API.md §Webhooks)
WEBHOOK_OUTCOMES = ("delivered", "retry", "failed", "gone", "refused")
JOB_OUTCOMES = ("created", "reused", "done", "partial", "failed", "cancelled", "restart")
TARGET_OUTCOMES = (
    "ok",
    "blocked",
    "robots",
    "timeout",
    "busy",
    "upstream_4xx",
    "upstream_5xx",
    "unsupported",
    "too_long",
    "cancel",
    "restart",
)

SECONDS_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    120,
    300,
    600,
    1800,
    3600,
)
BYTES_BUCKETS = (256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
MAX_AGE_MAX = 365 * 86400  # seconds: the largest max_age a target may ask (docs/API.md)
