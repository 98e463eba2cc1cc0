"""Each subscription table's part of a micro-batch: committed, or parked while the table fails.

:class:`Parking` applies the rule of sharedsub.core.fanout.fanout_faults for the fan-out sink
(jobs/fanout_sink.py): it keeps each table's :class:`~sharedsub.core.fanout.fanout_faults.TableState`
between batches (a table missing from :attr:`Parking.tables` is healthy), runs every table's
part of a batch on a few commit threads, parks the rows of a table whose commit failed
(:class:`sharedsub.storage.parked_rows.ParkedRows`, durable before the batch is reported done),
and retries a failing table's parked rows, then the batch's, once its retry is due. Its contracts
(those of jobs/fanout.py's docstring, "One failing subscription table does not stop the others"):

* A table's rows are committed in seq order: parked rows before any newer row of that table.
* Exactly once: the commits (jobs/table_commits.py) drop rows a table holds already, so parked
  rows an earlier attempt committed are not written twice; parked files are removed only after
  their rows are committed.
* One table's fault does not stop the others: :meth:`Parking.write` waits for every table and
  returns, never raises, the error of a table whose rows could be neither committed nor parked
  (the caller fails the batch with it); a fenced table (this job superseded) is such an error,
  with nothing parked.
* A table's fault is logged when it starts, at most every few minutes while it lasts, and when
  it clears (sharedsub.core.ops.logthrottle); :meth:`Parking.failing_report` is what the
  statistics file says of the failing tables.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from jobs.table_commits import TableCommits
from sharedsub.core import layout
from sharedsub.core.fanout.fanout_faults import HEALTHY, Step, TableState, after_commit, after_park, decide
from sharedsub.core.fanout.partition_marks import above_marks, by_partition
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops.logthrottle import ThrottledLog
from sharedsub.storage.delta.appender import Fenced
from sharedsub.storage.delta.data_files import DataFile, read_data_files
from sharedsub.storage.parked_rows import ParkedRows

# Commits are I/O bound (a Parquet write and a log put per table): a few threads overlap them.
DEFAULT_COMMIT_THREADS = 4
# A retry commits parked rows in commits of at most this many rows (bounds the driver's memory).
RETRY_ROWS_PER_COMMIT = 100_000

log = logging.getLogger("sharedsub.fanout")

# One table's part of a batch: its routed rows, or the data files the executors wrote for it.
TableRows: TypeAlias = "pa.Table | list[DataFile]"


@dataclasses.dataclass(frozen=True, slots=True)
class TableResult:
    """What one table's part of a batch came to (computed on a commit thread)."""

    state: TableState  # the table's state after the batch
    written: int = 0  # rows committed (parked rows included)
    parked: int = 0  # rows of this batch parked
    error: BaseException | None = None  # the failed commit's error
    fail_batch: BaseException | None = None  # set when the rows could be neither committed nor parked


ANNOUNCE_EVERY = 0.1
"""Seconds between two announcements of the tables a batch committed so far (Parking.write)."""


def _announce_as_done(futures: list[Future[TableResult]], tables: list[str], committed: Callable[[list[str]], None]) -> None:
    """Call ``committed`` with the tables whose future finished with rows written, as they
    finish, at most every :data:`ANNOUNCE_EVERY` seconds and once after the last. (One waiter
    for all the futures: ``wait`` in a loop registered one on each pending future per call,
    quadratic in a batch of ten thousand tables.)"""
    table_of = dict(zip(futures, tables, strict=True))
    fresh: list[str] = []
    last = time.monotonic()
    for future in as_completed(futures):
        if future.result().written:
            fresh.append(table_of[future])
        if fresh and time.monotonic() - last >= ANNOUNCE_EVERY:
            committed(fresh)
            fresh, last = [], time.monotonic()
    if fresh:
        committed(fresh)


