"""Routing a micro-batch on Spark's executors (``[fanout] routing``: sharedsub.core.fanout.routing_place).

One Spark job per micro-batch routed this way. Each task reads its share of the batch's topic
files (routing columns only), routes the rows with the plan compiled from the catalog, writes each
subscription's routed rows as one Parquet file into that subscription's table
(sharedsub.storage.delta.data_files), and returns only the files' descriptions and a summary of
the rows it read. The driver groups the files by table and commits each table's files in one
Delta commit carrying the batch's app transaction (jobs/table_commits.py).

* **The catalog** goes to the executors once per catalog revision (a broadcast variable), and each
  Python worker compiles it once (sharedsub.core.fanout.routing.plan_for remembers the last few
  catalog states; Spark reuses Python workers between tasks).
* **The input** is either the batch's planned topic files (the driver planned them from the
  offsets Spark logged, jobs/sources/deltars_topics.DriverBatchReader: one task per group of a
  topic's consecutive files) or, when the driver does not plan batches, the DataFrame Spark
  passed to ``foreachBatch`` (the source's own tasks read the files; routing runs in the same
  tasks, without a shuffle).
* **Exactly once.** A task writes new files and changes no table: a failed, retried or
  speculative attempt, or a lost executor, leaves files no commit names (orphans, removed by
  vacuum), and Spark hands the driver exactly one attempt's descriptions per task. The commit
  checks the table's app transaction first (sharedsub.core.fanout.routing_place.plan_files), so a
  replayed batch commits nothing twice.
* **Seq order.** A topic table's files are split into tasks in commit order, so the files one
  subscription table gets from a batch hold disjoint, ascending seq ranges per topic partition
  (a task writes one file per table and partition), each file in seq order; the commit lists
  them by their first seq.
* **Where it shows.** Each task logs one line (the executor's stderr: its log in the Spark UI)
  naming the batch, the task and the tables it wrote; each job's description in the Spark UI says
  which batch it routes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.broadcast import Broadcast
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.routed_rows import by_route, route_rows, subscription_rows
from jobs.sources.deltars_topics import TopicFiles, read_topic_files
from sharedsub.core import layout
from sharedsub.core.fanout.partition_marks import by_partition
from sharedsub.core.fanout.routing import plan_for
from sharedsub.core.model import SubscriptionRecord
from sharedsub.storage import schemas
from sharedsub.storage.delta.appender import DeltaAppender, Fenced
from sharedsub.storage.delta.data_files import DataFile, write_data_file
from sharedsub.storage.delta.file_commits import commit_routed_files
from sharedsub.storage.fanout_stats import SourceSummary
from sharedsub.storage.objects.locations import register

log = logging.getLogger("sharedsub.fanout.executor")

# What a task returns: one row per file written ("file"), one per topic it read ("topic").
RESULT_SCHEMA = pa.schema(
    [
        pa.field("kind", pa.string(), nullable=False),
        pa.field("table", pa.string()),  # "file": the subscription table, relative to the data dir
        pa.field("name", pa.string()),  # "file": the file's name in the table; "topic": the topic
        pa.field("size", pa.int64()),
        pa.field("rows", pa.int64()),  # "file": rows written; "topic": rows read
        pa.field("min_seq", pa.int64()),
        pa.field("max_seq", pa.int64()),
        pa.field("stats", pa.string()),
        pa.field("modified_ms", pa.int64()),
        pa.field("oldest_ms", pa.int64()),  # "topic": oldest and newest published_at read
        pa.field("newest_ms", pa.int64()),
    ]
)
_RESULT_SPARK = from_arrow_schema(RESULT_SCHEMA)

# A planned part as a row of the DataFrame the routing job starts from.
PART_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("files", pa.list_(pa.string())),
        pa.field("table", pa.string()),
        pa.field("table_id", pa.string()),
    ]
)
_PART_SPARK = from_arrow_schema(PART_SCHEMA)

# Environment variables a worker takes from the driver when it has none of its own: how the
# store is reached (sharedsub.storage.objects reads them). On a cluster whose hosts have their
# own credentials (an instance role), those stay.
_STORE_VARIABLES = ("AWS_",)


@dataclasses.dataclass(frozen=True)
class WorkerSetup:
    """What a task needs before it touches the store: the data dir, its ``[storage] options``,
    and the driver's store variables (shipped with each task; never logged)."""

    root: str
    options: Mapping[str, str]
    environ: Mapping[str, str]


