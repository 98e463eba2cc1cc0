"""The routes of a running service's HTTP endpoint (the one place they are listed: add yours in
:func:`build_routes`).

======  ========================  =========================================================
GET     /metrics                  Prometheus text exposition 0.0.4 (see :class:`MetricsView`)
GET     /health                   ``{"ok", "pid", "amqp", "subscriptions", "fanout": {"state",
                                  "pid", "restarts", "last_exit"}, "fanout_last_batch_at",
                                  "storage": {"writable", "data_dir", "free_bytes", "parked"[,
                                  "error", "errno", "path", "since", "refusing"]}}``;
                                  503 with ``ok`` false while the fan-out job is not running or
                                  the data dir does not take writes (Committer.storage_status)
POST    /admin/unsubscribe        ``{"subscription": SUB}`` → ``{"ok": true, "subscription": {...}}``
POST    /admin/topics/create      ``{"topic": NAME}`` → ``{"ok": true, "topic", "path"}`` (as
                                  ``sharedsub topics create``)
POST    /admin/topics/drop        ``{"topic": NAME, "force": bool}`` → ``{"ok": true, "topic",
                                  "deleted_subscriptions": [...]}``
POST    /admin/replay             ``{"subscription": SUB, "version": V}`` or ``{..., "timestamp":
                                  ISO-8601}`` → ``{"ok": true, "replay": {...}, "message"}``
                                  (connectors/amqp/replays.py; sharedsub.core.ops.replay has the rules)
GET     /console, /console/...    the web console (connectors/http/console.py: its routes)
======  ========================  =========================================================

/health also says how the fan-out is doing: ``"status"`` (``ok``, ``degraded``, ``down``),
``"failing_subscriptions"`` and ``"stalled_topics"`` (:func:`fanout_problems` has the rules and the
status codes); with several members on the data dir, ``"member": {"slot", "idle_consumers"}``
(subscriptions whose consumers here wait: more members have consumers than partitions).

Refusals are the JSON error replies of connectors/http/admin.py (codes and exit codes from
sharedsub.core.ops.admin_rules). The endpoint sees the service only through
sharedsub.runtime.operations.ServiceOperations: reads are copies, admin calls run on the front
end's reactor thread.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import Any, TypedDict

from connectors.http.admin import Reply, Request, Routes
from sharedsub.core.errors import ConfigError
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops import metrics
from sharedsub.core.ops.replay import parse_point
from sharedsub.core.ops.stage_timing import merged, stage_family, stages_from_json
from sharedsub.runtime.operations import ServiceOperations
from sharedsub.storage import diskspace
from sharedsub.storage.backlog import subscription_backlog
from sharedsub.storage.fanout_stats import read_stats, topic_lag
from sharedsub.storage.objects.request_counts import REQUESTS

ADMIN_TIMEOUT = 60.0


def _string_field(request: Request, name: str) -> str:
    value = request.body.get(name)
    if not isinstance(value, str) or not value:
        raise ConfigError(name, f"the request body needs a non-empty string {name!r}")
    return value


class MetricsView:
    """Builds ``/metrics`` from the front end's counters, the backlog and the fan-out statistics.

    Reads, from the HTTP thread, only what is safe there: a counters snapshot and a copy of the
    in-memory catalog dict (sharedsub.core.ops.metrics explains why both are consistent under the GIL),
    the subscription tables (read-only Delta reads) and the fan-out statistics file. Backlog is
    recomputed at most every ``backlog_interval`` seconds (one scrape computes, concurrent ones
    reuse the last values).
    """

    def __init__(self, ops: ServiceOperations, backlog_interval: float) -> None:
        self._ops = ops
        self._root = ops.settings.data_dir
        self._interval = backlog_interval
        self._lock = threading.Lock()
        self._backlog: list[tuple[SubscriptionRecord, int, int]] = []
        self._backlog_at = -1e18

    def _records(self) -> list[SubscriptionRecord]:
        return self._ops.subscriptions()

    def backlogs(self) -> list[tuple[SubscriptionRecord, int, int]]:
        """``(record, messages, bytes)`` of every active subscription's backlog, computed at most
        every ``backlog_interval`` seconds (scrapes and the console share them)."""
        with self._lock:
            if time.monotonic() - self._backlog_at >= self._interval:
                out = []
                for rec in self._records():
                    parts = subscription_backlog(self._root, rec.key, rec.generation)
                    out.append((rec, sum(p.messages for p in parts), sum(p.bytes for p in parts)))
                self._backlog = out
                self._backlog_at = time.monotonic()
            return self._backlog

    def families(self) -> list[metrics.Family]:
        """Every family of a scrape."""
        snapshot = self._ops.counters()
        out = metrics.counter_families(snapshot)
        backlogs = self.backlogs()
        out.append(
            metrics.gauge(
                "sharedsub_backlog_messages",
                "Messages routed to the subscription's current generation and not settled for good "
                "(non-durable subscriptions: every routed message).",
                [({"topic": r.topic, "subscription": r.key}, float(n)) for r, n, _ in backlogs],
            )
        )
        out.append(
            metrics.gauge(
                "sharedsub_backlog_bytes",
                "Encoded size of the backlog messages.",
                [({"topic": r.topic, "subscription": r.key}, float(b)) for r, _, b in backlogs],
            )
        )
        state = self._ops.delivery_state_sizes()
        out.append(
            metrics.gauge(
                "sharedsub_delivery_state_seqs",
                "Seqs the front end holds in memory for a subscription generation so that it never "
                "sends a settled message again (acknowledged above the lowest open one, reopened by a "
                "replay, failure counts); bounded by the open messages, not by the subscription's history.",
                [({"table": table}, float(n)) for table, n in sorted(state.items())],
            )
        )
        out.append(
            metrics.gauge(
                "sharedsub_endpoint_state_entries",
                "Entries the front end holds about AMQP links, connections and oversized transfers in "
                "progress; each goes with its endpoint, so with no clients attached all are 0.",
                [({"table": table}, float(n)) for table, n in sorted(self._ops.endpoint_state_sizes().items())],
            )
        )
        stats = read_stats(self._root) or {}
        out.extend(self._fanout_families({r.topic for r, _, _ in backlogs}, stats))
        out.extend(self._storage_families())
        # The front end's stages and the fan-out job's (from its statistics file), one family.
        fanout_stages = stages_from_json(stats.get("stages"))
        out.append(stage_family(merged(self._ops.stages().items(), fanout_stages.items())))
        return out

    def _storage_families(self) -> list[metrics.Family]:
        """Whether the data dir takes the front end's writes, how often it refused them, its free space."""
        errors = self._ops.write_errors()
        writable = self._ops.storage_status()["writable"]
        free = diskspace.free_bytes(self._root)
        return [
            metrics.gauge(
                "sharedsub_storage_writable",
                "1 while the data dir takes the front end's writes; 0 during a storage fault (no space "
                "left, over quota, read-only file system): publishes are held, then refused.",
                [({}, 1.0 if writable else 0.0)],
            ),
            metrics.counter(
                "sharedsub_storage_write_errors_total",
                "Failed tries of the front end's writes because the data dir did not take them (retries "
                "included), by errno.",
                [({"errno": name}, float(n)) for name, n in sorted(errors.items())],
            ),
            metrics.gauge(
                "sharedsub_storage_free_bytes",
                "Bytes still free for the service on the data dir's file system.",
                [({}, float(free))] if free is not None else [],
            ),
            metrics.counter(
                "sharedsub_object_store_requests_total",
                "Requests the front end made to the data dir's object store itself (probes for new "
                "commits, log and data-file reads, the owner lease, parked rows, the users file), by "
                "kind and table family; delta-rs's own requests (commits, table loads) are not counted. "
                "None on a local data dir.",
                [({"kind": k, "family": f}, float(n)) for (k, f), n in sorted(REQUESTS.snapshot().items())],
            ),
        ]

    def _supervision_families(self) -> list[metrics.Family]:
        """Whether the embedded fan-out job runs, and how often it was restarted (``serve`` only)."""
        status = self._ops.fanout_status()
        if status is None:
            return []
        return [
            metrics.gauge(
                "sharedsub_fanout_up",
                "1 while the embedded fan-out job runs (its query completed a micro-batch), else 0.",
                [({}, 1.0 if status["state"] == "running" else 0.0)],
            ),
            metrics.counter(
                "sharedsub_fanout_restarts_total",
                "Unexpected exits of the embedded fan-out job (each followed by a restart).",
                [({}, float(status["restarts"]))],
            ),
        ]

    # Any: the fan-out statistics document as json.load gives it (sharedsub.storage.fanout_stats.read_stats)
    def _fanout_families(self, topics: set[str], stats: Mapping[str, Any]) -> list[metrics.Family]:
        routed: Mapping[str, Any] = stats.get("routed") or {}  # Any: as stats
        last: Mapping[str, Any] = stats.get("last_batch") or {}  # Any: as stats
        out = [
            metrics.counter(
                "sharedsub_routed_total",
                "Rows the fan-out job committed to the subscription's tables since the job started.",
                [
                    ({"topic": str(v.get("topic", "")), "subscription": k}, float(v.get("rows", 0)))
                    for k, v in sorted(routed.items())
                ],
            ),
            metrics.counter(
                "sharedsub_fanout_batches_total",
                "Micro-batches that routed messages since the fan-out job started.",
                [({}, float(stats.get("batches", 0)))] if stats else [],
            ),
            metrics.gauge(
                "sharedsub_fanout_batch_duration_seconds",
                "Duration of the fan-out job's last routing micro-batch (evaluation and commits).",
                [({}, float(last["seconds"]))] if "seconds" in last else [],
            ),
            *self._supervision_families(),
            metrics.gauge(
                "sharedsub_fanout_last_batch_timestamp_seconds",
                "When the fan-out job's last routing micro-batch finished (seconds since the epoch).",
                [({}, float(last["finished_at"]))] if "finished_at" in last else [],
            ),
        ]
        lags = topic_lags(self._root, stats, topics, time.time())
        failing = failing_subscriptions(stats)
        out += [
            metrics.gauge(
                "sharedsub_fanout_lag_seconds",
                "Seconds the oldest commit of the topic that the fan-out has not routed yet has waited "
                "(0 when it routed every commit); topics with subscriptions.",
                [({"topic": t}, round(lag, 3)) for t, lag in sorted(lags.items())],
            ),
            metrics.gauge(
                "sharedsub_fanout_failing_subscriptions",
                "Subscription tables the fan-out cannot commit to (their rows are parked and retried).",
                [({}, float(len(failing)))] if stats else [],
            ),
            metrics.gauge(
                "sharedsub_fanout_parked_rows",
                "Rows routed to a failing subscription table and parked until it can be written.",
                [({"topic": f["topic"] or "", "subscription": f["subscription"]}, float(f["parked_rows"])) for f in failing],
            ),
        ]
        return out


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


