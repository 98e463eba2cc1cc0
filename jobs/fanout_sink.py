"""The fan-out's ``foreachBatch`` sink: route a micro-batch, commit each subscription table once.

:class:`FanoutSink` holds what one fan-out query needs between batches: the catalog reader and
the routing plan compiled from it (:meth:`sharedsub.core.fanout.routing.RoutingPlan.route`), one
appender per subscription table, a small pool of commit threads, the failing tables' states
(:mod:`sharedsub.core.fanout.fanout_faults`) with their rows parked on disk
(:class:`sharedsub.storage.parked_rows.ParkedRows`), and the statistics file. The contracts it
keeps (registered before committed ⇒ routed, exactly once per subscription table, seq order, one
failing table does not stop the others) are in the docstring of jobs/fanout.py, the script that
runs it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from jobs.batch_inputs import BatchInput, PlannedBatch, ReadBatch, SparkBatch
from jobs.executor_routing import ExecutorRouter
from jobs.routed_rows import by_route, route_rows, subscription_rows
from jobs.sources.deltars_topics import ARROW_SCHEMA, DriverBatchReader, TopicFiles, offset_ids, offset_versions
from sharedsub.core import layout
from sharedsub.core.fanout.fanout_faults import HEALTHY, Step, TableState, after_commit, after_park, decide
from sharedsub.core.fanout.partition_marks import above_marks, by_partition, transaction_app_id
from sharedsub.core.fanout.routing import RoutingPlan, plan_for
from sharedsub.core.fanout.routing_place import Placement, commits_in_tasks, placement
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops import fanout_progress
from sharedsub.core.ops.logthrottle import ThrottledLog
from sharedsub.storage import schemas
from sharedsub.storage.catalog import CatalogReader
from sharedsub.storage.delta.appender import DeltaAppender, Fenced
from sharedsub.storage.delta.data_files import DataFile, read_data_files
from sharedsub.storage.delta.file_commits import commit_routed_files
from sharedsub.storage.delta.tables import table_exists
from sharedsub.storage.fanout_progress import write_progress
from sharedsub.storage.fanout_stats import SourceSummary, StatsRecorder
from sharedsub.storage.parked_rows import ParkedRows

# Commits are I/O bound (a Parquet write and a log put per table): a few threads overlap them.
DEFAULT_COMMIT_THREADS = 4
# A retry commits parked rows in commits of at most this many rows (bounds the driver's memory).
RETRY_ROWS_PER_COMMIT = 100_000

log = logging.getLogger("sharedsub.fanout")


class TaskFenced(Exception):
    """A commit task found a subscription table's log holding a higher fan-out epoch than this
    job's (as :class:`~sharedsub.storage.delta.appender.Fenced` on the driver): the batch fails."""


@dataclasses.dataclass(frozen=True, slots=True)
class _TableResult:
    """What one table's part of a batch came to (computed on a commit thread)."""

    state: TableState  # the table's state after the batch
    written: int = 0  # rows committed (parked rows included)
    parked: int = 0  # rows of this batch parked
    error: BaseException | None = None  # the failed commit's error
    fail_batch: BaseException | None = None  # set when the rows could be neither committed nor parked


