"""The fan-out job: route every topic's new messages to the tables of the subscriptions they match.

    python -m jobs.fanout --data-dir D [--config F] [--trigger-interval S] [--available-now] [--checkpoint C]
    spark-submit jobs/fanout.py --data-dir D ...      (PYSPARK_PYTHON must be the venv's python)

One Structured Streaming query: ``readStream.format("sharedsub_topics")`` over all topic tables,
``foreachBatch`` → :class:`FanoutSink`. Per micro-batch the sink re-reads the catalog, collects
the batch's routing columns on the driver with ``toArrow()`` (executors read the topic files),
evaluates binding, selector and no-local of every subscription in one vectorised pass over it
(:meth:`sharedsub.core.fanout.routing.RoutingPlan.route`, the plan compiled once per catalog state), and
makes one Delta commit per subscription table that got rows.

Contracts:

* **Registered before committed ⇒ routed.** The catalog is refreshed inside ``foreachBatch``, i.e.
  after the batch's end offset was fixed; the front end commits a subscription's catalog entry
  (with ``start_seq``) before any message with ``seq >= start_seq``, so every such message is in a
  batch whose catalog read sees the subscription.
* **Exactly once per subscription table**, whatever happens to the job (replayed batch, crash
  between two tables' commits, lost checkpoint): each commit records the Delta app transaction
  ``(SPARK_APP_ID, highest seq in the table)``, and rows with ``seq`` at or below the recorded
  version are dropped before writing. delta-rs does not reject a repeated app transaction
  (docs/feasibility.md gotcha 2), so this check is what guarantees it. A subscription table has one topic,
  and batches read each topic in seq order, so that version only grows.
* Rows of a subscription table are appended in ``seq`` order.
* **One failing subscription table does not stop the others.** A table whose commit fails (after
  delta-rs's and the appender's retries) is *failing*: its rows of the batch are *parked*
  (:class:`ParkedRows`, ``<data>/_fanout/pending/``, fsynced before the batch is reported done),
  later batches park its rows without a commit attempt until ``[fanout] table_retry_interval``
  has passed, and a retry commits the parked rows, then the batch's, so the table still gets
  every row once, in ``seq`` order (the app-transaction check above drops rows a commit already
  holds). Between batches the driver's main thread retries due tables (:meth:`FanoutSink.tick`),
  so a repaired table catches up without new messages; a restarted job finds the parked rows on
  disk and retries them at once. Only when rows can be neither committed nor parked (a full
  disk) does the batch fail, as before (Spark retries it; nothing is lost). The rule is
  :mod:`sharedsub.core.fanout.fanout_faults`; failing tables are reported in the statistics file
  (``failing``), read by /health and /metrics, and logged when the fault starts, at most every
  few minutes while it lasts, and when it clears (:mod:`sharedsub.core.ops.logthrottle`).
* The CLI prints exactly one line, ``sharedsub fanout running``, on stdout once the query has
  started and completed its first trigger (a micro-batch, or an idle check on a restart with
  nothing new); everything else goes to stderr. SIGTERM/SIGINT stop the query gracefully and the
  process exits 0; a failed query exits 1. ``--available-now`` processes what is there and exits.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

if __package__ in (None, ""):
    # Run as a script (spark-submit jobs/fanout.py): sys.path[0] is jobs/, not the project root.
    # An installed sharedsub (editable or not) already provides ``jobs``; otherwise add the root.
    import importlib.util

    if importlib.util.find_spec("jobs") is None:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if importlib.util.find_spec("pyarrow") is None or importlib.util.find_spec("sharedsub") is None:
        # spark-submit runs $PYSPARK_DRIVER_PYTHON / $PYSPARK_PYTHON, else "python3" from PATH.
        sys.exit(
            f"jobs/fanout.py: {sys.executable} lacks pyarrow or sharedsub; run spark-submit with "
            "PYSPARK_PYTHON=<project>/.venv/bin/python (or with the venv activated)"
        )

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from jobs.delta_source import DeltaTopicQueries, checkpoint_base
from jobs.deltars_source import ARROW_SCHEMA, SOURCE_NAME, DriverBatchReader, offset_versions
from jobs.session import build_session, delta_enabled
from sharedsub.core import layout
from sharedsub.core.config import Settings, load_settings
from sharedsub.core.errors import SharedSubError
from sharedsub.core.fanout.fanout_faults import HEALTHY, Step, TableState, after_commit, after_park, decide
from sharedsub.core.fanout.routing import ROUTE_COLUMN, RoutingPlan, plan_for
from sharedsub.core.layout import local_path
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops.logthrottle import ThrottledLog
from sharedsub.runtime.logformat import configure_logging
from sharedsub.storage import schemas
from sharedsub.storage.catalog import CatalogReader
from sharedsub.storage.delta.appender import TableAppender
from sharedsub.storage.fanout_stats import StatsRecorder

READY_LINE = "sharedsub fanout running"
# Commits are I/O bound (a Parquet write and a log put per table): a few threads overlap them.
DEFAULT_COMMIT_THREADS = 4
# A retry commits parked rows in commits of at most this many rows (bounds the driver's memory).
RETRY_ROWS_PER_COMMIT = 100_000

log = logging.getLogger("sharedsub.fanout")

_SOURCE_COLUMNS = ("topic", *schemas.SUBSCRIPTION_FROM_TOPIC)
_ESCAPED_LITERALS = "spark.sql.parser.escapedStringLiterals"


class ParkedRows:
    """Routed rows of subscription tables whose commits failed, kept on disk until the table takes
    them (local data dirs only).

    One Parquet file per (table, batch): ``<data>/_fanout/pending/<table rel>/<first seq>-<batch
    id>.parquet`` (both numbers zero-padded to 20 digits), schema ``schemas.SUBSCRIPTION``, rows
    in ``seq`` order. A file is written under a temporary name, fsynced, renamed and its directory
    fsynced (and every directory created for it): after :meth:`park` returns, the rows survive a
    crash or power loss; a file is whole or absent. Named by first seq, the files of a table sort
    in seq order; a file holds every row of its table in its seq range, so reading them in name
    order and keeping rows above the highest seq taken so far yields each row once, in order,
    even when a replayed batch parked the same rows again.
    """

    def __init__(self, root: str) -> None:
        self.base: str | None = local_path(layout.fanout_pending(root))

    def _dir(self, rel: str) -> str:
        if self.base is None:
            raise OSError(f"rows can only be parked under a local data dir, not {layout.FANOUT_PENDING!r} here")
        return os.path.join(self.base, *rel.split("/"))

    def scan(self) -> dict[str, tuple[int, float]]:
        """``{table rel: (rows, modification time of its oldest file)}`` of everything parked;
        leftover temporary files of an interrupted :meth:`park` are removed."""
        found: dict[str, tuple[int, float]] = {}
        if self.base is None or not os.path.isdir(self.base):
            return found
        for dirpath, _dirs, names in os.walk(self.base):
            rows, oldest = 0, float("inf")
            for name in names:
                path = os.path.join(dirpath, name)
                if name.startswith("."):
                    os.unlink(path)  # a park that did not complete; its batch was not reported done
                elif name.endswith(".parquet"):
                    rows += pq.read_metadata(path).num_rows
                    oldest = min(oldest, os.stat(path).st_mtime)
            if oldest != float("inf"):
                found[os.path.relpath(dirpath, self.base).replace(os.sep, "/")] = (rows, oldest)
        return found

    def files(self, rel: str) -> list[str]:
        """The parked files of table ``rel``, in seq order (none: [])."""
        directory = self._dir(rel)
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return []
        return [os.path.join(directory, n) for n in sorted(names) if n.endswith(".parquet") and not n.startswith(".")]

    def park(self, rel: str, rows: pa.Table, batch_id: int) -> None:
        """Store ``rows`` (of table ``rel``, seq order) durably; raises OSError when it cannot."""
        directory = self._dir(rel)
        _makedirs_synced(directory)
        first = int(rows.column("seq")[0].as_py())
        name = f"{first:020d}-{batch_id:020d}.parquet"
        tmp = os.path.join(directory, f".{name}.tmp")
        try:
            pq.write_table(rows.cast(schemas.SUBSCRIPTION), tmp)
            _fsync(tmp)
            os.replace(tmp, os.path.join(directory, name))
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        _fsync(directory, directory=True)

    @staticmethod
    def read(path: str) -> pa.Table:
        """The rows of one parked file."""
        return pq.read_table(path).cast(schemas.SUBSCRIPTION)

    def remove(self, rel: str, files: Sequence[str] | None = None) -> None:
        """Delete ``files`` (default: all) of table ``rel``, and its directories once empty."""
        for path in self.files(rel) if files is None else files:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        directory = self._dir(rel)
        assert self.base is not None
        while directory != self.base and os.path.isdir(directory) and not os.listdir(directory):
            os.rmdir(directory)
            directory = os.path.dirname(directory)


def _fsync(path: str, *, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _makedirs_synced(path: str) -> None:
    """``os.makedirs(path)``, with the parent of every directory it creates fsynced."""
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory)
        _fsync(os.path.dirname(directory), directory=True)


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
    ) -> None:
        self.root = root
        self.retry_interval = retry_interval
        self.catalog = CatalogReader(root)
        self._appenders: dict[str, TableAppender] = {}
        self._pool = ThreadPoolExecutor(max_workers=commit_threads, thread_name_prefix="fanout-commit")
        self._warned: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self.stats = StatsRecorder(root)  # read by the /metrics endpoint of serve/frontend
        self.parked = ParkedRows(root)
        # Per subscription table (relative path): tables that are not healthy (failing or with
        # parked rows); a table missing here is healthy. Rows parked before a restart are due.
        self.tables: dict[str, TableState] = {
            rel: TableState(parked_rows=rows, failing_since=oldest)
            for rel, (rows, oldest) in self.parked.scan().items()
        }
        self._subscriptions: dict[str, SubscriptionRecord] = {}  # table rel -> record, from the last plan
        self._faults = ThrottledLog(log)
        self._last_progress: int | None = None
        self._last_end_wall: float | None = None  # when the previous micro-batch's routing ended

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """The ``foreachBatch`` callback: :meth:`route_batch`."""
        self.route_batch(df, batch_id)

    def close(self) -> None:
        """Stop the commit threads."""
        self._pool.shutdown(wait=True)

    def plan(self) -> RoutingPlan:
        """Routing plan from the catalog as it is now (refreshed); logs records it must skip."""
        plan = plan_for(tuple(self.catalog.active()))
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
        files again) and does not read it when no subscription is active. The rows of the batch
        are collected on the driver (``toArrow``), so ``max_commits_per_batch`` is what bounds
        the driver's memory (docs/feasibility.md gotcha 6).
        """
        return self.route(lambda topics: df.where(F.col("topic").isin(sorted(topics))).toArrow(), batch_id)

    def route(self, read: Callable[[Collection[str]], pa.Table], batch_id: int) -> dict[str, int]:
        """Route micro-batch ``batch_id``, whose rows of the given topics ``read`` returns (called
        once, and only when a subscription is active); see :meth:`route_batch`."""
        with self._lock:
            started = time.monotonic()
            started_wall = time.time()
            plan = self.plan()
            if not plan.routes:
                log.debug("batch %d: no active subscriptions", batch_id)
                reported = self.stats.failing
                self.write_routed(_route(plan, ARROW_SCHEMA.empty_table()), plan, batch_id)  # drops stale parked rows
                if self.stats.failing != reported:
                    self.stats.write()
                return {}
            source = read(plan.topics)
            fetched = time.monotonic()
            routed = _route(plan, source)
            evaluated = time.monotonic()
            written = self.write_routed(routed, plan, batch_id)
            stages = self.stats.stages
            stages.observe("fanout_source_read", fetched - started)
            stages.observe("fanout_route", evaluated - fetched)
            stages.observe("fanout_commit", time.monotonic() - evaluated)
            stages.observe("fanout_batch", time.monotonic() - started)
            oldest = _oldest_published(source)
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
                logging.INFO if routed.num_rows else logging.DEBUG,
                "batch %d: %d messages, %d routed rows for %d subscriptions in %.0f ms, "
                "%d rows committed to %d tables in %.0f ms",
                batch_id,
                source.num_rows,
                routed.num_rows,
                len(plan.routes),
                (evaluated - started) * 1000,
                sum(written.values()),
                len(written),
                (time.monotonic() - evaluated) * 1000,
            )
            self.stats.record(batch_id, source, written, (r.record for r in plan.routes), time.monotonic() - started)
            return written

    def tick(self, progress: Any = None) -> bool:
        """Between batches (the driver's main thread): record the routed versions of the query's
        last completed micro-batch (``progress``, ``StreamingQuery.lastProgress``) and retry the
        failing tables whose retry is due. Does nothing while a batch runs (that batch retries
        them). Returns whether it retried anything. Never raises (a failure is logged)."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            changed = self._note_progress(progress)
            now = time.time()
            due = any(not s.healthy and now >= s.retry_at for s in self.tables.values())
            if due:
                plan = self.plan()
                written = self.write_routed(_route(plan, ARROW_SCHEMA.empty_table()), plan, -1)
                self.stats.count(written, (r.record for r in plan.routes))
            if changed or due:
                self.stats.write()
        except Exception as exc:
            self._faults.fault("tick", "retrying parked rows between batches failed", error=exc)
            return False
        finally:
            self._lock.release()
        self._faults.clear("tick", "retrying parked rows between batches works again")
        return due

    def _note_progress(self, progress: Any) -> bool:
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
        return True

    def write_routed(self, routed: pa.Table, plan: RoutingPlan, batch_id: int) -> dict[str, int]:
        """Commit ``routed`` (source columns + route index) to the subscription tables; return
        the rows committed per table (absolute path), parked rows committed by a retry included.

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
        routed_at = dt.datetime.now(dt.UTC)
        ordered = routed.sort_by([(ROUTE_COLUMN, "ascending"), ("seq", "ascending")])
        batch: dict[str, pa.Table] = {}
        offset = 0
        # value_counts lists values in order of first appearance: ascending, as ``ordered`` is.
        for entry in pc.value_counts(ordered.column(ROUTE_COLUMN)).to_pylist():
            index, count = int(entry["values"]), int(entry["counts"])
            rows = ordered.slice(offset, count)
            offset += count
            batch[plan.routes[index].record.table] = _subscription_rows(rows, routed_at, batch_id)
        now = time.time()
        jobs: list[tuple[str, pa.Table | None, TableState, Step]] = []
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
        if failed is not None:
            self.stats.write()  # the failing tables, before the batch fails
            raise failed
        return written

    def _route_table(
        self, rel: str, rows: pa.Table | None, state: TableState, step: Step, batch_id: int, now: float
    ) -> _TableResult:
        """One table's part of a batch, as :func:`sharedsub.core.fanout.fanout_faults.decide` directs (a commit
        thread). Returns, never raises, what came of it."""
        table = layout.join(self.root, rel)
        committed: bool | None = None
        parked: bool | None = None
        written = parked_rows = 0
        error: BaseException | None = None
        while step not in (Step.DONE, Step.FAIL_BATCH):
            if step is Step.PARK:
                assert rows is not None
                try:
                    self.parked.park(rel, rows, batch_id)
                    parked, parked_rows = True, rows.num_rows
                    state = after_park(state, rows.num_rows)
                except Exception as exc:
                    parked = False
                    log.error("subscription table %s: could not park %d rows: %s", rel, rows.num_rows, exc)
                    return _TableResult(state, written, error=error, fail_batch=exc)
            else:
                try:
                    if step is Step.RETRY_PARKED:
                        written = self._commit_parked(rel, table, rows)
                    else:
                        assert rows is not None
                        written = self._commit(table, rows)
                    committed = True
                    state = after_commit(state, ok=True, now=now, retry_interval=self.retry_interval)
                except Exception as exc:
                    committed, error = False, exc
                    state = after_commit(state, ok=False, now=now, retry_interval=self.retry_interval, error=_error_text(exc))
            step = decide(state, has_rows=rows is not None, now=now, committed=committed, parked=parked)
        return _TableResult(state, written, parked_rows, error)

    def _commit_parked(self, rel: str, table: str, rows: pa.Table | None) -> int:
        """Commit the parked rows of ``rel``, then ``rows``, in seq order, and remove the parked
        files; return the rows committed. Raises what a commit raises (the files stay)."""
        files = self.parked.files(rel)
        highest = -1
        parts: list[pa.Table] = []
        size = committed = 0
        for part in [*(ParkedRows.read(p) for p in files), *([rows] if rows is not None else [])]:
            if highest >= 0:
                part = part.filter(pc.greater(part.column("seq"), highest))  # rows a replay parked again
            if part.num_rows == 0:
                continue
            highest = int(pc.max(part.column("seq")).as_py())
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

    def failing_report(self) -> dict[str, dict[str, Any]]:
        """The failing tables for the statistics file, by subscription key (tables of unknown
        subscriptions, before the first plan, by table path)."""
        out: dict[str, dict[str, Any]] = {}
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

    def _commit(self, table: str, rows: pa.Table) -> int:
        appender = self._appenders.get(table)
        if appender is None:
            appender = self._appenders[table] = TableAppender(table, schemas.SUBSCRIPTION)
        done = appender.transaction_version(schemas.SPARK_APP_ID)
        if done is not None:
            rows = rows.filter(pc.greater(rows.column("seq"), done))
        if rows.num_rows == 0:
            return 0
        highest = int(pc.max(rows.column("seq")).as_py())
        appender.append(rows, app_transaction=(schemas.SPARK_APP_ID, highest))
        return rows.num_rows

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


