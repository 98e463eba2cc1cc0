"""Spark streaming source over every topic table of a data dir (Python Data Source API, delta-rs).

``spark.readStream.format("sharedsub_topics").option("data_dir", D).load()`` yields one row per
published message of every topic under ``D``: a leading ``topic`` column, then
``schemas.ROUTING_COLUMNS`` (everything but the payload, which stays in the topic table).

Offsets are ``{"topics": {topic: last_version_included}}`` where a version is a Delta table
version of that topic and ``-1`` means "nothing read yet". Because a Delta commit is atomic
(put-if-absent of ``_delta_log/<v>.json``), a version number is a complete, stable cut of a topic,
so a micro-batch ``(start, end]`` is exactly the files added by the commits in between.

Contracts:

* A new query starts with every topic at ``-1``, i.e. reads each topic from its beginning (routing
  filters by each subscription's ``start_seq``). Topics created while the query runs are added at
  ``-1`` by the next ``latestOffset``.
* ``max_commits_per_batch`` caps how many commits of *each* topic one micro-batch takes, unless the
  engine asks for everything (``ReadAllAvailable``). ``first_batch_max_commits`` caps the first
  micro-batch planned by a reader instance (a fresh start or a restart) so the job reports itself
  running quickly; a brand-new query's first batch then covers only the topics' creation commits.
* ``Trigger.AvailableNow`` is supported: the target is fixed when the query starts, and the query
  stops once it is reached, in as many capped batches as needed (feasibility gotcha 3).
* Only data-changing ``add`` actions are read, so OPTIMIZE rewrites are not read twice.

Process model (feasibility gotcha 4): the reader's driver side (``latestOffset``, ``partitions``)
lives in one long-lived Python process, so it may cache; ``read`` runs in Python workers and is
stateless. Workers must run the venv's Python (``PYSPARK_PYTHON``) so this module imports.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from sharedsub.storage import delta, layout, schemas

SOURCE_NAME = "sharedsub_topics"

# The source's row: which topic, then the routing columns in the topic table's order.
ARROW_SCHEMA = pa.schema([pa.field("topic", pa.string()), *[schemas.TOPIC.field(c) for c in schemas.ROUTING_COLUMNS]])
SPARK_SCHEMA: StructType = from_arrow_schema(ARROW_SCHEMA)
# What Spark checks each returned batch against (exact equality, nullability included).
_SPARK_ARROW_SCHEMA = to_arrow_schema(SPARK_SCHEMA, timezone="UTC")

DEFAULT_MAX_COMMITS = 1000
DEFAULT_FIRST_BATCH_COMMITS = 1
# Files of one topic read by one Spark task; more files make more, parallel tasks.
DEFAULT_FILES_PER_PARTITION = 16
# Re-list the topics directory at most this often (seconds): listing stats every topic's log
# dir, and latestOffset runs every trigger (every ~10 ms with a 0 trigger interval).
DEFAULT_TOPIC_LIST_INTERVAL = 0.5

Offset = dict[str, Any]


def make_offset(versions: Mapping[str, int]) -> Offset:
    """The offset dict for ``{topic: last version included}``."""
    return {"topics": dict(sorted(versions.items()))}


def offset_versions(offset: Mapping[str, Any] | None) -> dict[str, int]:
    """``{topic: last version included}`` of an offset dict (empty for None)."""
    if not offset:
        return {}
    return {str(k): int(v) for k, v in offset.get("topics", {}).items()}


@dataclasses.dataclass(frozen=True)
class TopicFiles(InputPartition):
    """One Spark task: Parquet files added to one topic table, read in this order."""

    topic: str
    files: tuple[str, ...]


def _int_option(options: Mapping[str, str], name: str, default: int) -> int:
    raw = options.get(name)
    if raw is None or raw == "":
        return default
    value = int(raw)
    if value <= 0:
        raise ValueError(f"option {name!r} must be positive, got {raw!r}")
    return value


class TopicsStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Stream reader over all topic tables of one data dir; see the module docstring."""

    def __init__(self, options: Mapping[str, str]) -> None:
        root = options.get("data_dir")
        if not root:
            raise ValueError(f"format {SOURCE_NAME!r} needs option 'data_dir'")
        self.root: str = root
        self.max_commits = _int_option(options, "max_commits_per_batch", DEFAULT_MAX_COMMITS)
        self.first_batch_commits = min(
            self.max_commits, _int_option(options, "first_batch_max_commits", DEFAULT_FIRST_BATCH_COMMITS)
        )
        self.files_per_partition = _int_option(options, "files_per_partition", DEFAULT_FILES_PER_PARTITION)
        self.topic_list_interval = float(options.get("topic_list_interval", DEFAULT_TOPIC_LIST_INTERVAL))
        self._planned_once = False
        self._target: dict[str, int] | None = None  # Trigger.AvailableNow target
        self._latest_seen: dict[str, int] = {}  # newest version probed per topic (a cache)
        self._topics: list[str] = []
        self._listed_at = float("-inf")

    # ------------------------------------------------------------------ offsets (driver side)

    def initialOffset(self) -> Offset:
        """Every topic that exists now, at -1: a new query reads all topics from the start."""
        return make_offset({t: -1 for t in self._list_topics(force=True)})

    def getDefaultReadLimit(self) -> ReadLimit:
        """The per-topic commit cap, expressed as the closest built-in limit (files)."""
        return ReadMaxFiles(self.max_commits)

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the target: every topic's latest version now; nothing later is read."""
        self._target = {t: self._probe(t, -1) for t in self._list_topics(force=True)}

    def latestOffset(self, start: dict, limit: ReadLimit) -> Offset:
        """``start`` advanced per topic to its newest version, capped as the module doc says."""
        begin = offset_versions(start)
        if isinstance(limit, ReadAllAvailable):
            cap: int | None = None
        elif isinstance(limit, ReadMaxFiles):
            cap = max(1, limit.max_files)
        else:
            cap = self.max_commits
        if not self._planned_once:
            cap = self.first_batch_commits if cap is None else min(cap, self.first_batch_commits)
        topics = set(begin)
        topics.update(self._target if self._target is not None else self._list_topics())
        end: dict[str, int] = {}
        for topic in sorted(topics):
            known = begin.get(topic, -1)
            latest = self._probe(topic, known)
            if self._target is not None:
                latest = min(latest, self._target.get(topic, known))
            if cap is not None and latest > known + cap and self._has_log(topic, known + 1):
                # Only cap when the commits in between can be read one by one; when the log
                # was cleaned (a start from -1 on an old table) the batch reads a snapshot.
                latest = known + cap
            end[topic] = max(known, latest)
        if end != begin:
            self._planned_once = True
        return make_offset(end)

    def reportLatestOffset(self) -> Offset | None:
        """Newest versions probed so far (for the query's progress reports)."""
        return make_offset(self._latest_seen) if self._latest_seen else None

    # ------------------------------------------------------------------ planning (driver side)

    def partitions(self, start: dict, end: dict) -> Sequence[TopicFiles]:
        """Files added by each topic's commits in ``(start, end]``, a few files per partition.

        Raises:
            RuntimeError: a commit in the range is missing from the log although the batch does
                not start at the table's beginning (the checkpoint is older than the log
                retention; data would be skipped).
        """
        begin = offset_versions(start)
        parts: list[TopicFiles] = []
        for topic, last in sorted(offset_versions(end).items()):
            first = begin.get(topic, -1)
            if last <= first:
                continue
            files = self._added_files(topic, first, last)
            for i in range(0, len(files), self.files_per_partition):
                parts.append(TopicFiles(topic, tuple(files[i : i + self.files_per_partition])))
        return parts

    def _added_files(self, topic: str, first: int, last: int) -> list[str]:
        table = layout.topic_table(self.root, topic)
        if first < 0 and not self._has_log(topic, 0):
            # The table's early commits were cleaned from the log: everything up to ``last`` is
            # exactly the snapshot at ``last`` (topics are append-only).
            return delta.snapshot_files(table, last)
        files: list[str] = []
        for version in range(first + 1, last + 1):
            commit = delta.read_commit(table, version)
            if commit is None:
                raise RuntimeError(
                    f"topic {topic!r}: commit {version} is no longer in the Delta log of {table}; the "
                    "fan-out checkpoint is older than the topic's log retention. Restart the fan-out "
                    "with a new checkpoint (subscription tables are idempotent, nothing is routed twice)."
                )
            files.extend(commit.added)
        return files

    # ------------------------------------------------------------------ reading (workers)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Record batches of the partition's files, with the topic column, in the declared schema.

        Stateless: runs in a Python worker. Reads only the routing columns, never ``message``.
        """
        assert isinstance(partition, TopicFiles)
        for path in partition.files:
            data = delta.read_files([path], schemas.ROUTING_COLUMNS)
            if data is None or data.num_rows == 0:
                continue
            data = data.select(schemas.ROUTING_COLUMNS)
            data = data.add_column(0, "topic", pa.array([partition.topic] * data.num_rows, pa.string()))
            yield from data.cast(_SPARK_ARROW_SCHEMA).to_batches()

    # ------------------------------------------------------------------ helpers

    def _list_topics(self, *, force: bool = False) -> list[str]:
        now = time.monotonic()
        if force or now - self._listed_at >= self.topic_list_interval:
            self._topics = delta.list_topics(self.root)
            self._listed_at = now
        return self._topics

    def _probe(self, topic: str, known: int) -> int:
        """Newest committed version of ``topic`` (cheap: continues from what was seen before)."""
        seen = max(known, self._latest_seen.get(topic, -1))
        latest = delta.latest_version(layout.topic_table(self.root, topic), seen)
        self._latest_seen[topic] = latest
        return latest

    def _has_log(self, topic: str, version: int) -> bool:
        # A stat, not a parse: the commit file exists until log cleanup removes it.
        return os.path.exists(delta.log_file(layout.topic_table(self.root, topic), version))


class TopicsDataSource(DataSource):
    """``format("sharedsub_topics")``: options ``data_dir`` (required), ``max_commits_per_batch``,
    ``first_batch_max_commits``, ``files_per_partition``, ``topic_list_interval`` (seconds)."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        if not options.get("data_dir"):
            # Checked here so that load() fails, not the query's first trigger.
            raise ValueError(f"format {SOURCE_NAME!r} needs option 'data_dir' (the sharedsub data dir)")

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return SPARK_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return TopicsStreamReader(self.options)
