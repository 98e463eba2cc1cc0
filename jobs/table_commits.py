"""Commits to the subscription tables: routed rows under their partitions' marks, executor-written files.

:class:`TableCommits` keeps one :class:`~sharedsub.storage.delta.appender.DeltaAppender` per
subscription table the fan-out job writes (the job is its tables' single writer) and makes every
commit the sink (jobs/fanout_sink.py) asks for; what is committed when, and what happens when a
commit fails, is the sink's and jobs/parking.py's. Its contracts:

* **Exactly once.** A commit of rows leaves out the rows a table holds already and moves, in the
  same commit, each topic partition's app-transaction mark to its highest seq
  (sharedsub.core.fanout.partition_marks.rows_to_commit); a commit of the executors' data files
  does the same by file (sharedsub.storage.delta.file_commits). Committing the same rows again
  writes nothing.
* **Fencing.** Under a lease ``epoch`` (object storage) every commit carries it, and a table is
  fenced under it before this job's first commit to it: a commit that finds a higher epoch raises
  :class:`~sharedsub.storage.delta.appender.Fenced` (:class:`TaskFenced` from a Spark task).
* **Commits in tasks.** From ``task_commit_min_tables`` healthy tables on, an executor-routed
  batch's files are committed in Spark tasks, one per table
  (sharedsub.core.fanout.routing_place.commits_in_tasks, jobs/executor_routing.CommitTask); a table
  whose task failed goes back to the driver.
* Appenders of tables no longer routed are dropped (:meth:`forget`); :meth:`finish` lets their
  checkpoints being written end.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Container

import pyarrow as pa

from jobs.executor_routing import ExecutorRouter
from sharedsub.core import layout
from sharedsub.core.fanout.partition_marks import rows_to_commit
from sharedsub.core.fanout.routing_place import commits_in_tasks
from sharedsub.storage import schemas
from sharedsub.storage.delta.appender import DeltaAppender, VersionTaken
from sharedsub.storage.delta.data_files import DataFile
from sharedsub.storage.delta.file_commits import RACE_ATTEMPTS, commit_routed_files
from sharedsub.storage.delta.tables import table_exists

log = logging.getLogger("sharedsub.fanout")


class TaskFenced(Exception):
    """A commit task found a subscription table's log holding a higher fan-out epoch than this
    job's (as :class:`~sharedsub.storage.delta.appender.Fenced` on the driver): the batch fails."""


class TableCommits:
    """The fan-out job's commits to its subscription tables (module docstring). Commits to
    different tables may run on different threads; one table's, one at a time."""

    def __init__(
        self,
        root: str,
        *,
        epoch: int | None = None,
        router: ExecutorRouter | None = None,
        task_commit_min_tables: int = 0,
    ) -> None:
        """``epoch``: the job's lease epoch (None: no fencing); ``router`` and
        ``task_commit_min_tables``: for commits in Spark tasks (none without a router)."""
        self.root = root
        self.epoch = epoch
        self.router = router
        self.task_commit_min_tables = task_commit_min_tables
        self.tables_committed_in_tasks = 0  # over the job's life (logs, tests)
        self._appenders: dict[str, DeltaAppender] = {}

    def appender(self, table: str) -> DeltaAppender:
        """The appender of ``table`` (absolute path), made and fenced at its first use.

        Raises:
            Fenced: the table holds a higher epoch's fence: this job is superseded.
        """
        appender = self._appenders.get(table)
        if appender is None:
            appender = DeltaAppender(table, schemas.SUBSCRIPTION, epoch=self.epoch)
            if self.epoch is not None and table_exists(table):
                # A job of a lower epoch (stopped, then resumed) that commits after this finds
                # the fence and stops; one of a higher epoch makes this raise Fenced.
                appender.fence()
            self._appenders[table] = appender
        return appender

    def commit(self, table: str, rows: pa.Table) -> int:
        """Commit the rows ``table`` does not hold yet (by each topic partition's app-transaction
        mark, sharedsub.core.fanout.partition_marks) in one commit that moves those marks;
        return the rows committed."""
        appender = self.appender(table)
        for _ in range(RACE_ATTEMPTS):
            data, marks = rows_to_commit(rows, schemas.SPARK_APP_ID, appender.transaction_version)
            if data is None:
                return 0
            try:
                appender.append(data, app_transactions=marks)
            except VersionTaken:
                # Another writer (a Spark task of an earlier batch, on object storage) committed
                # these partitions' marks at the version this commit was to take: its marks are
                # learnt, decide again.
                continue
            return int(data.num_rows)
        raise VersionTaken(table)

    def commit_files(self, table: str, files: list[DataFile]) -> int:
        """Commit the executors' data files of ``table`` (in seq order) in one commit, leaving out
        rows the table holds already (sharedsub.storage.delta.file_commits); return the rows
        committed."""
        return commit_routed_files(self.appender(table), files, schemas.SPARK_APP_ID, schemas.SUBSCRIPTION).rows

    def commit_in_tasks(
        self, files: dict[str, list[DataFile]], failing: Container[str], batch_id: int
    ) -> tuple[dict[str, int], dict[str, list[DataFile]]]:
        """Commit the healthy tables of ``files`` (those not in ``failing``) in Spark tasks when
        there are enough of them (sharedsub.core.fanout.routing_place.commits_in_tasks); return
        the rows each task committed, and the files the driver still commits (failing tables,
        and tables whose task failed: the driver tries them and parks their rows if it must).

        Raises:
            TaskFenced: a task found a higher epoch's commit: this job is superseded.
        """
        healthy = {rel: f for rel, f in files.items() if rel not in failing}
        if self.router is None or not commits_in_tasks(len(healthy), min_tables=self.task_commit_min_tables):
            return {}, files
        appenders = {rel: self.appender(layout.join(self.root, rel)) for rel in healthy}  # fenced at first use
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

    def forget(self, live: Collection[str]) -> None:
        """Drop the appenders of tables not in ``live`` (absolute paths): each holds a loaded
        DeltaTable, and a deleted subscription's table gets no more commits."""
        for table in [t for t in self._appenders if t not in live]:
            del self._appenders[table]

    def finish(self) -> None:
        """Let the appenders' checkpoints being written end (a process that ends during one dies
        of SIGSEGV: DeltaAppender.finish)."""
        for appender in list(self._appenders.values()):
            appender.finish()
