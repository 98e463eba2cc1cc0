"""Asking the running service for a replay: what ``sharedsub replay`` and notebooks/replay.ipynb call.

A replay re-delivers to the subscription's consumers, which only the service running on the
data dir has, so :func:`request_replay` finds it (``<data>/_service.json``,
sharedsub.runtime.discovery) and calls ``POST /admin/replay``; with no service it refuses
(:class:`~sharedsub.core.errors.ReplayNeedsService`). What a replay does and which points of history
it can reach: :mod:`sharedsub.core.ops.replay`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sharedsub.core.errors import ReplayNeedsService, ReplayNotDurable, ServiceRefused
from sharedsub.core.ops.admin_rules import error_from_body
from sharedsub.core.ops.replay import parse_point
from sharedsub.runtime.discovery import call_admin, running_service
from sharedsub.runtime.inspection import display_name, find_subscription
from sharedsub.storage.catalog import load_catalog


def request_replay(
    data_dir: str,
    subscription: str,
    *,
    version: int | None = None,
    timestamp: str | dt.datetime | None = None,
    timeout: float = 120.0,
) -> dict[str, Any]:  # Any: the service's reply as json.loads gives it
    """Replay ``subscription`` (key, ``<namespace>:<name>`` or a unique name) from table
    ``version`` or from ``timestamp`` (ISO-8601 or an aware datetime; exactly one), through the
    service running on ``data_dir``. Returns the service's reply: ``{"ok": true, "replay":
    ReplayReport.to_json(), "message": one line}``, plus ``pid`` of the service.

    Raises:
        SubscriptionNotFound, AmbiguousSubscription: ``subscription`` names no / several ones.
        ConfigError: neither or both of ``version`` and ``timestamp``, or a malformed one.
        ReplayNotDurable: it is not durable.
        ReplayNeedsService: no service runs on ``data_dir``.
        ServiceRefused: the service refused (history gone, unknown version, ...; its message).
        ServiceUnavailable: the service did not answer.
    """
    stamp = timestamp.isoformat() if isinstance(timestamp, dt.datetime) else timestamp
    parse_point(version, stamp)  # refuse a malformed request before looking anything up
    record = find_subscription(load_catalog(data_dir), subscription)
    if not record.identity.durable:
        raise ReplayNotDurable(display_name(record))
    service = running_service(data_dir)
    if service is None:
        raise ReplayNeedsService(data_dir)
    body: dict[str, object] = {"subscription": record.key}
    if version is not None:
        body["version"] = version
    if stamp is not None:
        body["timestamp"] = stamp
    reply = call_admin(service, "/admin/replay", body, timeout=timeout)
    if not reply.get("ok"):
        _, message = error_from_body(reply)
        raise ServiceRefused(str(reply.get("error", "error")), message)
    return reply | {"pid": service.pid}
