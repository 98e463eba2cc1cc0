"""What the fan-out sink reports of each micro-batch it routed: stage times, one log line, totals.

:class:`BatchReport` is called once per routed batch, after its commits (jobs/fanout_sink.py):
it observes the batch's stages (sharedsub.core.ops.stage_timing: ``fanout_source_read``,
``fanout_route`` or ``fanout_executor_route``, ``fanout_commit``, ``fanout_batch``,
``fanout_wait``, ``fanout_between_batches``), logs a line per batch at DEBUG, the first batch
that routed something at INFO and then one INFO line a minute for those that did
(sharedsub.core.fanout.batch_summary), and adds the batch to the statistics file
(:meth:`sharedsub.storage.fanout_stats.StatsRecorder.record`). A batch that fails reports none of
this (the failing tables are in the statistics file already: jobs/parking.py). Never raises but
what the statistics recorder raises (it raises nothing).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from jobs.batch_routing import RoutedBatch
from sharedsub.core.fanout.batch_summary import Summary
from sharedsub.core.fanout.routing import RoutingPlan
from sharedsub.core.fanout.routing_place import Placement
from sharedsub.storage.fanout_stats import StatsRecorder

log = logging.getLogger("sharedsub.fanout")


class BatchReport:
    """Reports the batches of one fan-out query into ``stats`` (one batch at a time)."""

    def __init__(self, stats: StatsRecorder) -> None:
        self.stats = stats
        self._last_end_wall: float | None = None  # when the previous micro-batch's routing ended
        self._summary = Summary()

    def batch_done(
        self,
        batch_id: int,
        plan: RoutingPlan,
        routed: RoutedBatch,
        written: Mapping[str, int],
        *,
        started: float,
        started_wall: float,
    ) -> None:
        """Report batch ``batch_id``, routed with ``plan`` as ``routed`` says, whose commits wrote
        ``written`` rows per table; it started at ``started`` (time.monotonic) and
        ``started_wall`` (time.time)."""
        stages = self.stats.stages
        for name, seconds in routed.stages:
            stages.observe(name, seconds)
        stages.observe("fanout_commit", time.monotonic() - routed.evaluated)
        stages.observe("fanout_batch", time.monotonic() - started)
        oldest = routed.summary.oldest
        if oldest is not None:
            stages.observe("fanout_wait", started_wall - oldest)
            previous = self._last_end_wall
            if previous is not None and oldest < previous:
                # Its messages were there when the previous batch ended: the whole gap is
                # Spark's own work between batches (logs, latestOffset, planning).
                stages.observe("fanout_between_batches", started_wall - previous)
        self._last_end_wall = time.time()
        now = time.monotonic()
        committed = sum(written.values())
        summary = self._summary
        # The first batch that routed something, and every batch at DEBUG.
        first = bool(routed.routed_rows) and summary.first()
        log.log(
            logging.INFO if first else logging.DEBUG,
            "batch %d: %d messages, %d routed rows for %d subscriptions in %.0f ms%s, "
            "%d rows committed to %d tables in %.0f ms",
            batch_id,
            routed.summary.messages,
            routed.routed_rows,
            len(plan.routes),
            (routed.evaluated - started) * 1000,
            " on the executors" if routed.where is Placement.EXECUTORS else "",
            committed,
            len(written),
            (now - routed.evaluated) * 1000,
        )
        if routed.routed_rows:
            line = summary.add(now, routed.summary.messages, committed, now - started)
            if line is not None:
                log.info(
                    "batch %d: %d batches in the last %.0f s routed %d messages, %d rows committed to "
                    "subscription tables; the slowest took %.0f ms",
                    batch_id,
                    line.batches,
                    line.seconds,
                    line.messages,
                    line.committed,
                    line.slowest * 1000,
                )
        self.stats.record(batch_id, routed.summary, written, (r.record for r in plan.routes), now - started)
