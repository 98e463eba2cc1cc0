"""``/metrics`` of a running service: :class:`MetricsView` (the console's charts read it too)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from connectors.http.service_health import failing_subscriptions, topic_lags
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops import metrics
from sharedsub.core.ops.stage_timing import merged, stage_family, stages_from_json
from sharedsub.runtime.operations import ServiceOperations
from sharedsub.storage import diskspace
from sharedsub.storage.backlog import subscription_backlog
from sharedsub.storage.fanout_stats import read_stats
from sharedsub.storage.objects.request_counts import REQUESTS


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