def worker_setup(root: str, options: Mapping[str, str] | None, environ: Mapping[str, str]) -> WorkerSetup:
    """The setup for a data dir ``root`` from the driver's ``[storage] options`` and environment."""
    shipped = {k: v for k, v in environ.items() if k.startswith(_STORE_VARIABLES)}
    return WorkerSetup(root, dict(options or {}), shipped)


_prepared: set[tuple[str, tuple[tuple[str, str], ...]]] = set()


def _prepare(setup: WorkerSetup) -> None:
    """Make this Python worker reach the store as the driver does (once per worker and setup)."""
    key = (setup.root, tuple(sorted(setup.options.items())))
    if key in _prepared:
        return
    for name, value in setup.environ.items():
        os.environ.setdefault(name, value)
    register(setup.root, setup.options)
    if not logging.getLogger().handlers:  # a worker has none: its lines go to the executor's stderr
        logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _prepared.add(key)


@dataclasses.dataclass(frozen=True)
class RouteTask:
    """The ``mapInArrow`` function of a routing job (pickled to the executors).

    Input batches are topic rows (Spark's source DataFrame) or, with ``planned``, rows of
    :data:`PART_SCHEMA` naming the files to read. Yields one batch of :data:`RESULT_SCHEMA`.
    """

    setup: WorkerSetup
    catalog: Broadcast[tuple[SubscriptionRecord, ...]]
    batch_id: int
    routed_at: dt.datetime
    planned: bool

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Route and write this task's rows; yield what was written and read."""
        started = time.monotonic()
        _prepare(self.setup)
        plan = plan_for(self.catalog.value)
        # One routing pass over all of the task's rows, as on the driver: each pass costs a few
        # kernels per route however few rows it has, and a task's files are often small commits.
        sources = [t for t in self._sources(batches) if t.num_rows]
        per_topic: dict[str, tuple[int, int | None, int | None]] = {}
        routed: dict[int, pa.Table] = {}
        if sources:
            source = pa.concat_tables(sources)
            _count_topics(per_topic, source)
            routed = dict(by_route(route_rows(plan, source)))
        results: list[dict[str, object]] = []
        tables: list[str] = []
        for index in sorted(routed):
            record = plan.routes[index].record
            table = layout.join(self.setup.root, record.table)
            # One file per topic partition: each partition has its own exactly-once mark, and a
            # file's seq range must lie in one (sharedsub.core.fanout.partition_marks).
            for _, rows in by_partition(routed[index]):  # in seq order (by_route)
                written = write_data_file(table, subscription_rows(rows, self.routed_at, self.batch_id))
                results.append(_file_result(record.table, written))
                tables.append(f"{record.table} ({written.rows} rows)")
        for topic, (count, oldest, newest) in sorted(per_topic.items()):
            results.append({"kind": "topic", "name": topic, "rows": count, "oldest_ms": oldest, "newest_ms": newest})
        log.info(
            "fan-out batch %d, %s: read %d messages, wrote %d files in %.0f ms%s%s",
            self.batch_id,
            _task_name(),
            sum(count for count, _, _ in per_topic.values()),
            len(tables),
            (time.monotonic() - started) * 1000,
            ": " if tables else "",
            ", ".join(tables),
        )
        yield pa.RecordBatch.from_pylist(results, schema=RESULT_SCHEMA)

    def _sources(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.Table]:
        """This task's topic rows: the batches themselves, or read from the parts they name."""
        for batch in batches:
            if not self.planned:
                yield pa.Table.from_batches([batch])
                continue
            for part in batch.to_pylist():
                planned = TopicFiles(part["topic"], tuple(part["files"]), part["table"] or "", part["table_id"])
                for read in read_topic_files(planned):
                    yield pa.Table.from_batches([read])


