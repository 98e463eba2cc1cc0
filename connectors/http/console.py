"""The web console's routes: the page, its assets and its JSON reads (docs/console.md).

======  ==========================  ========================================================
GET     /console                    the page (connectors/http/console_assets/index.html)
GET     /console/static/NAME        its script and style sheet (:data:`ASSETS`)
GET     /console/api/session        access mode, whether the request carried the token, refresh
GET     /console/api/overview       topics, subscriptions, the fan-out, storage, members
GET     /console/api/topic          ``?name=T``: partitions, publish-rate chart, subscriptions
GET     /console/api/subscription   ``?name=SUB``: backlog, consumers, counts, charts
GET     /console/api/connections    this front end's connections and links; the catalog's consumers
GET     /console/api/history        ``?subscription=SUB``: the generation table's Delta versions
GET     /console/api/browse         ``?subscription=SUB&selector=S&after=SEQ&limit=N``: a page
                                    of its backlog (sharedsub.runtime.backlog_browse)
======  ==========================  ========================================================

Actions are the admin calls (``POST /admin/...``, connectors/http/endpoints.py) with the token.
Who may read what is sharedsub.core.ops.console_access's decision, from ``[server] console`` and
whether the request carried the admin token (``Request.authorized``); a refused read is the
endpoint's 401 JSON error. Every reply of the console carries a Content-Security-Policy that
allows only the service's own scripts, styles and fetches, and no framing.

Reads come from what ``/metrics`` and ``/health`` use (the front end's counters, the shared
backlog computation, the fan-out's statistics file) and from the data dir's tables (catalog links,
subscription tables, Delta logs), cached for ``[server] console_refresh`` seconds where several
pages share them, so a console open on every member costs a bounded number of reads per refresh.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import importlib.resources
import threading
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from connectors.http.admin import Reply, Request, Routes
from connectors.http.console_sampler import ConsoleSampler
from connectors.http.metrics_view import MetricsView
from connectors.http.service_health import service_health
from sharedsub.core import layout
from sharedsub.core.errors import AdminTokenRequired, ConfigError, TopicNotFound
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops.console_access import ConsoleAccess, Need, allowed, parse_access
from sharedsub.core.ops.metrics import ACKNOWLEDGED, DEAD_LETTERED, DELIVERED, EXPIRED, REDELIVERED
from sharedsub.runtime.backlog_browse import browse_backlog
from sharedsub.runtime.cluster.cluster_status import ClusterStatus, Dispatch, cluster_status, read_dispatch
from sharedsub.runtime.inspection import Consumer, SubscriptionStatus, consumers_by_key, find_subscription
from sharedsub.runtime.operations import ServiceOperations
from sharedsub.storage.backlog import subscription_backlog
from sharedsub.storage.delta.table_history import recent_history
from sharedsub.storage.fanout_stats import read_stats
from sharedsub.storage.topics import list_topic_partitions

ASSETS = {"console.js": "text/javascript; charset=utf-8", "console.css": "text/css; charset=utf-8"}
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
_HEADERS = (("Content-Security-Policy", CSP), ("X-Content-Type-Options", "nosniff"), ("Cache-Control", "no-store"))
HISTORY_VERSIONS = 200  # newest versions the history timeline shows
BROWSE_LIMIT = 200  # most messages one browse page holds
CALL_TIMEOUT = 10.0  # seconds a read that runs on the reactor thread may take
DISPATCH_SHOWN = 500  # dispatch records (a GET each on the bucket) one reading takes, at most
DISPATCH_TTL = 30.0  # seconds a reading of the dispatch records serves, at least

_T = TypeVar("_T")


class _Cached:
    """Values computed at most once per ``ttl`` seconds per key, shared by concurrent requests."""

    def __init__(self, ttl: float) -> None:
        self._ttl = ttl
        self._lock = threading.Lock()
        self._values: dict[str, tuple[float, object]] = {}

    def get(self, key: str, compute: Callable[[], _T]) -> _T:
        with self._lock:
            found = self._values.get(key)
            if found is not None and time.monotonic() - found[0] < self._ttl:
                return found[1]  # type: ignore[return-value]  # the value compute gave for this key
            value = compute()
            self._values[key] = (time.monotonic(), value)
            return value


@functools.cache
def _asset(name: str) -> bytes:
    """A file of connectors/http/console_assets (package data), read once."""
    return importlib.resources.files("connectors.http").joinpath("console_assets", name).read_bytes()


def _reply(document: object) -> Reply:
    return dataclasses.replace(Reply.json(document), headers=_HEADERS)


def _query_field(request: Request, name: str) -> str:
    value = request.query.get(name, "")
    if not value:
        raise ConfigError(name, f"the request needs a non-empty query parameter {name!r}")
    return value


def _int_field(request: Request, name: str, default: int | None, low: int, high: int) -> int | None:
    text = request.query.get(name, "")
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(name, f"must be an integer, got {text[:40]!r}") from None
    if not low <= value <= high:
        raise ConfigError(name, f"must be in [{low}, {high}], got {value}")
    return value


def _iso(value: dt.datetime | None) -> str | None:
    return value.astimezone(dt.UTC).isoformat() if value is not None else None


class Console:
    """The console of one service: its routes (:meth:`routes`) and the reads behind them."""

    def __init__(self, ops: ServiceOperations, view: MetricsView, sampler: ConsoleSampler) -> None:
        self._ops = ops
        self._root = ops.settings.data_dir
        self._view = view
        self._sampler = sampler
        self.access: ConsoleAccess = parse_access(ops.settings.server.console)
        self._cache = _Cached(ops.settings.server.console_refresh)
        self._dispatch_cache = _Cached(max(ops.settings.server.console_refresh, DISPATCH_TTL))

    # ------------------------------------------------------------------ routes

    def routes(self) -> Routes:
        """The console's routes (none when ``[server] console = "off"``)."""
        if self.access is ConsoleAccess.OFF:
            return {}
        out: Routes = {
            ("GET", "/console"): self._page,
            ("GET", "/console/"): self._page,
            ("GET", "/console/api/session"): self._guarded(Need.PAGE, self.session),
            ("GET", "/console/api/overview"): self._guarded(Need.FIGURES, lambda _r: self.overview()),
            ("GET", "/console/api/topic"): self._guarded(Need.FIGURES, lambda r: self.topic(_query_field(r, "name"))),
            ("GET", "/console/api/subscription"): self._guarded(
                Need.FIGURES, lambda r: self.subscription(_query_field(r, "name"))
            ),
            ("GET", "/console/api/connections"): self._guarded(Need.FIGURES, lambda _r: self.connections()),
            ("GET", "/console/api/history"): self._guarded(
                Need.FIGURES, lambda r: self.history(_query_field(r, "subscription"))
            ),
            ("GET", "/console/api/browse"): self._guarded(Need.CONTENTS, self.browse),
            # The other members' consoles sample this (console_sampler): open like /metrics, and
            # not a look at the console (it would keep both members sampling each other).
            ("GET", "/console/api/counters"): self._guarded(Need.PAGE, lambda _r: self.counters(), watch=False),
        }
        for name, content_type in ASSETS.items():
            out[("GET", f"/console/static/{name}")] = self._static(name, content_type)
        return out

    def _page(self, _request: Request) -> Reply:
        return Reply(200, _asset("index.html"), "text/html; charset=utf-8", _HEADERS)

    def _static(self, name: str, content_type: str) -> Callable[[Request], Reply]:
        return lambda _request: Reply(200, _asset(name), content_type, _HEADERS)

    def _guarded(
        self, need: Need, read: Callable[[Request], Mapping[str, object]], *, watch: bool = True
    ) -> Callable[[Request], Reply]:
        def handler(request: Request) -> Reply:
            if not allowed(self.access, need, request.authorized):
                what = "browsing messages" if need is Need.CONTENTS else "this console"
                raise AdminTokenRequired(what)
            if watch:
                self._sampler.watched()
            return _reply(read(request))

        return handler

    # ------------------------------------------------------------------ reads

    def session(self, request: Request) -> dict[str, object]:
        """What the page needs before anything else."""
        settings = self._ops.settings
        return {
            "access": self.access.value,
            "authorized": request.authorized,
            "refresh_seconds": settings.server.console_refresh,
            "window_seconds": settings.server.console_window,
            "data_dir": self._root,
            "amqp": self._ops.amqp_url,
            "member": self._ops.member(),
        }

    def counters(self) -> dict[str, object]:
        """This front end's counters (``/metrics``' ``*_total`` families) and connection ids, for
        the other members' consoles (console_sampler)."""
        member = self._ops.member()
        return {
            "slot": (member or {}).get("slot", 0),
            "counters": [[n, t, k, v] for (n, t, k), v in sorted(self._ops.counters().items())],
            "connections": sorted(self._local_connections()),
        }

    def peers(self) -> list[tuple[int, str]]:
        """``(slot, HTTP base URL)`` of the other live members (none on a local data dir)."""
        cluster = self._cluster()
        mine = (self._ops.member() or {}).get("slot")
        if cluster is None:
            return []
        return [
            (m.slot, m.http) for m in cluster.members
            if m.slot is not None and m.slot != mine and m.state == "live" and m.http
        ]

    def _consumers(self) -> dict[str, list[Consumer]]:
        return self._cache.get("consumers", lambda: consumers_by_key(self._root))

    def _cluster(self) -> ClusterStatus | None:
        if layout.local_path(self._root) is not None:
            return None
        # The dispatch records cost a GET each: read at most DISPATCH_SHOWN of them, at most every
        # DISPATCH_TTL seconds (the members' leases, a few requests, every refresh).
        def dispatch(root: str) -> list[Dispatch]:
            return self._dispatch_cache.get("dispatch", lambda: read_dispatch(root, DISPATCH_SHOWN))

        return self._cache.get("cluster", lambda: cluster_status(self._root, dispatch=dispatch))

    def _subscription_rows(self, topic: str | None = None) -> list[dict[str, object]]:
        backlogs = {rec.key: messages for rec, messages, _bytes in self._view.backlogs()}
        consumers = self._consumers()
        rows = []
        for rec in sorted(self._ops.subscriptions(), key=lambda r: (r.topic, r.key)):
            if topic is not None and rec.topic != topic:
                continue
            status = SubscriptionStatus(rec, tuple(c for c in consumers.get(rec.key, []) if c.generation == rec.generation), ())
            rows.append(
                {
                    "key": rec.key,
                    "name": status.display_name,
                    "topic": rec.topic,
                    "kind": status.kind,
                    "generation": rec.generation,
                    "selector": rec.selector,
                    "backlog": backlogs.get(rec.key),
                    "consumers": len(status.consumers),
                    "delivery_rate": round(self._sampler.latest_rate(f"delivered:{rec.key}"), 3),
                }
            )
        return rows

    def _topic_rows(self) -> list[dict[str, object]]:
        partitions = self._cache.get("topics", lambda: list_topic_partitions(self._root))
        published: dict[str, int] = {}
        for (name, topic, _key), value in self._sampler.counters().items():
            if name == "published":
                published[topic] = published.get(topic, 0) + value
        subs: dict[str, int] = {}
        for rec in self._ops.subscriptions():
            subs[rec.topic] = subs.get(rec.topic, 0) + 1
        return [
            {
                "name": topic,
                "partitions": len(parts),
                "publish_rate": round(self._sampler.latest_rate(f"published:{topic}"), 3),
                "published": published.get(topic, 0),
                "subscriptions": subs.get(topic, 0),
            }
            for topic, parts in partitions.items()
        ]

    def overview(self) -> dict[str, object]:
        """Topics, subscriptions, the fan-out, storage and the cluster's members."""
        stats = read_stats(self._root) or {}
        health = service_health(self._ops, stats)
        fanout = health["fanout"]
        storage = health["storage"]
        cluster = self._cluster()
        return {
            "now": time.time(),
            "health": health["status"],
            "topics": self._topic_rows(),
            "subscriptions": self._subscription_rows(),
            "fanout": {
                "state": fanout.get("state"),
                "restarts": fanout.get("restarts"),
                "last_batch_at": health["fanout_last_batch_at"],
                "lag_seconds": {t: round(v, 3) for t, v in sorted(health["lags"].items())},
                "failing": len(health["failing_subscriptions"]),
                "batches": stats.get("batches"),
            },
            "storage": {
                "writable": bool(storage.get("writable")),
                "free_bytes": storage.get("free_bytes"),
                "data_dir": self._root,
                "fault": storage.get("error"),
            },
            "cluster": None if cluster is None else _cluster_json(cluster),
        }

    def topic(self, name: str) -> dict[str, object]:
        """One topic: partitions, its publish-rate chart and its subscriptions."""
        found = [t for t in self._topic_rows() if t["name"] == name]
        if not found:
            raise TopicNotFound(name)
        return {
            **found[0],
            "series": {"publish_rate": self._sampler.rates(f"published:{name}")},
            "subscriptions": self._subscription_rows(name),
        }

    def _record(self, name: str) -> SubscriptionRecord:
        return find_subscription({r.key: r for r in self._ops.subscriptions()}, name)

    def subscription(self, name: str) -> dict[str, object]:
        """One subscription: backlog by partition, consumers, counts, charts."""
        rec = self._record(name)
        parts = subscription_backlog(self._root, rec.key, rec.generation)
        consumers = [c for c in self._consumers().get(rec.key, []) if c.generation == rec.generation]
        status = SubscriptionStatus(rec, tuple(consumers), tuple(parts))
        counters = self._sampler.counters()
        local = self._local_connections()
        member = self._ops.member()
        oldest = status.oldest_age()
        return {
            "key": rec.key,
            "name": status.display_name,
            "namespace": rec.identity.namespace,
            "topic": rec.topic,
            "kind": status.kind,
            "durable": rec.identity.durable,
            "shared": rec.identity.shared,
            "generation": rec.generation,
            "selector": rec.selector,
            "backlog": status.messages,
            "backlog_bytes": status.bytes,
            "oldest_age_seconds": oldest.total_seconds() if oldest is not None else None,
            "partitions": [
                {"partition": p.partition, "messages": p.messages, "bytes": p.bytes, "routed": p.routed} for p in parts
            ],
            "consumers": [
                {
                    "link": c.link,
                    "container": c.container,
                    "connection": c.connection,
                    "member": (member or {}).get("slot") if c.connection in local else self._sampler.member_of(c.connection),
                    "here": c.connection in local,
                    "attached_at": _iso(c.attached_at),
                }
                for c in consumers
            ],
            "counts": {
                label: counters.get((counter, rec.topic, rec.key), 0)
                for label, counter in (
                    ("delivered", DELIVERED),
                    ("redelivered", REDELIVERED),
                    ("acknowledged", ACKNOWLEDGED),
                    ("dead_lettered", DEAD_LETTERED),
                    ("expired", EXPIRED),
                )
            },
            "series": {
                "backlog": self._sampler.points(f"backlog:{rec.key}"),
                "delivery_rate": self._sampler.rates(f"delivered:{rec.key}"),
            },
        }

    def _local_connections(self) -> set[str]:
        return {str(c["id"]) for c in self._cache.get("connections", lambda: self._ops.connections(timeout=CALL_TIMEOUT))}

    def connections(self) -> dict[str, object]:
        """This front end's connections and links, and the consumers the catalog records."""
        member = self._ops.member()
        recorded = [
            {
                "subscription": key,
                "link": c.link,
                "container": c.container,
                "connection": c.connection,
                "generation": c.generation,
                "attached_at": _iso(c.attached_at),
            }
            for key, found in sorted(self._consumers().items())
            for c in found
        ]
        return {
            "member": (member or {}).get("slot"),
            "connections": self._ops.connections(timeout=CALL_TIMEOUT),
            "recorded_consumers": recorded,
        }

    def history(self, name: str) -> dict[str, object]:
        """The newest versions of the subscription's generation table, newest first."""
        rec = self._record(name)
        table = layout.join(self._root, rec.table)
        return {
            "subscription": rec.key,
            "table": rec.table,
            "durable": rec.identity.durable,
            "versions": [
                {
                    "version": e.version,
                    "timestamp_ms": e.timestamp_ms,
                    "operation": e.operation,
                    "files_added": len(e.added),
                    "files_removed": e.removed,
                    "rows_added": e.rows_added,
                }
                for e in recent_history(table, HISTORY_VERSIONS)
            ],
        }

    def browse(self, request: Request) -> dict[str, object]:
        """A page of the subscription's backlog (``selector``, ``after``, ``limit``)."""
        rec = self._record(_query_field(request, "subscription"))
        selector = request.query.get("selector", "").strip() or None
        after = _int_field(request, "after", None, -1, 2**63 - 1)
        limit = _int_field(request, "limit", 50, 1, BROWSE_LIMIT) or 50
        page = browse_backlog(self._root, rec, selector=selector, after=after, limit=limit)
        return {
            "subscription": rec.key,
            "selector": selector,
            "messages": page.messages,
            "next": page.next_after,
            "scanned": page.scanned,
            "pending_after_cursor": page.pending,
        }