def _oldest_published(source: pa.Table) -> float | None:
    """The oldest ``published_at`` of a batch's source rows, as epoch seconds (None: no rows)."""
    if source.num_rows == 0 or "published_at" not in source.column_names:
        return None
    oldest = pc.min(source.column("published_at")).as_py()
    return None if oldest is None else float(oldest.timestamp())


def _route(plan: RoutingPlan, source: pa.Table) -> pa.Table:
    """The routed rows of the collected micro-batch ``source`` (source columns + route index)."""
    if source.num_rows == 0:
        empty = source.select(list(_SOURCE_COLUMNS)).slice(0, 0)
        return empty.append_column(ROUTE_COLUMN, pa.array([], pa.int32()))
    return plan.route(source.combine_chunks().to_batches()[0], _SOURCE_COLUMNS)


def _subscription_rows(rows: pa.Table, routed_at: dt.datetime, batch_id: int) -> pa.Table:
    """Rows of schemas.SUBSCRIPTION from routed source rows of one subscription."""
    n = rows.num_rows
    columns: dict[str, Any] = {name: rows.column(name) for name in _SOURCE_COLUMNS}
    columns["routed_at"] = pa.array([routed_at] * n, schemas.TIMESTAMP)
    columns["fanout_batch"] = pa.array([batch_id] * n, pa.int64())
    return pa.table([columns[f.name] for f in schemas.SUBSCRIPTION], names=schemas.SUBSCRIPTION.names).cast(
        schemas.SUBSCRIPTION
    )