def _count_topics(per_topic: dict[str, tuple[int, int | None, int | None]], source: pa.Table) -> None:
    """Add ``source``'s rows to the per-topic count and published_at range (ms)."""
    grouped = (
        source.select(["topic", "published_at"])
        .group_by("topic")
        .aggregate([([], "count_all"), ("published_at", "min"), ("published_at", "max")])
    )
    for row in grouped.to_pylist():
        topic = str(row["topic"])
        count, oldest, newest = per_topic.get(topic, (0, None, None))
        low, high = row["published_at_min"], row["published_at_max"]
        low_ms = None if low is None else int(low.timestamp() * 1000)
        high_ms = None if high is None else int(high.timestamp() * 1000)
        per_topic[topic] = (
            count + int(row["count_all"]),
            low_ms if oldest is None else (oldest if low_ms is None else min(oldest, low_ms)),
            high_ms if newest is None else (newest if high_ms is None else max(newest, high_ms)),
        )


def _file_result(table: str, f: DataFile) -> dict[str, object]:
    return {
        "kind": "file",
        "table": table,
        "name": f.name,
        "size": f.size,
        "rows": f.rows,
        "min_seq": f.min_seq,
        "max_seq": f.max_seq,
        "stats": f.stats,
        "modified_ms": f.modified_ms,
    }


def _task_name() -> str:
    """``stage S, task P (attempt A)`` of the running task ('' outside one)."""
    ctx = TaskContext.get()
    if ctx is None:
        return "outside a task"
    return f"stage {ctx.stageId()}, task {ctx.partitionId()} (attempt {ctx.attemptNumber()})"


_DATA_FILE_FIELDS = [f.name for f in dataclasses.fields(DataFile)]
# A table to commit in a task: its files (as RESULT_SCHEMA's file rows) and the driver's word on
# its log (the version up to which no higher fan-out epoch is there; -1: none given).
COMMIT_SCHEMA = pa.schema(
    [
        pa.field("table", pa.string()),
        pa.field(
            "files", pa.list_(pa.struct([f for f in RESULT_SCHEMA if f.name not in ("kind", "table", "oldest_ms", "newest_ms")]))
        ),
        pa.field("checked", pa.int64()),
    ]
)
_COMMIT_SPARK = from_arrow_schema(COMMIT_SCHEMA)
# What a commit task returns per table: "committed" (rows, version), "fenced" or "failed" (error).
COMMITTED_SCHEMA = pa.schema(
    [
        pa.field("table", pa.string()),
        pa.field("status", pa.string()),
        pa.field("rows", pa.int64()),
        pa.field("version", pa.int64()),
        pa.field("error", pa.string()),
    ]
)
_COMMITTED_SPARK = from_arrow_schema(COMMITTED_SCHEMA)


