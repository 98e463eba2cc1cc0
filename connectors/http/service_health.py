"""The service's state as ``/health`` and the console's overview report it: :func:`service_health`,
with the fan-out's problems (:func:`fanout_problems`) and each topic's lag (:func:`topic_lags`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, TypedDict

from sharedsub.runtime.operations import ServiceOperations
from sharedsub.storage import diskspace
from sharedsub.storage.fanout_stats import topic_lag


def topic_lags(root: str, stats: Mapping[str, object], topics: set[str], now: float) -> dict[str, float]:
    """``{topic: seconds}`` for ``topics``: how long the oldest commit of each that the fan-out has
    not routed has waited (:func:`sharedsub.storage.fanout_stats.topic_lag`, from the routed
    versions of the fan-out's statistics; a topic they do not name yet is read from its first
    commit). Empty before the job recorded any versions (the lag is unknown then)."""
    versions = stats.get("routed_versions")
    if not isinstance(versions, Mapping):
        return {}
    return {t: topic_lag(root, t, int(versions.get(t, -1)), now) for t in topics}


class FailingSubscription(TypedDict):
    """A subscription table the fan-out reports failing (:func:`failing_subscriptions`)."""

    subscription: str
    topic: str | None
    table: str | None
    since: float | None
    error: str | None
    parked_rows: int
    failures: int
    retry_at: float | None


class FanoutProblems(TypedDict):
    """What /health reports about routing besides the job's state (:func:`fanout_problems`)."""

    failing_subscriptions: list[FailingSubscription]
    stalled_topics: list[dict[str, object]]


def failing_subscriptions(stats: Mapping[str, object]) -> list[FailingSubscription]:
    """The subscription tables the fan-out's statistics report failing, by subscription key:
    ``subscription, topic, table, since, error, parked_rows, failures, retry_at``."""
    failing = stats.get("failing")
    if not isinstance(failing, Mapping):
        return []
    return [
        {
            "subscription": key,
            "topic": entry.get("topic"),
            "table": entry.get("table"),
            "since": entry.get("since"),
            "error": entry.get("error"),
            "parked_rows": int(entry.get("parked_rows") or 0),
            "failures": int(entry.get("failures") or 0),
            "retry_at": entry.get("retry_at"),
        }
        for key, entry in sorted(failing.items())
        if isinstance(entry, Mapping)
    ]


def fanout_problems(ops: ServiceOperations, stats: Mapping[str, object], lags: Mapping[str, float]) -> FanoutProblems:
    """What /health reports about routing besides the job's state; ``lags``: :func:`topic_lags`
    of the topics with subscriptions.

    ``failing_subscriptions``: subscription tables the fan-out cannot commit to
    (:func:`failing_subscriptions`; their rows are parked and retried, nothing is lost).
    ``stalled_topics``: ``{"topic", "lag_seconds"}`` of the topics with subscriptions whose oldest
    unrouted commit has waited more than ``[fanout] stalled_after`` seconds (the job is stuck or
    far behind).

    Either makes /health ``"status": "degraded"`` with ``"ok": false`` and HTTP **200**: the
    service still serves (the other subscriptions and topics), and restarting it repairs neither
    a broken table nor a slow job, so an orchestrator's liveness probe must not kill it; alert on
    ``ok``/``status`` or on the metrics. ``"status": "down"`` (HTTP 503) is the fan-out job (or
    the data dir) not working at all; ``"ok"`` (200, ``ok`` true) is everything working.
    """
    threshold = ops.settings.fanout.stalled_after
    return {
        "failing_subscriptions": failing_subscriptions(stats),
        "stalled_topics": [{"topic": t, "lag_seconds": round(v, 3)} for t, v in sorted(lags.items()) if v > threshold],
    }


class Health(FanoutProblems):
    """The service's state as /health and the console's overview report it (:func:`service_health`)."""

    status: str  # ok | degraded | down
    lags: dict[str, float]  # topic_lags of the topics with subscriptions
    fanout: Mapping[str, object]
    fanout_last_batch_at: float | None
    storage: dict[str, object]


def service_health(ops: ServiceOperations, stats: Mapping[str, Any]) -> Health:  # Any: as read_stats
    """``down`` while the fan-out job (embedded) does not run or the data dir does not take
    writes, ``degraded`` with failing subscriptions or stalled topics (:func:`fanout_problems`),
    else ``ok``; with each topic's lag and the fan-out's and the storage's state."""
    # Under ``frontend`` the job runs elsewhere (spark-submit): its own monitoring tells.
    fanout: Mapping[str, object] = ops.fanout_status() or {"state": "external"}
    storage = ops.storage_status()
    storage |= {"data_dir": ops.settings.data_dir, "free_bytes": diskspace.free_bytes(ops.settings.data_dir)}
    ok = fanout["state"] in ("running", "external") and bool(storage["writable"])
    lags = topic_lags(ops.settings.data_dir, stats, {r.topic for r in ops.subscriptions()}, time.time())
    problems = fanout_problems(ops, stats, lags)
    status = "down" if not ok else "degraded" if any(problems.values()) else "ok"
    last = (stats.get("last_batch") or {}).get("finished_at")
    return {
        "status": status,
        "lags": lags,
        "fanout": fanout,
        "fanout_last_batch_at": last,
        "storage": storage,
        "failing_subscriptions": problems["failing_subscriptions"],
        "stalled_topics": problems["stalled_topics"],
    }
