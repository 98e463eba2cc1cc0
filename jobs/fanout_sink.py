"""The fan-out's ``foreachBatch`` sink: route a micro-batch, commit each subscription table once.

:class:`FanoutSink` is what one fan-out query needs between batches, composed of one part per
concept:

* the catalog reader and the routing plan compiled from it
  (:meth:`sharedsub.core.fanout.routing.RoutingPlan.route`), kept here;
* **routing** a batch on the driver or on the executors: :class:`jobs.batch_routing.BatchRouting`
  (the batch's rows as asked for: jobs/batch_inputs.py);
* **commits** of the subscription tables (app-transaction marks, executor-written files, commits
  in Spark tasks, fencing): :class:`jobs.table_commits.TableCommits`;
* **parking**: each table's part of a batch committed or, while the table fails, parked and
  retried (:mod:`sharedsub.core.fanout.fanout_faults`), on a few commit threads:
  :class:`jobs.parking.Parking`;
* **statistics**: the statistics file (:class:`sharedsub.storage.fanout_stats.StatsRecorder`),
  what each batch reports into it (:class:`jobs.batch_report.BatchReport`) and the query's
  routed versions (:class:`jobs.routed_progress.RoutedProgress`).

The contracts it keeps (registered before committed ⇒ routed, exactly once per subscription
table, seq order, one failing table does not stop the others) are in the docstring of
jobs/fanout.py, the script that runs it.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame

from jobs.batch_inputs import BatchInput, PlannedBatch, ReadBatch, SparkBatch
from jobs.batch_report import BatchReport
from jobs.batch_routing import BatchRouting
from jobs.executor_routing import ExecutorRouter
from jobs.parking import DEFAULT_COMMIT_THREADS, Parking, TableRows
from jobs.routed_progress import RoutedProgress
from jobs.routed_rows import by_route, route_rows, subscription_rows
from jobs.sources.deltars_topics import ARROW_SCHEMA, DriverBatchReader
from jobs.table_commits import TableCommits
from sharedsub.core import layout
from sharedsub.core.fanout.fanout_faults import TableState
from sharedsub.core.fanout.progress_asks import ask_progress
from sharedsub.core.fanout.routing import RoutingPlan, plan_for
from sharedsub.core.fanout.routing_place import Placement
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops.logthrottle import ThrottledLog
from sharedsub.storage.catalog import CatalogReader
from sharedsub.storage.delta.data_files import DataFile
from sharedsub.storage.fanout_stats import StatsRecorder
from sharedsub.storage.objects import prefetch

log = logging.getLogger("sharedsub.fanout")


class FanoutSink:
    """The ``foreachBatch`` function of one fan-out query; holds its catalog reader and its parts
    (module docstring).

    Create one per query (the catalog reader applies only new catalog commits on each refresh)
    and :meth:`close` it when the query has stopped. Batches and :meth:`tick` run one at a time
    (a lock; Spark runs one micro-batch at a time per query, ticks come from the main thread).
    """

    def __init__(
        self,
        root: str,
        *,
        commit_threads: int = DEFAULT_COMMIT_THREADS,
        retry_interval: float = 5.0,
        on_routed: Callable[[Collection[str]], None] | None = None,
        epoch: int | None = None,
        routing: str = "driver",
        executor_min_work: int = 0,
        router: ExecutorRouter | None = None,
        task_commit_min_tables: int = 0,
    ) -> None:
        """``on_routed``: called after each batch (or retry) that committed rows to subscription
        tables, with those tables' paths relative to ``root`` (the job's ``--announce-routed``:
        sharedsub.core.fanout.routed_tables). ``epoch``: the job's lease epoch on object
        storage (sharedsub.runtime.cluster.data_dir_owner.own_fanout): every subscription commit carries it,
        each table is fenced under it before this job's first commit to it, and a commit that
        finds a higher epoch fails the batch (the job is superseded and stops). ``routing`` and
        ``executor_min_work``: ``[fanout]``'s (sharedsub.core.fanout.routing_place); ``router``
        runs batches on the executors (jobs/executor_routing.py; without one every batch is
        routed here); ``task_commit_min_tables``: from how many tables an executor batch's
        commits go into Spark tasks (0: never)."""
        self.root = root
        self.on_routed = on_routed
        self.catalog = CatalogReader(root)
        self.routing = BatchRouting(routing=routing, executor_min_work=executor_min_work, router=router)
        self.commits = TableCommits(root, epoch=epoch, router=router, task_commit_min_tables=task_commit_min_tables)
        self.parking = Parking(root, retry_interval=retry_interval, commit_threads=commit_threads)
        self.stats = StatsRecorder(root)  # read by the /metrics endpoint of serve/frontend
        self.report = BatchReport(self.stats)
        self.progress = RoutedProgress(root, self.stats)
        self._records: tuple[SubscriptionRecord, ...] = ()  # the active records the last plan was made of
        self._warned: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self._routed_at: float | None = None  # time.monotonic() when the last batch ended
        self._asked_at: float | None = None  # ... and when progress_due last said yes
        self._faults = ThrottledLog(log)

    @property
    def placed(self) -> dict[Placement, int]:
        """Batches routed on the driver and on the executors, over the sink's life."""
        return self.routing.placed

    @property
    def tables_committed_in_tasks(self) -> int:
        """Tables committed in Spark tasks, over the sink's life (logs, tests)."""
        return self.commits.tables_committed_in_tasks

    @property
    def tables(self) -> dict[str, TableState]:
        """The tables that are not healthy (failing or with parked rows), by relative path."""
        return self.parking.tables

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """The ``foreachBatch`` callback: :meth:`route_batch`."""
        self.route_batch(df, batch_id)

    def close(self) -> None:
        """Stop the commit threads; let the appenders' checkpoints being written end (a process
        that ends during one dies of SIGSEGV: DeltaAppender.finish); write the statistics a
        trailing write still held."""
        self.parking.close()
        self.commits.finish()
        self.stats.flush()

    def plan(self) -> RoutingPlan:
        """Routing plan from the catalog as it is now (refreshed); logs records it must skip."""
        self._records = tuple(self.catalog.active())
        plan = plan_for(self._records)
        for skipped in plan.skipped:
            mark = (skipped.record.key, skipped.record.revision)
            if mark not in self._warned:
                self._warned.add(mark)
                log.warning("%s", skipped.reason)
        self.parking.subscriptions = {r.record.table: r.record for r in plan.routes}
        return plan

    def route_batch(self, df: DataFrame, batch_id: int) -> dict[str, int]:
        """Route one micro-batch of source rows; return rows committed per subscription table.

        Reads the source DataFrame once (it is not cached: every action would read the topic
        files again) and does not read it when no subscription is active. Routed on the driver,
        the rows of the batch are collected there (``toArrow``), so ``max_commits_per_batch`` is
        what bounds the driver's memory (docs/feasibility.md gotcha 6); on the executors only the
        written files' descriptions come back.
        """
        return self.route(SparkBatch(df), batch_id)

    def route(self, batch: BatchInput | Callable[[Collection[str]], pa.Table], batch_id: int) -> dict[str, int]:
        """Route micro-batch ``batch_id``: ``batch`` gives its rows of the topics asked for (read
        once, and only when a subscription is active), or is a plain function that returns them
        (always routed here); see :meth:`route_batch`."""
        given = batch if isinstance(batch, BatchInput) else ReadBatch(batch)
        with self._lock:
            try:
                return self._route(given, batch_id)
            finally:
                self._routed_at = time.monotonic()

    def _route(self, given: BatchInput, batch_id: int) -> dict[str, int]:
        """:meth:`route` under the sink's lock."""
        started = time.monotonic()
        started_wall = time.time()
        plan = self.plan()
        if not plan.routes:
            log.debug("batch %d: no active subscriptions", batch_id)
            reported = self.stats.failing
            self.write_routed(route_rows(plan, ARROW_SCHEMA.empty_table()), plan, batch_id)  # drops stale parked rows
            if self.stats.failing != reported:
                self.stats.write()
            return {}
        routed = self.routing.route(given, plan, self._records, batch_id, started=started, stages=self.stats.stages)
        if routed.files is None:
            written = self.write_routed(routed.rows, plan, batch_id)
        else:
            in_tasks, files = self.commits.commit_in_tasks(routed.files, self.parking.tables, batch_id)
            written = self.write_routed(None, plan, batch_id, files=files, routed_at=routed.routed_at)
            if in_tasks:
                written.update((layout.join(self.root, rel), rows) for rel, rows in in_tasks.items() if rows)
                if self.on_routed is not None and any(in_tasks.values()):
                    self.on_routed([rel for rel, rows in in_tasks.items() if rows])
        self.report.batch_done(batch_id, plan, routed, written, started=started, started_wall=started_wall)
        return written

    def progress_due(self) -> bool:
        """Whether the job's main loop should ask the query for its last progress report now and
        pass it to :meth:`tick` (sharedsub.core.fanout.progress_asks): while batches are routed
        and shortly after, and every few seconds otherwise. Counts a yes as an ask."""
        now = time.monotonic()
        since_routed = None if self._routed_at is None else now - self._routed_at
        since_asked = None if self._asked_at is None else now - self._asked_at
        if not ask_progress(routing=self._lock.locked(), since_routed=since_routed, since_asked=since_asked):
            return False
        self._asked_at = now
        return True

    def tick(self, progress: dict[str, Any] | None = None) -> bool:  # Any: lastProgress's JSON values (see FanoutQuery)
        """Between batches (the driver's main thread): record the routed versions of the query's
        last completed micro-batch (``progress``, ``StreamingQuery.lastProgress``) and retry the
        failing tables whose retry is due. Does nothing while a batch runs (that batch retries
        them). Returns whether it retried anything. Never raises (a failure is logged)."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            changed = self.progress.update(progress)
            due = self.parking.due(time.time())
            if due:
                plan = self.plan()
                written = self.write_routed(route_rows(plan, ARROW_SCHEMA.empty_table()), plan, -1)
                self.stats.count(written, (r.record for r in plan.routes))
            if changed or due:
                self.stats.write_soon()
        except Exception as exc:  # noqa: BLE001 (a tick's fault is logged and retried at the next tick)
            self._faults.fault("tick", "retrying parked rows between batches failed", error=exc)
            return False
        finally:
            self._lock.release()
        self._faults.clear("tick", "retrying parked rows between batches works again")
        return due

    def write_routed(
        self,
        routed: pa.Table | None,
        plan: RoutingPlan,
        batch_id: int,
        *,
        files: Mapping[str, list[DataFile]] | None = None,
        routed_at: dt.datetime | None = None,
    ) -> dict[str, int]:
        """Commit ``routed`` (source columns + route index) to the subscription tables, and the
        data files the executors wrote (``files``, per table relative path, in seq order; their
        rows were routed at ``routed_at``); return the rows committed per table (absolute path),
        parked rows committed by a retry included.

        Rows already in a table (``seq`` ≤ its app-transaction version) are dropped first, so
        calling this again with the same rows writes nothing. Tables are committed concurrently;
        a table whose commit fails gets its rows parked instead (jobs/parking.py), and the
        failing tables whose retry is due are retried, with or without rows in this batch.

        Raises:
            Exception: the error of a table whose rows could be neither committed nor parked,
                after every other table finished (the batch is replayed, and the tables that did
                commit drop their rows then).
        """
        # Tables of deleted subscriptions: their appenders hold a loaded DeltaTable each, and
        # their parked rows have no table to go to any more.
        live = {r.record.table for r in plan.routes}
        self.commits.forget({layout.join(self.root, rel) for rel in live})
        self.parking.forget(live)
        routed_at = routed_at or dt.datetime.now(dt.UTC)
        batch: dict[str, TableRows] = {}
        if routed is not None:
            for index, rows in by_route(routed):
                batch[plan.routes[index].record.table] = subscription_rows(rows, routed_at, batch_id)
        batch.update(files or {})
        written, failed = self.parking.write(batch, batch_id, self.commits, committed=self.on_routed)
        self.stats.failing = self.parking.failing_report()
        if failed is not None:
            self.stats.write()  # the failing tables, before the batch fails
            raise failed
        return written


class ReadOnDriver:
    """A callback of micro-batch ids (jobs.batch_callback) that routes each micro-batch with
    ``sink``, its files planned on the driver by ``reader`` (``[fanout] driver_reads``):
    :class:`PlannedBatch`."""

    def __init__(self, sink: FanoutSink, reader: DriverBatchReader) -> None:
        self.sink = sink
        self.reader = reader

    def __call__(self, batch_id: int) -> None:
        """Route micro-batch ``batch_id`` (called through jobs.batch_callback: Spark's DataFrame
        of it is neither run nor wrapped in Python). On object storage the catalog's next entry
        (the routing plan's refresh) and the batch's log entries (its files' plan) are fetched in
        one round trip, not one after the other (sharedsub.storage.objects.prefetch)."""
        catalog = self.sink.catalog.next_entry()
        with prefetch.prefetched([*([catalog] if catalog else []), *self.reader.plan_reads(batch_id)]):
            self.sink.route(PlannedBatch(self.reader, batch_id), batch_id)