@dataclasses.dataclass(frozen=True)
class CommitTask:
    """The ``mapInArrow`` function that commits subscription tables in the tasks (one task per
    table and batch; sharedsub.core.fanout.routing_place.commits_in_tasks): each table's files
    with its app transaction, by a guarded appender (a retried or speculative attempt that
    races another re-reads the app transaction: sharedsub.storage.delta.file_commits) under the
    job's epoch, checking the log for a higher one from where the driver checked it."""

    setup: WorkerSetup
    epoch: int | None
    batch_id: int

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Commit this task's tables; yield one COMMITTED_SCHEMA row per table."""
        started = time.monotonic()
        _prepare(self.setup)
        out: list[dict[str, object]] = []
        for batch in batches:
            for item in batch.to_pylist():
                out.append(self._commit(item))
        log.info(
            "fan-out batch %d, %s: committed %d subscription tables in %.0f ms%s",
            self.batch_id,
            _task_name(),
            sum(1 for r in out if r["status"] == "committed"),
            (time.monotonic() - started) * 1000,
            "".join(f"; {r['table']}: {r['status']} {r['error']}" for r in out if r["status"] != "committed"),
        )
        yield pa.RecordBatch.from_pylist(out, schema=COMMITTED_SCHEMA)

    def _commit(self, item: dict[str, Any]) -> dict[str, object]:  # Any: a COMMIT_SCHEMA row
        rel = str(item["table"])
        appender = DeltaAppender(layout.join(self.setup.root, rel), schemas.SUBSCRIPTION, epoch=self.epoch, guarded=True)
        if item["checked"] is not None and item["checked"] >= 0:
            appender.assume_checked(int(item["checked"]))
        files = [DataFile(**f) for f in item["files"]]
        try:
            done = commit_routed_files(appender, files, schemas.SPARK_APP_ID, schemas.SUBSCRIPTION)
        except Fenced as exc:
            return {"table": rel, "status": "fenced", "error": str(exc)}
        except Exception as exc:  # noqa: BLE001 (the driver commits this table itself, and parks its rows if it must)
            return {"table": rel, "status": "failed", "error": f"{type(exc).__name__}: {exc}"[:500]}
        return {"table": rel, "status": "committed", "rows": done.rows, "version": done.version}


@dataclasses.dataclass(frozen=True)
class TaskCommit:
    """What a commit task did with one table."""

    status: str  # "committed", "fenced" or "failed"
    rows: int = 0
    version: int | None = None
    error: str | None = None


@dataclasses.dataclass(frozen=True)
class ExecutorBatch:
    """What the executors did with one micro-batch: the files per subscription table (relative
    path; in commit order) and the summary of the rows they read."""

    files: dict[str, list[DataFile]]
    source: SourceSummary


def collect_results(results: pa.Table) -> ExecutorBatch:
    """Group the tasks' results (rows of :data:`RESULT_SCHEMA`) by table, files by first seq."""
    files: dict[str, list[DataFile]] = {}
    source = SourceSummary()
    for row in results.to_pylist():
        if row["kind"] == "file":
            files.setdefault(row["table"], []).append(
                DataFile(row["name"], row["size"], row["rows"], row["min_seq"], row["max_seq"], row["stats"], row["modified_ms"])
            )
        else:
            oldest = None if row["oldest_ms"] is None else row["oldest_ms"] / 1000
            newest = {} if row["newest_ms"] is None else {row["name"]: row["newest_ms"] / 1000}
            source = source.merge(SourceSummary(int(row["rows"]), newest, oldest))
    for table_files in files.values():
        table_files.sort(key=lambda f: f.min_seq)
    return ExecutorBatch(files, source)