class FanoutSink:
    """The ``foreachBatch`` function of one fan-out query; holds its catalog reader, appenders and
    the failing tables' states.

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
        on_routed: Callable[[], None] | None = None,
        epoch: int | None = None,
        routing: str = "driver",
        executor_min_work: int = 0,
        router: ExecutorRouter | None = None,
        task_commit_min_tables: int = 0,
    ) -> None:
        """``on_routed``: called after each batch (or retry) that committed rows to a subscription
        table (the job's ``--announce-routed``). ``epoch``: the job's lease epoch on object
        storage (sharedsub.runtime.discovery.own_fanout): every subscription commit carries it,
        each table is fenced under it before this job's first commit to it, and a commit that
        finds a higher epoch fails the batch (the job is superseded and stops). ``routing`` and
        ``executor_min_work``: ``[fanout]``'s (sharedsub.core.fanout.routing_place); ``router``
        runs batches on the executors (jobs/executor_routing.py; without one every batch is
        routed here); ``task_commit_min_tables``: from how many tables an executor batch's
        commits go into Spark tasks (0: never)."""
        self.root = root
        self.routing = routing
        self.executor_min_work = executor_min_work
        self.router = router
        self.task_commit_min_tables = task_commit_min_tables
        self.tables_committed_in_tasks = 0  # over the sink's life (logs, tests)
        self.placed = {p: 0 for p in Placement}  # batches routed on the driver and on the executors
        self.retry_interval = retry_interval
        self.on_routed = on_routed
        self.epoch = epoch
        self.catalog = CatalogReader(root)
        self._appenders: dict[str, DeltaAppender] = {}
        self._pool = ThreadPoolExecutor(max_workers=commit_threads, thread_name_prefix="fanout-commit")
        self._warned: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self.stats = StatsRecorder(root)  # read by the /metrics endpoint of serve/frontend
        self.parked = ParkedRows(root)
        # Per subscription table (relative path): tables that are not healthy (failing or with
        # parked rows); a table missing here is healthy. Rows parked before a restart are due.
        self.tables: dict[str, TableState] = {
            rel: TableState(parked_rows=rows, failing_since=oldest) for rel, (rows, oldest) in self.parked.scan().items()
        }
        self._subscriptions: dict[str, SubscriptionRecord] = {}  # table rel -> record, from the last plan
        self._records: tuple[SubscriptionRecord, ...] = ()  # the active records the last plan was made of
        self._faults = ThrottledLog(log)
        self._last_progress: int | None = None
        self._routed_ids: dict[str, str] = {}
        # On object storage the job keeps a progress record for retention (sharedsub.core.ops.fanout_progress):
        # when it was last written (monotonic) and whether the versions moved since.
        self._record_progress = layout.local_path(root) is None
        self._progress_written: float | None = None
        self._progress_moved = False
        self._last_end_wall: float | None = None  # when the previous micro-batch's routing ended

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """The ``foreachBatch`` callback: :meth:`route_batch`."""
        self.route_batch(df, batch_id)

    def close(self) -> None:
        """Stop the commit threads; let the appenders' checkpoints being written end (a process
        that ends during one dies of SIGSEGV: DeltaAppender.finish)."""
        self._pool.shutdown(wait=True)
        for appender in list(self._appenders.values()):
            appender.finish()

    def plan(self) -> RoutingPlan:
        """Routing plan from the catalog as it is now (refreshed); logs records it must skip."""
        self._records = tuple(self.catalog.active())
        plan = plan_for(self._records)
        for skipped in plan.skipped:
            mark = (skipped.record.key, skipped.record.revision)
            if mark not in self._warned:
                self._warned.add(mark)
                log.warning("%s", skipped.reason)
        self._subscriptions = {r.record.table: r.record for r in plan.routes}
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
            where, parts = self._place(given, plan)
            self.placed[where] += 1
            stages = self.stats.stages
            if where is Placement.EXECUTORS:
                assert self.router is not None
                routed_at = dt.datetime.now(dt.UTC)
                if parts is not None:
                    done = self.router.route_parts(parts, self._records, batch_id, routed_at)
                else:
                    frame = given.frame(plan.topics)
                    assert frame is not None
                    done = self.router.route_frame(frame, self._records, batch_id, routed_at)
                summary, routed_rows = done.source, sum(f.rows for files in done.files.values() for f in files)
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
                in_tasks, files = self._commit_in_tasks(done.files, batch_id)
                written = self.write_routed(None, plan, batch_id, files=files, routed_at=routed_at)
                if in_tasks:
                    written.update((layout.join(self.root, rel), rows) for rel, rows in in_tasks.items() if rows)
                    if self.on_routed is not None and any(in_tasks.values()):
                        self.on_routed()
            else:
                source = given.read(plan.topics, parts)
                fetched = time.monotonic()
                routed = route_rows(plan, source)
                evaluated = time.monotonic()
                written = self.write_routed(routed, plan, batch_id)
                summary, routed_rows = SourceSummary.of(source), routed.num_rows
                stages.observe("fanout_source_read", fetched - started)
                stages.observe("fanout_route", evaluated - fetched)
            stages.observe("fanout_commit", time.monotonic() - evaluated)
            stages.observe("fanout_batch", time.monotonic() - started)
            oldest = summary.oldest
            if oldest is not None:
                stages.observe("fanout_wait", started_wall - oldest)
                previous = self._last_end_wall
                if previous is not None and oldest < previous:
                    # Its messages were there when the previous batch ended: the whole gap is
                    # Spark's own work between batches (logs, latestOffset, planning).
                    stages.observe("fanout_between_batches", started_wall - previous)
            self._last_end_wall = time.time()
            # One INFO line per batch that routed something; idle batches only at DEBUG.
            log.log(
                logging.INFO if routed_rows else logging.DEBUG,
                "batch %d: %d messages, %d routed rows for %d subscriptions in %.0f ms%s, "
                "%d rows committed to %d tables in %.0f ms",
                batch_id,
                summary.messages,
                routed_rows,
                len(plan.routes),
                (evaluated - started) * 1000,
                " on the executors" if where is Placement.EXECUTORS else "",
                sum(written.values()),
                len(written),
                (time.monotonic() - evaluated) * 1000,
            )
            self.stats.record(batch_id, summary, written, (r.record for r in plan.routes), time.monotonic() - started)
            return written

    def _commit_in_tasks(
        self, files: dict[str, list[DataFile]], batch_id: int
    ) -> tuple[dict[str, int], dict[str, list[DataFile]]]:
        """Commit the healthy tables of ``files`` in Spark tasks when there are enough of them
        (sharedsub.core.fanout.routing_place.commits_in_tasks); return the rows each task
        committed, and the files the driver still commits (failing tables, and tables whose
        task failed: the driver tries them and parks their rows if it must).

        Raises:
            TaskFenced: a task found a higher epoch's commit: this job is superseded.
        """
        healthy = {rel: f for rel, f in files.items() if rel not in self.tables}
        if self.router is None or not commits_in_tasks(len(healthy), min_tables=self.task_commit_min_tables):
            return {}, files
        appenders = {rel: self._appender(layout.join(self.root, rel)) for rel in healthy}  # fenced at first use
        results = self.router.commit_tables(healthy, {rel: a.checked for rel, a in appenders.items()}, self.epoch, batch_id)
        committed: dict[str, int] = {}
        rest = {rel: f for rel, f in files.items() if rel not in healthy}
        for rel, table_files in healthy.items():
            result = results.get(rel)
            if result is not None and result.status == "fenced":
                raise TaskFenced(f"subscription table {rel}: {result.error}")
            if result is not None and result.status == "committed":
                committed[rel] = result.rows
                self.tables_committed_in_tasks += 1
                appenders[rel].assume_checked(result.version)
            else:
                log.warning(
                    "batch %d: the task committing %s failed (%s); the driver commits it",
                    batch_id, rel, result.error if result is not None else "no result",
                )  # fmt: skip
                rest[rel] = table_files
        return committed, rest

    def _place(self, batch: BatchInput, plan: RoutingPlan) -> tuple[Placement, list[TopicFiles] | None]:
        """Where to route this batch (sharedsub.core.fanout.routing_place), and its planned
        files when the driver plans it (None otherwise)."""
        if self.router is None or self.routing == "driver":
            return Placement.DRIVER, None
        parts = batch.parts(plan.topics)
        executors = self.router.executors()
        routes = plan.routes_per_topic()
        work = None
        if parts is not None and all(p.rows is not None for p in parts):
            work = sum((p.rows or 0) * routes.get(p.topic, 0) for p in parts)
        where = placement(self.routing, executors=executors, work=work, executor_min_work=self.executor_min_work)
        if where is Placement.EXECUTORS and parts is None and batch.frame(plan.topics) is None:
            where = Placement.DRIVER  # rows given as a table: nothing for the executors to read
        return where, parts

    def tick(self, progress: dict[str, Any] | None = None) -> bool:  # Any: lastProgress's JSON values (see FanoutQuery)
        """Between batches (the driver's main thread): record the routed versions of the query's
        last completed micro-batch (``progress``, ``StreamingQuery.lastProgress``) and retry the
        failing tables whose retry is due. Does nothing while a batch runs (that batch retries
        them). Returns whether it retried anything. Never raises (a failure is logged)."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            changed = self._note_progress(progress)
            self._progress_moved = self._progress_moved or changed
            if self._record_progress:
                self._write_progress_record()
            now = time.time()
            due = any(not s.healthy and now >= s.retry_at for s in self.tables.values())
            if due:
                plan = self.plan()
                written = self.write_routed(route_rows(plan, ARROW_SCHEMA.empty_table()), plan, -1)
                self.stats.count(written, (r.record for r in plan.routes))
            if changed or due:
                self.stats.write()
        except Exception as exc:  # noqa: BLE001 (a tick's fault is logged and retried at the next tick)
            self._faults.fault("tick", "retrying parked rows between batches failed", error=exc)
            return False
        finally:
            self._lock.release()
        self._faults.clear("tick", "retrying parked rows between batches works again")
        return due

    def _note_progress(self, progress: dict[str, Any] | None) -> bool:  # Any: as tick
        """Take the routed versions from a progress report; True when they changed."""
        if progress is None:
            return False
        try:
            batch = int(progress["batchId"])
            end = progress["sources"][0]["endOffset"]
            versions = offset_versions(json.loads(end) if isinstance(end, str) else end)
        except (KeyError, IndexError, TypeError, ValueError):
            return False
        if versions == self.stats.routed_versions and batch == self._last_progress:
            return False
        self._last_progress = batch
        self.stats.routed_versions = versions
        self._routed_ids = offset_ids(json.loads(end) if isinstance(end, str) else end)
        return True

    def _write_progress_record(self) -> None:
        """Write the progress record when due (sharedsub.core.ops.fanout_progress.due); called with
        the lock held, so no batch is in the job's hands: ``at_ms`` is such a moment. Nothing
        before the first completed batch. A failed write is logged (throttled) and retried."""
        versions, batch = self.stats.routed_versions, self._last_progress
        if versions is None or batch is None:
            return
        now = time.monotonic()
        since = None if self._progress_written is None else now - self._progress_written
        if not fanout_progress.due(changed=self._progress_moved, since_last=since):
            return
        try:
            write_progress(self.root, versions, self._routed_ids, batch=batch, at_ms=int(time.time() * 1000))
        except OSError as exc:
            self._faults.fault("progress", "could not write the fan-out progress record", error=exc)
            return
        self._faults.clear("progress", "the fan-out progress record is written again")
        self._progress_written = now
        self._progress_moved = False

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
        a table whose commit fails gets its rows parked instead (module docstring), and the
        failing tables whose retry is due are retried, with or without rows in this batch.

        Raises:
            Exception: the error of a table whose rows could be neither committed nor parked,
                after every other table finished (the batch is replayed, and the tables that did
                commit drop their rows then).
        """
        self._forget_unplanned(plan)
        routed_at = routed_at or dt.datetime.now(dt.UTC)
        batch: dict[str, pa.Table | list[DataFile]] = {}
        if routed is not None:
            for index, rows in by_route(routed):
                batch[plan.routes[index].record.table] = subscription_rows(rows, routed_at, batch_id)
        batch.update(files or {})
        now = time.time()
        jobs: list[tuple[str, pa.Table | list[DataFile] | None, TableState, Step]] = []
        for rel in [*batch, *(t for t in self.tables if t not in batch)]:
            rows = batch.get(rel)
            state = self.tables.get(rel, HEALTHY)
            step = decide(state, has_rows=rows is not None, now=now)
            if step is not Step.DONE:
                jobs.append((rel, rows, state, step))
        futures = [self._pool.submit(self._route_table, *job, batch_id, now) for job in jobs]
        results = [f.result() for f in futures]  # _route_table returns its errors; waits for all
        written: dict[str, int] = {}
        failed: BaseException | None = None
        for (rel, _, before, _), result in zip(jobs, results, strict=True):
            self._report(rel, before, result)
            if result.state.healthy:
                self.tables.pop(rel, None)
            else:
                self.tables[rel] = result.state
            if result.written:
                written[layout.join(self.root, rel)] = result.written
            if result.fail_batch is not None and failed is None:
                failed = result.fail_batch
        self.stats.failing = self.failing_report()
        if written and self.on_routed is not None:
            self.on_routed()
        if failed is not None:
            self.stats.write()  # the failing tables, before the batch fails
            raise failed
        return written

    def _route_table(
        self,
        rel: str,
        rows: pa.Table | list[DataFile] | None,
        state: TableState,
        step: Step,
        batch_id: int,
        now: float,
    ) -> _TableResult:
        """One table's part of a batch, as :func:`sharedsub.core.fanout.fanout_faults.decide` directs (a commit
        thread): its rows, or the data files the executors wrote for it. Returns, never raises,
        what came of it."""
        table = layout.join(self.root, rel)
        committed: bool | None = None
        parked: bool | None = None
        written = parked_rows = 0
        error: BaseException | None = None
        while step not in (Step.DONE, Step.FAIL_BATCH):
            if isinstance(rows, list) and step is not Step.COMMIT:
                # Parked rows, or rows to park, are rows: read the files back (they stay, as
                # orphans no commit names, until vacuum: one might have landed unseen).
                try:
                    rows = read_data_files(table, rows)
                except Exception as exc:  # noqa: BLE001 (unreadable: the batch fails, Spark retries it)
                    log.error("subscription table %s: could not read back its routed files: %s", rel, exc)
                    return _TableResult(state, written, error=error, fail_batch=exc)
            if step is Step.PARK:
                assert rows is not None and not isinstance(rows, list)
                try:
                    self.parked.park(rel, rows, batch_id)
                    parked, parked_rows = True, rows.num_rows
                    state = after_park(state, rows.num_rows)
                except Exception as exc:  # noqa: BLE001 (a park that fails for any reason fails the batch, which Spark retries)
                    parked = False
                    log.error("subscription table %s: could not park %d rows: %s", rel, rows.num_rows, exc)
                    return _TableResult(state, written, error=error, fail_batch=exc)
            else:
                try:
                    if step is Step.RETRY_PARKED:
                        assert not isinstance(rows, list)
                        written = self._commit_parked(rel, table, rows)
                    elif isinstance(rows, list):
                        written = self._commit_files(table, rows)
                    else:
                        assert rows is not None
                        written = self._commit(table, rows)
                    committed = True
                    state = after_commit(state, ok=True, now=now, retry_interval=self.retry_interval)
                except Fenced as exc:  # superseded: another job owns the tables now; nothing is parked
                    log.error("subscription table %s: %s", rel, exc)
                    return _TableResult(state, written, error=exc, fail_batch=exc)
                except Exception as exc:  # noqa: BLE001 (any failed commit parks the table's rows (fanout_faults))
                    committed, error = False, exc
                    state = after_commit(state, ok=False, now=now, retry_interval=self.retry_interval, error=_error_text(exc))
            step = decide(state, has_rows=rows is not None, now=now, committed=committed, parked=parked)
        return _TableResult(state, written, parked_rows, error)

    def _commit_parked(self, rel: str, table: str, rows: pa.Table | None) -> int:
        """Commit the parked rows of ``rel``, then ``rows``, in seq order, and remove the parked
        files; return the rows committed. Raises what a commit raises (the files stay)."""
        files = self.parked.files(rel)
        highest: dict[int, int] = {}  # per topic partition (sharedsub.core.fanout.partition_marks)
        parts: list[pa.Table] = []
        size = committed = 0
        for part in [*(self.parked.read(p) for p in files), *([rows] if rows is not None else [])]:
            part = above_marks(part, highest)  # rows a replay parked again
            if part.num_rows == 0:
                continue
            for partition, rows_of in by_partition(part):
                highest[partition] = int(pc.max(rows_of.column("seq")).as_py())
            parts.append(part)
            size += part.num_rows
            if size >= RETRY_ROWS_PER_COMMIT:
                committed += self._commit(table, pa.concat_tables(parts))
                parts, size = [], 0
        if parts:
            committed += self._commit(table, pa.concat_tables(parts))
        try:
            self.parked.remove(rel, files)
        except OSError as exc:
            # Committed: the files are only dead weight now. A restarted job reads them again and
            # its commits drop every row (app transactions), then removes them.
            log.warning("subscription table %s: could not remove its committed parked rows: %s", rel, exc)
        return committed

    def _report(self, rel: str, before: TableState, result: _TableResult) -> None:
        """Log a table's fault when it starts, at most every few minutes while it lasts, and when it clears."""
        rec = self._subscriptions.get(rel)
        name = rec.key if rec is not None else rel
        if result.error is not None:
            self._faults.fault(
                rel,
                "subscription %s: commit to %s failed; its rows are parked in %s and retried every %.0f s",
                name,
                rel,
                layout.FANOUT_PENDING,
                self.retry_interval,
                error=result.error,
            )
        elif not before.healthy and result.state.healthy:
            if not self._faults.clear(rel, "subscription %s: %s takes commits again", name, rel):
                log.info("subscription %s: rows parked before the job started are committed to %s", name, rel)

    def failing_report(self) -> dict[str, dict[str, object]]:
        """The failing tables for the statistics file, by subscription key (tables of unknown
        subscriptions, before the first plan, by table path)."""
        out: dict[str, dict[str, object]] = {}
        for rel, state in sorted(self.tables.items()):
            rec = self._subscriptions.get(rel)
            out[rec.key if rec is not None else rel] = {
                "topic": rec.topic if rec is not None else None,
                "table": rel,
                "since": state.failing_since,
                "error": state.last_error,
                "parked_rows": state.parked_rows,
                "failures": state.failures,
                "retry_at": state.retry_at,
            }
        return out

    def _appender(self, table: str) -> DeltaAppender:
        appender = self._appenders.get(table)
        if appender is None:
            appender = DeltaAppender(table, schemas.SUBSCRIPTION, epoch=self.epoch)
            if self.epoch is not None and table_exists(table):
                # A job of a lower epoch (stopped, then resumed) that commits after this finds
                # the fence and stops; one of a higher epoch makes this raise Fenced.
                appender.fence()
            self._appenders[table] = appender
        return appender

    def _commit_files(self, table: str, files: list[DataFile]) -> int:
        """Commit the executors' data files of ``table`` (in seq order) in one commit, leaving out
        rows the table holds already (sharedsub.storage.delta.file_commits); return the rows
        committed."""
        return commit_routed_files(self._appender(table), files, schemas.SPARK_APP_ID, schemas.SUBSCRIPTION).rows

    def _commit(self, table: str, rows: pa.Table) -> int:
        """Commit the rows ``table`` does not hold yet (by each topic partition's app-transaction
        mark, sharedsub.core.fanout.partition_marks) in one commit that moves those marks;
        return the rows committed."""
        appender = self._appender(table)
        keep: list[pa.Table] = []
        marks: list[tuple[str, int]] = []
        for partition, part in by_partition(rows):
            app_id = transaction_app_id(schemas.SPARK_APP_ID, partition)
            done = appender.transaction_version(app_id)
            if done is not None:
                part = part.filter(pc.greater(part.column("seq"), done))
            if part.num_rows:
                keep.append(part)
                marks.append((app_id, int(pc.max(part.column("seq")).as_py())))
        if not keep:
            return 0
        data = keep[0] if len(keep) == 1 else pa.concat_tables(keep)
        appender.append(data, app_transactions=marks)
        return data.num_rows

    def _forget_unplanned(self, plan: RoutingPlan) -> None:
        # Appenders of deleted subscriptions hold a loaded DeltaTable each; drop them.
        live = {r.record.table for r in plan.routes}
        live_paths = {layout.join(self.root, rel) for rel in live}
        for table in [t for t in self._appenders if t not in live_paths]:
            del self._appenders[table]
        # Rows parked for a subscription that was deleted (or got a new generation) have no table
        # to go to any more: the subscription's messages went with it.
        for rel in [t for t in self.tables if t not in live]:
            state = self.tables.pop(rel)
            self._faults.forget(rel)
            try:
                self.parked.remove(rel)
            except OSError as exc:
                log.warning("could not remove the parked rows of %s: %s", rel, exc)
            log.info("%s is no longer routed (its subscription was deleted): %d parked rows dropped", rel, state.parked_rows)


def _error_text(exc: BaseException) -> str:
    """One line naming a failed commit's error (for the statistics file and /health)."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:500]


class ReadOnDriver:
    """A ``foreachBatch`` callback that routes each micro-batch with ``sink``, its files planned
    on the driver by ``reader`` (``[fanout] driver_reads``): :class:`PlannedBatch`."""

    def __init__(self, sink: FanoutSink, reader: DriverBatchReader) -> None:
        self.sink = sink
        self.reader = reader

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """Route micro-batch ``batch_id``."""
        self.sink.route(PlannedBatch(df, self.reader, batch_id), batch_id)