def _cluster_json(status: ClusterStatus) -> dict[str, object]:
    """The members (each with the partitions it dispatches; the fan-out job's lease as a row of its
    own, slot null) and the dispatch records, as ``sharedsub cluster status`` reads them."""
    dispatching: dict[int, int] = {}
    for d in status.dispatch:
        if d.owner is not None:
            dispatching[d.owner] = dispatching.get(d.owner, 0) + 1
    rows = [(m, False) for m in status.members] + ([(status.fanout, True)] if status.fanout is not None else [])
    return {
        "members": [
            {
                "slot": m.slot,
                "state": m.state,
                "host": m.host,
                "pid": m.pid,
                "amqp": m.amqp,
                "http": m.http,
                "partitions": dispatching.get(m.slot, 0) if m.slot is not None else 0,
                "fanout": fanout,
            }
            for m, fanout in rows
        ],
        "dispatch": [
            {"subscription": d.subscription, "generation": d.generation, "partition": d.partition, "slot": d.owner}
            for d in status.dispatch
        ],
        "dispatch_complete": len(status.dispatch) < DISPATCH_SHOWN,
    }


def build_console(ops: ServiceOperations, view: MetricsView) -> tuple[Console, ConsoleSampler]:
    """The console of ``ops`` and its sampler (not started: the caller starts it)."""
    server = ops.settings.server
    console: Console | None = None

    def peers() -> list[tuple[int, str]]:
        return console.peers() if console is not None else []

    sampler = ConsoleSampler(ops, view.backlogs, interval=server.console_refresh, window=server.console_window, peers=peers)
    console = Console(ops, view, sampler)
    return console, sampler
