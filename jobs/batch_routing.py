"""Routing one micro-batch, on the driver or on Spark's executors, up to (not including) its commits.

:class:`BatchRouting` decides where a batch is routed (``[fanout] routing`` and
``executor_min_work``: the table of sharedsub.core.fanout.routing_place) and routes it there:

* **On the driver**, the batch's rows of the plan's topics are read here once (collected with
  ``toArrow``, or read from the files the driver planned) and routed with Arrow
  (jobs/routed_rows.py): the result holds the routed rows.
* **On the executors** (jobs/executor_routing.py), Spark tasks read, route and write each
  subscription's rows as data files into its table: the result holds only the files'
  descriptions per table, in seq order, and when the tasks routed them.

Nothing is committed here: the fan-out sink (jobs/fanout_sink.py) commits what the result holds.
A batch given as rows (:class:`jobs.batch_inputs.ReadBatch`) is always routed on the driver.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time

import pyarrow as pa

from jobs.batch_inputs import BatchInput
from jobs.executor_routing import ExecutorRouter
from jobs.routed_rows import route_rows
from jobs.sources.deltars_topics import TopicFiles
from sharedsub.core.fanout.routing import RoutingPlan
from sharedsub.core.fanout.routing_place import Placement, batch_work, placement
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops.stage_timing import StageTimes
from sharedsub.storage.delta.data_files import DataFile
from sharedsub.storage.fanout_stats import SourceSummary

log = logging.getLogger("sharedsub.fanout")


@dataclasses.dataclass(frozen=True, slots=True)
class RoutedBatch:
    """One micro-batch routed, not yet committed."""

    where: Placement
    summary: SourceSummary  # what the statistics keep of its source rows
    routed_rows: int  # (row, subscription) pairs routed
    evaluated: float  # when routing ended (time.monotonic)
    rows: pa.Table | None = None  # on the driver: the routed rows (jobs/routed_rows.py)
    files: dict[str, list[DataFile]] | None = None  # on the executors: files per table rel, seq order
    routed_at: dt.datetime | None = None  # on the executors: when the tasks routed the rows
    # Stage times (sharedsub.core.ops.stage_timing) observed once the batch is committed; the
    # executors' routing time is observed at once, before its commits.
    stages: tuple[tuple[str, float], ...] = ()


class BatchRouting:
    """Where and how one fan-out query routes its batches; counts the batches routed in each place."""

    def __init__(
        self,
        *,
        routing: str = "driver",
        executor_min_work: int = 0,
        router: ExecutorRouter | None = None,
    ) -> None:
        """``routing`` and ``executor_min_work``: ``[fanout]``'s; ``router`` runs batches on the
        executors (without one every batch is routed on the driver)."""
        self.routing = routing
        self.executor_min_work = executor_min_work
        self.router = router
        self.placed = {p: 0 for p in Placement}  # batches routed on the driver and on the executors

    def place(self, batch: BatchInput, plan: RoutingPlan) -> tuple[Placement, list[TopicFiles] | None]:
        """Where to route this batch (sharedsub.core.fanout.routing_place), and its planned
        files when the driver plans it (None otherwise)."""
        if self.router is None or self.routing == "driver":
            return Placement.DRIVER, None
        parts = batch.parts(plan.topics)
        executors = self.router.executors()
        work = batch_work(None if parts is None else [(p.topic, p.rows) for p in parts], plan.routes_per_topic())
        where = placement(self.routing, executors=executors, work=work, executor_min_work=self.executor_min_work)
        if where is Placement.EXECUTORS and parts is None and batch.frame(plan.topics) is None:
            where = Placement.DRIVER  # rows given as a table: nothing for the executors to read
        return where, parts

    def route(
        self,
        batch: BatchInput,
        plan: RoutingPlan,
        records: tuple[SubscriptionRecord, ...],
        batch_id: int,
        *,
        started: float,
        stages: StageTimes,
    ) -> RoutedBatch:
        """Route micro-batch ``batch_id`` with ``plan`` (made of the active ``records``) where
        :meth:`place` says. ``started``: when the batch began (time.monotonic); ``stages``: the
        stage times the executors' routing time goes to."""
        where, parts = self.place(batch, plan)
        self.placed[where] += 1
        if where is Placement.DRIVER:
            source = batch.read(plan.topics, parts)
            fetched = time.monotonic()
            routed = route_rows(plan, source)
            evaluated = time.monotonic()
            return RoutedBatch(
                where,
                SourceSummary.of(source),
                routed.num_rows,
                evaluated,
                rows=routed,
                stages=(("fanout_source_read", fetched - started), ("fanout_route", evaluated - fetched)),
            )
        assert self.router is not None
        routed_at = dt.datetime.now(dt.UTC)
        if parts is not None:
            done = self.router.route_parts(parts, records, batch_id, routed_at)
        else:
            frame = batch.frame(plan.topics)
            assert frame is not None
            done = self.router.route_frame(frame, records, batch_id, routed_at)
        routed_rows = sum(f.rows for files in done.files.values() for f in files)
        evaluated = time.monotonic()
        if done.files:
            log.info(
                "batch %d: the executors wrote %d files (%d rows) for %d subscription tables in %.0f ms; committing",
                batch_id,
                sum(len(f) for f in done.files.values()),
                routed_rows,
                len(done.files),
                (evaluated - started) * 1000,
            )
        stages.observe("fanout_executor_route", evaluated - started)
        return RoutedBatch(where, done.source, routed_rows, evaluated, files=done.files, routed_at=routed_at)