def build_fanout_query(
    spark: SparkSession,
    settings: Settings,
    *,
    checkpoint: str | None = None,
    available_now: bool = False,
    sink: FanoutSink | None = None,
) -> StreamingQuery:
    """Start the fan-out query over ``settings.data_dir``; return it running.

    ``[fanout] source`` picks the source: ``deltars`` (default), the ``sharedsub_topics`` Python
    data source over delta-rs, one query over every topic; ``delta``, Delta's own streaming source
    through the connector, one query per topic (:mod:`jobs.delta_source`; checkpoints under
    ``<data>/_checkpoints/fanout-delta``), returned as one query look-alike.
    ``checkpoint`` defaults to ``<data>/_checkpoints/fanout``. ``available_now`` processes what
    the topics hold when the query starts (in batches capped by ``max_commits_per_batch``) and
    then stops. The query's :class:`FanoutSink` is ``sink`` if given, else a new one; a caller
    that passes one closes it after the query has stopped (as :func:`main` does).
    """
    root = settings.data_dir
    # routing.sql_string escapes for the default parser mode (backslash escapes); the legacy
    # mode would misread every routing regex. Only set it when needed: setting it logs a
    # deprecation warning.
    if (spark.conf.get(_ESCAPED_LITERALS, "false") or "false").lower() == "true":
        spark.conf.set(_ESCAPED_LITERALS, "false")
    if settings.fanout.source == "delta":  # Delta's own streaming source: one query per topic
        if not delta_enabled(spark):
            raise SharedSubError(
                "[fanout] source = \"delta\" needs the Delta Lake Spark connector, which this session lacks "
                "(python3 bootstrap.py setup fetches it into .jars/; under spark-submit pass it with --jars or --packages)"
            )
        return DeltaTopicQueries(  # type: ignore[return-value]  (a StreamingQuery look-alike)
            spark,
            root,
            sink if sink is not None else FanoutSink(root, retry_interval=settings.fanout.table_retry_interval),
            checkpoint=checkpoint or checkpoint_base(root),
            max_files=settings.fanout.max_commits_per_batch,
            available_now=available_now,
            trigger_interval=settings.fanout.trigger_interval,
        ).start()
    options = {
        "data_dir": root,
        "max_commits_per_batch": str(settings.fanout.max_commits_per_batch),
        # Held commits count towards a topic's lag once it has a subscription: keep below stalled.
        "unsubscribed_topic_interval": str(
            min(settings.fanout.unsubscribed_topic_interval, settings.fanout.stalled_after / 2)
        ),
    }
    source = spark.readStream.format(SOURCE_NAME).options(**options).load()
    location = checkpoint or layout.fanout_checkpoint(root)
    routing = sink if sink is not None else FanoutSink(root, retry_interval=settings.fanout.table_retry_interval)
    local = local_path(location)
    batches: Any = routing
    if settings.fanout.driver_reads and local is not None:
        batches = ReadOnDriver(routing, DriverBatchReader(local, options))
    writer = source.writeStream.foreachBatch(batches).option("checkpointLocation", location)
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{settings.fanout.trigger_interval} seconds")
    return writer.start()


