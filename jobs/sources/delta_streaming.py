"""The fan-out over Delta Lake's own streaming source (``[fanout] source = "delta"``).

``spark.readStream.format("delta")`` reads one table per stream, and a streaming query cannot
gain sources once it has a checkpoint, so this runs **one streaming query per topic table** (each
partition of a topic is one: sharedsub.core.layout), each with
its own checkpoint ``<checkpoint>/<topic table id>`` (default checkpoint:
``<data>/_checkpoints/fanout-delta``), all feeding the one :class:`jobs.fanout_sink.FanoutSink`,
which takes their micro-batches one at a time (its lock). A watcher thread starts the query of
a topic created while the job runs and stops the query of a dropped topic; a topic created again
under the same name is a new table with a new id, so its query starts from its beginning.

Each stream is ``format("delta").option("skipChangeCommits", "true")`` with
``maxFilesPerTrigger`` = ``[fanout] max_commits_per_batch`` (a topic commit adds one file): it
reads the table's snapshot when it has no checkpoint (routing filters by each subscription's
``start_seq``, as with the delta-rs source), then the files of each new commit. Compaction
(``dataChange=false``) is not read again; the commits of topic retention, which only remove
routed files, are skipped. Exactly once per subscription table holds as with the delta-rs source:
the sink's app-transaction check drops rows a table already has, whatever the queries replay.

:class:`DeltaTopicQueries` looks like the one ``StreamingQuery`` of the delta-rs path to
``jobs.fanout.main`` and the tests: ``lastProgress`` (in the delta-rs source's offset form, so
the statistics file's ``routed_versions`` and ``sharedsub_fanout_lag_seconds`` keep working),
``isActive``, ``stop()``, ``awaitTermination()``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from jobs.s3a_settings import spark_path
from sharedsub.core import layout
from sharedsub.storage import schemas
from sharedsub.storage.delta import commit_log, table_reads
from sharedsub.storage.topics import list_topic_partitions

log = logging.getLogger("sharedsub.fanout")

CHECKPOINT_SUFFIX = "-delta"
# Seconds between two looks for created and dropped topics (the watcher thread).
TOPIC_WATCH_INTERVAL = 1.0


def checkpoint_base(root: str) -> str:
    """Default checkpoint directory of the per-topic queries."""
    return layout.fanout_checkpoint(root) + CHECKPOINT_SUFFIX


def topic_stream(spark: SparkSession, root: str, feed: str, max_files: int) -> DataFrame:
    """One topic table's streaming DataFrame in the fan-out source's shape: ``topic``, then
    ``schemas.ROUTING_COLUMNS``. ``feed``: the table's directory name under ``topics/`` (a
    topic's name, or ``<topic>~p<k>`` for its partition k: sharedsub.core.layout)."""
    source = (
        spark.readStream.format("delta")
        .option("skipChangeCommits", "true")
        .option("maxFilesPerTrigger", str(max_files))
        .load(spark_path(_feed_table(root, feed)))
    )
    parsed = layout.parse_topic_dir(feed)
    topic = parsed[0] if parsed is not None else feed
    return source.select(F.lit(topic).alias("topic"), *[F.col(c) for c in schemas.ROUTING_COLUMNS])


def _feed_table(root: str, feed: str) -> str:
    return layout.join(root, layout.TOPICS_DIR, feed)


def list_feeds(root: str) -> list[str]:
    """Every topic table under ``root`` by its directory name (each partition of each topic)."""
    return [layout.topic_partition_dir(t, p) for t, parts in list_topic_partitions(root).items() for p in parts]


# Any: a Delta source's endOffset from Spark's progress report: JSON text, or already decoded (read by key)
def routed_version(end_offset: Any, snapshot_files: Callable[[int], int] | None = None) -> int | None:
    """The last topic version a Delta source end offset has read completely (-1: none yet;
    None: not a Delta source offset).

    The offset ``{reservoirVersion: v, index: i, isStartingVersion: s}`` means: every version
    below v is read, and of v the files up to index i (``i = -1``: none). When ``s`` is true, v
    is the snapshot a new stream started from, read file by file: it is read completely once
    ``i`` is its last file, which ``snapshot_files(v)`` (the snapshot's file count) tells.
    """
    try:
        offset = json.loads(end_offset) if isinstance(end_offset, str) else end_offset
        version, index = int(offset["reservoirVersion"]), int(offset.get("index", -1))
        starting = bool(offset.get("isStartingVersion", False))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if starting and index >= 0 and snapshot_files is not None and index + 1 >= snapshot_files(version):
        return version
    return max(-1, version - 1)