class Parking:
    """The failing tables' states and parked rows of one fan-out query, and its commit threads.

    Calls come one at a time (the sink's lock); the tables of one call run concurrently.
    """

    def __init__(self, root: str, *, retry_interval: float = 5.0, commit_threads: int = DEFAULT_COMMIT_THREADS) -> None:
        """``retry_interval``: ``[fanout] table_retry_interval``, seconds between a failing
        table's commit attempts. Rows parked before a restart are due at once."""
        self.root = root
        self.retry_interval = retry_interval
        self.parked = ParkedRows(root)
        # Per subscription table (relative path): tables that are not healthy (failing or with
        # parked rows); a table missing here is healthy. Rows parked before a restart are due.
        self.tables: dict[str, TableState] = {
            rel: TableState(parked_rows=rows, failing_since=oldest) for rel, (rows, oldest) in self.parked.scan().items()
        }
        # Table rel -> record, from the sink's last routing plan: names the tables' subscriptions.
        self.subscriptions: dict[str, SubscriptionRecord] = {}
        self._pool = ThreadPoolExecutor(max_workers=commit_threads, thread_name_prefix="fanout-commit")
        self._faults = ThrottledLog(log)

    def close(self) -> None:
        """Stop the commit threads (after the running commits end)."""
        self._pool.shutdown(wait=True)

    def due(self, now: float) -> bool:
        """Whether a failing table's retry is due at ``now`` (seconds since the epoch)."""
        return any(not s.healthy and now >= s.retry_at for s in self.tables.values())

    def write(
        self,
        batch: Mapping[str, TableRows],
        batch_id: int,
        commits: TableCommits,
        *,
        committed: Callable[[list[str]], None] | None = None,
    ) -> tuple[dict[str, int], BaseException | None]:
        """Commit each table's part of ``batch`` (per table relative path) with ``commits``, or
        park it, and retry the failing tables whose retry is due, with or without rows in this
        batch, all on the commit threads. Returns the rows committed per table (absolute path),
        parked rows committed by a retry included, and the error of the first table whose rows
        could be neither committed nor parked (None: none), after every table finished.

        ``committed``: called on this thread with the tables (relative paths) that got rows, as
        they do, at most every :data:`ANNOUNCE_EVERY` seconds and once at the end: the front
        end's tailer reads the first tables of a batch of a thousand while the others are
        still being committed (issue 41)."""
        now = time.time()
        jobs: list[tuple[str, TableRows | None, TableState, Step]] = []
        for rel in [*batch, *(t for t in self.tables if t not in batch)]:
            rows = batch.get(rel)
            state = self.tables.get(rel, HEALTHY)
            step = decide(state, has_rows=rows is not None, now=now)
            if step is not Step.DONE:
                jobs.append((rel, rows, state, step))
        futures = [self._pool.submit(self._write_table, commits, *job, batch_id, now) for job in jobs]
        if committed is not None:
            _announce_as_done(futures, [job[0] for job in jobs], committed)
        results = [f.result() for f in futures]  # _write_table returns its errors; waits for all
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
        return written, failed

    def _write_table(
        self,
        commits: TableCommits,
        rel: str,
        rows: TableRows | None,
        state: TableState,
        step: Step,
        batch_id: int,
        now: float,
    ) -> TableResult:
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
                    return TableResult(state, written, error=error, fail_batch=exc)
            if step is Step.PARK:
                assert rows is not None and not isinstance(rows, list)
                try:
                    self.parked.park(rel, rows, batch_id)
                    parked, parked_rows = True, rows.num_rows
                    state = after_park(state, rows.num_rows)
                except Exception as exc:  # noqa: BLE001 (a park that fails for any reason fails the batch, which Spark retries)
                    parked = False
                    log.error("subscription table %s: could not park %d rows: %s", rel, rows.num_rows, exc)
                    return TableResult(state, written, error=error, fail_batch=exc)
            else:
                try:
                    if step is Step.RETRY_PARKED:
                        assert not isinstance(rows, list)
                        written = self._commit_parked(commits, rel, table, rows)
                    elif isinstance(rows, list):
                        written = commits.commit_files(table, rows)
                    else:
                        assert rows is not None
                        written = commits.commit(table, rows)
                    committed = True
                    state = after_commit(state, ok=True, now=now, retry_interval=self.retry_interval)
                except Fenced as exc:  # superseded: another job owns the tables now; nothing is parked
                    log.error("subscription table %s: %s", rel, exc)
                    return TableResult(state, written, error=exc, fail_batch=exc)
                except Exception as exc:  # noqa: BLE001 (any failed commit parks the table's rows (fanout_faults))
                    committed, error = False, exc
                    state = after_commit(state, ok=False, now=now, retry_interval=self.retry_interval, error=error_text(exc))
            step = decide(state, has_rows=rows is not None, now=now, committed=committed, parked=parked)
        return TableResult(state, written, parked_rows, error)

    def _commit_parked(self, commits: TableCommits, rel: str, table: str, rows: pa.Table | None) -> int:
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
                committed += commits.commit(table, pa.concat_tables(parts))
                parts, size = [], 0
        if parts:
            committed += commits.commit(table, pa.concat_tables(parts))
        try:
            self.parked.remove(rel, files)
        except OSError as exc:
            # Committed: the files are only dead weight now. A restarted job reads them again and
            # its commits drop every row (app transactions), then removes them.
            log.warning("subscription table %s: could not remove its committed parked rows: %s", rel, exc)
        return committed

    def _report(self, rel: str, before: TableState, result: TableResult) -> None:
        """Log a table's fault when it starts, at most every few minutes while it lasts, and when it clears."""
        rec = self.subscriptions.get(rel)
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
            rec = self.subscriptions.get(rel)
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

    def forget(self, live: Collection[str]) -> None:
        """Drop the states and parked rows of tables not in ``live`` (relative paths): rows
        parked for a subscription that was deleted (or got a new generation) have no table to go
        to any more; the subscription's messages went with it."""
        for rel in [t for t in self.tables if t not in live]:
            state = self.tables.pop(rel)
            self._faults.forget(rel)
            try:
                self.parked.remove(rel)
            except OSError as exc:
                log.warning("could not remove the parked rows of %s: %s", rel, exc)
            log.info("%s is no longer routed (its subscription was deleted): %d parked rows dropped", rel, state.parked_rows)


def error_text(exc: BaseException) -> str:
    """One line naming a failed commit's error (for the statistics file and /health)."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:500]