class ReadOnDriver:
    """A ``foreachBatch`` callback that routes each micro-batch with ``sink``, its rows read on
    the driver by ``reader`` (``[fanout] driver_reads``): the DataFrame Spark passes is never
    run, so the source's tasks never start."""

    def __init__(self, sink: FanoutSink, reader: DriverBatchReader) -> None:
        self.sink = sink
        self.reader = reader

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """Route micro-batch ``batch_id`` (``df`` unused)."""
        self.sink.route(lambda topics: self.reader.read(batch_id, topics), batch_id)


def wait_first_trigger(query: StreamingQuery, stop: threading.Event, timeout: float) -> bool:
    """Wait until ``query`` reported its first progress (or ended); False on ``stop``/timeout.

    A progress report is written after a micro-batch completes, and after a trigger found
    nothing new (jobs/spark-defaults.conf makes the first idle report immediate).

    Raises:
        pyspark.errors.StreamingQueryException: the query failed before reporting.
    """
    deadline = time.monotonic() + timeout
    while not stop.is_set() and time.monotonic() < deadline:
        if query.lastProgress is not None:
            return True
        if not query.isActive:
            query.awaitTermination()  # raises the query's error, if it failed
            return True
        stop.wait(0.1)
    return False


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="jobs.fanout",
        description="Route topic messages to subscription tables (Spark Structured Streaming).",
    )
    parser.add_argument("--data-dir", help="tables root (default: [storage] data_dir)")
    parser.add_argument("--config", help="a sharedsub TOML file on top of sharedsub/core/defaults.toml")
    parser.add_argument("--trigger-interval", type=float, help="seconds between micro-batches (0 = back to back)")
    parser.add_argument("--available-now", action="store_true", help="route what is there now, then exit 0")
    parser.add_argument("--checkpoint", help="Spark checkpoint dir (default: <data-dir>/_checkpoints/fanout)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the fan-out until stopped (or, with ``--available-now``, until caught up)."""
    args = _parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # one INFO line per foreachBatch call
    try:
        settings = load_settings(
            args.config,
            os.environ,
            {"storage.data_dir": args.data_dir, "fanout.trigger_interval": args.trigger_interval},
        )
    except SharedSubError as exc:
        print(f"jobs.fanout: {exc.description}", file=sys.stderr)
        return 2
    configure_logging(settings.log.level, settings.log.format)  # [log] / SHAREDSUB_LOG_* (serve passes its flags so)

    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("%s: stopping the fan-out", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    log.info("starting: data dir %s, master %s", settings.data_dir, settings.fanout.spark_master)
    spark = build_session(settings)
    sink = FanoutSink(settings.data_dir, retry_interval=settings.fanout.table_retry_interval)
    query: StreamingQuery | None = None
    try:
        query = build_fanout_query(
            spark, settings, checkpoint=args.checkpoint, available_now=args.available_now, sink=sink
        )
        if wait_first_trigger(query, stop, settings.fanout.startup_timeout):
            print(READY_LINE, flush=True)
        elif not stop.is_set():
            log.error("no micro-batch within %.0f s (fanout.startup_timeout)", settings.fanout.startup_timeout)
            return 1
        while not stop.is_set() and query.isActive:
            sink.tick(query.lastProgress)  # routed versions; retries of failing tables between batches
            stop.wait(0.5)  # the signal handler sets ``stop``, which wakes this at once
        if query.isActive:
            query.stop()
        query.awaitTermination()  # raises the query's error, if it failed
        log.info("stopped")
        return 0
    except Exception:
        log.exception("the fan-out query failed")
        return 1
    finally:
        if query is not None and query.isActive:
            query.stop()
        sink.close()
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