class DeltaTopicQueries:
    """One Delta streaming query per topic of ``root``, all into ``sink`` (see the module doc)."""

    def __init__(
        self,
        spark: SparkSession,
        root: str,
        sink: Callable[[DataFrame, int], None],
        *,
        checkpoint: str,
        max_files: int,
        available_now: bool,
        trigger_interval: float,
    ) -> None:
        self.spark = spark
        self.root = root
        self.sink = sink
        self.checkpoint = checkpoint
        self.max_files = max_files
        self.available_now = available_now
        self.trigger_interval = trigger_interval
        self._queries: dict[str, tuple[str, StreamingQuery]] = {}  # topic -> (table id, query)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._failed: BaseException | None = None
        self._watcher: threading.Thread | None = None
        self._snapshot_sizes: dict[tuple[str, int], int] = {}

    def start(self) -> DeltaTopicQueries:
        """Start a query for every topic there is; in continuous mode also the topic watcher."""
        self._sync_topics()
        if not self.available_now:
            self._watcher = threading.Thread(target=self._watch, name="fanout-delta-topics", daemon=True)
            self._watcher.start()
        return self

    def _start_query(self, topic: str, table_id: str) -> StreamingQuery:
        writer = (
            topic_stream(self.spark, self.root, topic, self.max_files)
            .writeStream.foreachBatch(self.sink)
            .queryName(f"sharedsub-fanout-{topic}")
            .option("checkpointLocation", layout.join(self.checkpoint, table_id))
        )
        if self.available_now:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{self.trigger_interval} seconds")
        log.info("topic %s: Delta streaming query started (table %s)", topic, table_id)
        return writer.start()

    def _sync_topics(self) -> None:
        """Start queries for new topics (and topics created again); stop those of dropped ones."""
        present: dict[str, str] = {}
        for topic in list_feeds(self.root):  # (a "topic" here is one table: a partition of one)
            table_id = commit_log.table_id(_feed_table(self.root, topic))
            if table_id is not None:
                present[topic] = table_id
        with self._lock:
            if self._stopping.is_set():
                return
            for topic, (table_id, query) in list(self._queries.items()):
                if present.get(topic) != table_id:
                    log.info("topic %s was dropped: its Delta streaming query stops", topic)
                    query.stop()
                    del self._queries[topic]
            for topic, table_id in present.items():
                if topic not in self._queries:
                    self._queries[topic] = (table_id, self._start_query(topic, table_id))

    def _watch(self) -> None:
        while not self._stopping.wait(TOPIC_WATCH_INTERVAL):
            try:
                self._sync_topics()
            except Exception as exc:  # noqa: BLE001 (a query that cannot start: the job fails (and is restarted))
                log.error("starting the Delta streaming query of a new topic failed: %s", exc)
                self._failed = exc
                self.stop()
                return

    def _snapshot(self) -> list[tuple[str, str, StreamingQuery]]:
        with self._lock:
            return [(t, i, q) for t, (i, q) in self._queries.items()]

    def _snapshot_counter(self, topic: str, table_id: str) -> Callable[[int], int]:
        """``version -> files in the topic's snapshot at version`` (cached: a version never changes)."""

        def count(version: int) -> int:
            key = (table_id, version)
            if key not in self._snapshot_sizes:
                self._snapshot_sizes[key] = len(table_reads.snapshot_files(_feed_table(self.root, topic), version))
            return self._snapshot_sizes[key]

        return count

    @property
    def lastProgress(self) -> dict[str, Any] | None:  # Any: as jobs.fanout.FanoutQuery.lastProgress
        """(StreamingQuery's name.) A progress report in the delta-rs source's form, once every query has reported one
        (with no topic at all: at once): ``batchId`` is the sum of the queries' batch ids, the
        one source's ``endOffset`` has ``topics`` (version read through) and ``ids``."""
        topics: dict[str, int] = {}
        ids: dict[str, str] = {}
        batches = 0
        for topic, table_id, query in self._snapshot():
            progress = query.lastProgress
            if progress is None:
                return None
            files = self._snapshot_counter(topic, table_id)
            version = routed_version(progress["sources"][0]["endOffset"], files) if progress["sources"] else None
            if version is not None:
                topics[topic], ids[topic] = version, table_id
            batches += int(progress["batchId"])
        return {"batchId": batches, "sources": [{"endOffset": {"topics": topics, "ids": ids}}]}

    @property
    def isActive(self) -> bool:
        """Continuous: every query runs (one that failed ends the job). Available-now: any does."""
        if self._failed is not None:
            return False
        active = [q.isActive for _, _, q in self._snapshot()]
        if self.available_now:
            return any(active)
        return not self._stopping.is_set() and all(active)

    def stop(self) -> None:
        """Stop the watcher and every query."""
        with self._lock:
            self._stopping.set()
            queries = [q for _, q in self._queries.values()]
        for query in queries:
            if query.isActive:
                query.stop()

    def awaitTermination(self, timeout: float | None = None) -> bool | None:
        """Wait until every query ended (at most ``timeout`` seconds in all); raise the first
        failure. Returns whether all ended (None without a timeout, as StreamingQuery does)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for _, _, query in self._snapshot():
            if deadline is None:
                query.awaitTermination()
            # pyspark's stub says int; it takes float seconds
            elif not query.awaitTermination(max(0.0, deadline - time.monotonic())):  # type: ignore[arg-type]
                return False
        if self._failed is not None:
            raise self._failed
        return None if timeout is None else True
