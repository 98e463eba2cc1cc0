"""The routes of a running service's HTTP endpoint (the one place they are listed: add yours in
:func:`build_routes`).

======  ========================  =========================================================
GET     /metrics                  Prometheus text exposition 0.0.4 (connectors/http/metrics_view.py)
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
``"failing_subscriptions"`` and ``"stalled_topics"`` (connectors/http/service_health.py has the rules and the
status codes); with several members on the data dir, ``"member": {"slot", "idle_consumers"}``
(subscriptions whose consumers here wait: more members have consumers than partitions).

Refusals are the JSON error replies of connectors/http/admin.py (codes and exit codes from
sharedsub.core.ops.admin_rules). The endpoint sees the service only through
sharedsub.runtime.operations.ServiceOperations: reads are copies, admin calls run on the front
end's reactor thread.
"""

from __future__ import annotations

import os

from connectors.http.admin import Reply, Request, Routes
from connectors.http.console import build_console
from connectors.http.metrics_view import MetricsView
from connectors.http.service_health import service_health
from sharedsub.core.errors import ConfigError
from sharedsub.core.ops import metrics
from sharedsub.core.ops.replay import parse_point
from sharedsub.runtime.operations import ServiceOperations
from sharedsub.storage.fanout_stats import read_stats

ADMIN_TIMEOUT = 60.0


def _string_field(request: Request, name: str) -> str:
    value = request.body.get(name)
    if not isinstance(value, str) or not value:
        raise ConfigError(name, f"the request body needs a non-empty string {name!r}")
    return value


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

    console, sampler = build_console(ops, view)
    console_routes = console.routes()
    if console_routes:
        sampler.start()
    routes.update(console_routes)
    return routes