def task_groups(parts: Sequence[TopicFiles], tasks: int) -> list[TopicFiles]:
    """``parts`` merged into about ``tasks`` tasks: consecutive parts of one topic are joined
    while a task holds fewer than its share of the batch's files (never two topics in one)."""
    total = sum(len(p.files) for p in parts)
    share = max(1, -(-total // max(1, tasks)))
    groups: list[TopicFiles] = []
    for part in parts:
        last = groups[-1] if groups else None
        joins = last is not None and (last.topic, last.table_id) == (part.topic, part.table_id)
        if last is not None and joins and len(last.files) + len(part.files) <= share:
            rows = None if last.rows is None or part.rows is None else last.rows + part.rows
            groups[-1] = TopicFiles(part.topic, last.files + part.files, part.table, part.table_id, rows)
        else:
            groups.append(part)
    return groups


def executor_count(spark: SparkSession) -> int:
    """The cluster's executors now registered (0 for a local master, whose tasks run in the driver)."""
    sc = spark.sparkContext
    master = sc.master or ""
    if master == "local" or master.startswith("local["):
        return 0
    status = sc._jsc.sc().getExecutorMemoryStatus()  # noqa: SLF001 (pyspark 4.2: no public count of executors)
    return max(0, int(status.size()) - 1)  # the driver's block manager is listed too


class ExecutorRouter:
    """The driver's side of executor routing for one fan-out query: ships the catalog, runs the
    routing job of a batch, collects what the tasks wrote."""

    def __init__(self, spark: SparkSession, setup: WorkerSetup) -> None:
        self.spark = spark
        self.setup = setup
        self._catalog: tuple[tuple[SubscriptionRecord, ...], Broadcast[tuple[SubscriptionRecord, ...]]] | None = None

    def executors(self) -> int:
        """Executors registered now (0 for a local master)."""
        return executor_count(self.spark)

    def _broadcast(self, records: tuple[SubscriptionRecord, ...]) -> Broadcast[tuple[SubscriptionRecord, ...]]:
        """The catalog as a broadcast variable, a new one only when the catalog changed."""
        if self._catalog is None or self._catalog[0] != records:
            if self._catalog is not None:
                self._catalog[1].unpersist()
            self._catalog = (records, self.spark.sparkContext.broadcast(records))
        return self._catalog[1]

    def route_parts(
        self, parts: Sequence[TopicFiles], records: tuple[SubscriptionRecord, ...], batch_id: int, routed_at: dt.datetime
    ) -> ExecutorBatch:
        """Route the planned ``parts`` of micro-batch ``batch_id`` on the executors."""
        if not parts:
            return ExecutorBatch({}, SourceSummary())
        cores = max(1, self.spark.sparkContext.defaultParallelism)
        groups = task_groups(parts, cores * 2)  # two tasks per core: a slow task does not hold the batch
        rows = [{"topic": g.topic, "files": list(g.files), "table": g.table, "table_id": g.table_id} for g in groups]
        frame = self.spark.createDataFrame(self.spark.sparkContext.parallelize(rows, len(rows)), _PART_SPARK)
        task = RouteTask(self.setup, self._broadcast(records), batch_id, routed_at, planned=True)
        return self._run(frame, task, f"{len(groups)} tasks over {sum(len(g.files) for g in groups)} topic files")

    def route_frame(
        self, frame: DataFrame, records: tuple[SubscriptionRecord, ...], batch_id: int, routed_at: dt.datetime
    ) -> ExecutorBatch:
        """Route micro-batch ``batch_id``'s source DataFrame on the executors (its own tasks read it)."""
        task = RouteTask(self.setup, self._broadcast(records), batch_id, routed_at, planned=False)
        return self._run(frame, task, "the source's tasks")

    def commit_tables(
        self, files: Mapping[str, list[DataFile]], checked: Mapping[str, int | None], epoch: int | None, batch_id: int
    ) -> dict[str, TaskCommit]:
        """Commit each table's ``files`` in a task of its own (one writing task per table and
        batch); ``checked``: per table, the version up to which the driver found no higher epoch."""
        if not files:
            return {}
        rows = [
            {"table": rel, "files": [dataclasses.asdict(f) for f in table_files], "checked": checked.get(rel)}
            for rel, table_files in files.items()
        ]
        sc = self.spark.sparkContext
        slices = min(len(rows), max(1, sc.defaultParallelism) * 2)
        frame = self.spark.createDataFrame(sc.parallelize(rows, slices), _COMMIT_SPARK)
        sc.setJobDescription(f"sharedsub fan-out batch {batch_id}: commit {len(rows)} subscription tables in tasks")
        try:
            done = frame.mapInArrow(CommitTask(self.setup, epoch, batch_id), _COMMITTED_SPARK).toArrow()
        finally:
            sc.setJobDescription(None)  # type: ignore[arg-type]  # pyspark: None clears it
        return {
            row["table"]: TaskCommit(row["status"], row["rows"] or 0, row["version"], row["error"]) for row in done.to_pylist()
        }

    def _run(self, frame: DataFrame, task: RouteTask, what: str) -> ExecutorBatch:
        sc = self.spark.sparkContext
        sc.setJobDescription(f"sharedsub fan-out batch {task.batch_id}: read, route and write subscription files ({what})")
        try:
            results = frame.mapInArrow(task, _RESULT_SPARK).toArrow()
        finally:
            sc.setJobDescription(None)  # type: ignore[arg-type]  # pyspark: None clears it
        return collect_results(results)