def build_routes(ops: ServiceOperations) -> Routes:
    """The route table of the HTTP endpoint of the service ``ops`` reaches (add routes here)."""
    root = ops.settings.data_dir
    view = MetricsView(ops, ops.settings.server.metrics_backlog_interval)

    def get_metrics(_request: Request) -> Reply:
        return Reply.text(metrics.render(view.families()), metrics.CONTENT_TYPE)

    def get_health(_request: Request) -> Reply:
        health = service_health(ops, read_stats(root) or {})
        return Reply.json(
            {
                "ok": health["status"] == "ok",
                "status": health["status"],
                "pid": os.getpid(),
                "amqp": ops.amqp_url,
                "subscriptions": len(ops.subscriptions()),
                "fanout": health["fanout"],
                "fanout_last_batch_at": health["fanout_last_batch_at"],
                "failing_subscriptions": health["failing_subscriptions"],
                "stalled_topics": health["stalled_topics"],
                "storage": health["storage"],
                **({"member": member} if (member := ops.member()) is not None else {}),
            },
            status=503 if health["status"] == "down" else 200,
        )

    def post_unsubscribe(request: Request) -> Reply:
        name = _string_field(request, "subscription")
        return Reply.json(ops.unsubscribe(name, timeout=ADMIN_TIMEOUT))

    def post_drop_topic(request: Request) -> Reply:
        topic = _string_field(request, "topic")
        force = request.body.get("force", False)
        if not isinstance(force, bool):
            raise ConfigError("force", "must be true or false")
        return Reply.json(ops.drop_topic(topic, force=force, timeout=ADMIN_TIMEOUT))

    def post_replay(request: Request) -> Reply:
        name = _string_field(request, "subscription")
        version, timestamp_ms = parse_point(request.body.get("version"), request.body.get("timestamp"))
        return Reply.json(ops.replay(name, version=version, timestamp_ms=timestamp_ms, timeout=ADMIN_TIMEOUT))

    def post_create_topic(request: Request) -> Reply:
        return Reply.json(ops.create_topic(_string_field(request, "topic")))

    routes: Routes = {
        ("GET", "/metrics"): get_metrics,
        ("GET", "/health"): get_health,
        ("POST", "/admin/unsubscribe"): post_unsubscribe,
        ("POST", "/admin/topics/create"): post_create_topic,
        ("POST", "/admin/topics/drop"): post_drop_topic,
        ("POST", "/admin/replay"): post_replay,
    }
    # The web console (connectors/http/console.py); its sampler runs for the service's life.
    from connectors.http.console import build_console  # (it imports this module's MetricsView)

    console, sampler = build_console(ops, view)
    console_routes = console.routes()
    if console_routes:
        sampler.start()
    routes.update(console_routes)
    return routes

