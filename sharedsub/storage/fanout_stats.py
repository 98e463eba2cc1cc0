"""The fan-out job's batch statistics, shared with the metrics endpoint through one JSON file.

The job (jobs/batch_report.py) calls :meth:`StatsRecorder.record` after each micro-batch that routed
something, and :meth:`StatsRecorder.write_soon` or :meth:`StatsRecorder.write` when what it reports
changed between batches (the query's routed versions, failing subscription tables); a write
replaces ``<data>/_checkpoints/fanout-stats.json`` atomically (a temporary file in the same
directory, then ``os.replace``), so a reader sees the previous or the new document, never half of
one. Counters and routed versions are written at most every :data:`WRITE_INTERVAL` (the last
change always within it, by a trailing write); a change of the failing tables at once.
:func:`read_stats` is the reader (``sharedsub serve``/``frontend``'s ``/metrics`` and ``/health``).
Totals count from the start of the job process (a restarted job starts again at 0: Prometheus
sees a counter reset).

Document (all times are seconds since the epoch)::

    {"pid": 123, "started_at": t, "updated_at": t, "batches": 7, "messages": 1000,
     "routed": {"<subscription key>": {"topic": "orders", "rows": 990}},
     "last_batch": {"id": 41, "messages": 100, "routed_rows": 99, "tables": 3,
                    "seconds": 0.25, "finished_at": t},
     "routed_published_at": {"<topic>": t},
     "routed_versions": {"<topic>": 17},
     "failing": {"<subscription key>": {"topic": "orders", "table": "subscriptions/<key>/g1",
                 "since": t, "error": "...", "parked_rows": 12, "failures": 3, "retry_at": t}},
     "stages": {"fanout_batch": {"counts": [...], "sum": s}, ...}}

``routed`` counts rows committed to subscription tables (replayed rows a table already held are
not counted); ``routed_published_at`` is, per topic, the newest ``published_at`` of a message the
job has routed. ``routed_versions`` is, per topic, the last Delta version of the topic table the
query has finished routing (the end offset of its last completed micro-batch); the endpoint's
lag is the age of the topic's next commit (:func:`topic_lag`). ``failing`` lists the subscription
tables whose last commit failed, or whose rows are parked (sharedsub.core.fanout.fanout_faults): ``since``
is the first failure (for rows found parked when the job started: when they were parked),
``error`` the newest failure's text (None before a retry in this job process). Only local data
dirs (a path or ``file://``) get the file; elsewhere recording is a no-op.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

import pyarrow as pa
import pyarrow.compute as pc

from sharedsub.core import layout
from sharedsub.core.layout import local_path
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops.logthrottle import ThrottledLog
from sharedsub.core.ops.stage_timing import StageTimes
from sharedsub.storage.delta.tables import log_file

log = logging.getLogger(__name__)


def _local_file(root: str) -> str | None:
    return local_path(layout.fanout_stats_file(root))


@dataclasses.dataclass(frozen=True, slots=True)
class SourceSummary:
    """What the statistics keep of a micro-batch's source rows: how many, and the newest
    ``published_at`` per topic (epoch seconds), from the rows (:meth:`of`) or from the tasks that
    read them on executors (:meth:`merge`)."""

    messages: int = 0
    newest: dict[str, float] = dataclasses.field(default_factory=dict)
    oldest: float | None = None  # the oldest published_at of the batch (None: no rows)

    @classmethod
    def of(cls, source: pa.Table) -> SourceSummary:
        """The summary of source rows (the fan-out source's columns)."""
        oldest = None
        if source.num_rows and "published_at" in source.column_names:
            value = pc.min(source.column("published_at")).as_py()
            oldest = None if value is None else float(value.timestamp())
        return cls(source.num_rows, _newest_published(source), oldest)

    def merge(self, other: SourceSummary) -> SourceSummary:
        """Both summaries' rows as one."""
        newest = dict(self.newest)
        for topic, when in other.newest.items():
            newest[topic] = max(when, newest.get(topic, when))
        olds = [t for t in (self.oldest, other.oldest) if t is not None]
        return SourceSummary(self.messages + other.messages, newest, min(olds) if olds else None)


def _newest_published(source: pa.Table) -> dict[str, float]:
    """Newest ``published_at`` per topic of a batch's source rows, as epoch seconds.

    A max per topic, not a group-by: a batch holds one topic or a few, and Arrow's grouping
    engine cost ten times as much per batch (bench/RESULTS.md, issue 43, "the batch's callback
    and its statistics")."""
    if source.num_rows == 0 or "published_at" not in source.column_names:
        return {}
    topics = source.column("topic")
    published = source.column("published_at")
    names = [name for name in pc.unique(topics).to_pylist() if name is not None]
    out = {}
    for name in names:
        rows = published if len(names) == 1 and topics.null_count == 0 else pc.filter(published, pc.equal(topics, name))
        when = pc.max(rows).as_py()
        if when is not None:
            out[str(name)] = when.timestamp()
    return out


# Table paths the recorder remembers before it starts again (a job that saw this many subscription
# generations; each is read again from the plan when next written).
_TABLE_KEYS_LIMIT = 100_000


class RoutedEntry(TypedDict):
    """Rows routed to one subscription (the ``routed`` entries of the document)."""

    topic: str
    rows: int


# The least time between two writes of the file for counters and routed versions. Under load the
# job routes ~14 micro-batches a second; a write after each (the document's JSON, a temporary file,
# a rename) and an INFO line each (sharedsub.core.fanout.batch_summary) were ~18% of the job's
# Python CPU at 1k msg/s (bench/RESULTS.md, issue 43, "three cuts per micro-batch"). Readers are
# scrapes and health checks, seconds apart.
WRITE_INTERVAL = 0.5


@dataclasses.dataclass(slots=True)
class StatsRecorder:
    """Running totals of one job process, written to the file at most every ``write_interval``
    seconds (:meth:`write_soon`) or at once (:meth:`write`). Any thread: each method holds the
    recorder's lock; a trailing write runs on a daemon thread of its own, started on first use."""

    root: str
    started_at: float = dataclasses.field(default_factory=time.time)
    batches: int = 0
    messages: int = 0
    routed: dict[str, RoutedEntry] = dataclasses.field(default_factory=dict)
    routed_published_at: dict[str, float] = dataclasses.field(default_factory=dict)
    last_batch: dict[str, object] | None = None
    # Set by the job before it calls record/write (see the module docstring).
    routed_versions: dict[str, int] | None = None
    failing: dict[str, dict[str, object]] = dataclasses.field(default_factory=dict)
    # Time per stage of the job's part of the message path (sharedsub.core.ops.stage_timing), observed by
    # the batch thread; written as "stages" with the rest of the document.
    stages: StageTimes = dataclasses.field(default_factory=StageTimes)
    _faults: ThrottledLog = dataclasses.field(default_factory=lambda: ThrottledLog(log))
    # Subscription table path -> (subscription key, topic), of every table counted so far: a
    # batch looks up only the tables it wrote, instead of the path of every subscription of the
    # plan (~2 ms a batch with 1,000 subscriptions: bench/RESULTS.md, issue 43, "statistics").
    _table_keys: dict[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    write_interval: float = WRITE_INTERVAL
    _cond: threading.Condition = dataclasses.field(default_factory=threading.Condition)
    _written_at: float | None = None  # time.monotonic() of the last write
    _written_failing: dict[str, dict[str, object]] | None = None  # ``failing`` as last written
    _pending: bool = False  # a change waits for the trailing write
    _trailer: threading.Thread | None = None

    def record(
        self,
        batch_id: int,
        source: SourceSummary,
        written: Mapping[str, int],
        records: Iterable[SubscriptionRecord],
        seconds: float,
    ) -> None:
        """Add one batch: the summary of its ``source`` rows, ``written`` rows per subscription table
        path (what :meth:`jobs.fanout_sink.FanoutSink.write_routed` returns), the active ``records``
        it routed for, and its duration; then :meth:`write_soon`. Never raises (a failed write is
        logged when it starts failing and when it works again)."""
        try:
            with self._cond:
                self.batches += 1
                self.messages += source.messages
                self.count(written, records)
                for topic, when in source.newest.items():
                    self.routed_published_at[topic] = max(when, self.routed_published_at.get(topic, 0.0))
                self.last_batch = {
                    "id": batch_id,
                    "messages": source.messages,
                    "routed_rows": int(sum(written.values())),
                    "tables": len(written),
                    "seconds": seconds,
                    "finished_at": time.time(),
                }
        except Exception as exc:  # noqa: BLE001 (statistics are best effort; throttled log)
            self._faults.fault("write", "could not record the fan-out statistics", error=exc, level=logging.WARNING)
            return
        self.write_soon()

    def count(self, written: Mapping[str, int], records: Iterable[SubscriptionRecord]) -> None:
        """Add ``written`` rows per subscription table path to ``routed`` (no write). The tables
        are those of ``records`` (the plan's subscriptions), which are read only when a table
        was not seen before; a table no records ever named is not counted."""
        with self._cond:
            if any(table not in self._table_keys for table in written):
                if len(self._table_keys) > _TABLE_KEYS_LIMIT:
                    self._table_keys.clear()
                for rec in records:
                    self._table_keys.setdefault(layout.join(self.root, rec.table), (rec.key, rec.topic))
            for table, rows in written.items():
                known = self._table_keys.get(table)
                if known is None:
                    continue
                key, topic = known
                entry = self.routed.setdefault(key, {"topic": topic, "rows": 0})
                entry["rows"] += int(rows)

    def write(self) -> None:
        """Replace the file with the current document now. Never raises (a failed write is
        logged when it starts failing and when it works again)."""
        with self._cond:
            self._pending = False
            self._written_at = time.monotonic()
            self._written_failing = self.failing
            document: dict[str, object] = {
                "pid": os.getpid(),
                "started_at": self.started_at,
                "updated_at": time.time(),
                "batches": self.batches,
                "messages": self.messages,
                "routed": self.routed,
                "routed_published_at": self.routed_published_at,
                "failing": self.failing,
                "stages": self.stages.to_json(),
            }
            if self.last_batch is not None:
                document["last_batch"] = self.last_batch
            if self.routed_versions is not None:
                document["routed_versions"] = self.routed_versions
            try:
                # One write: json.dump writes piece by piece (3.2 against 0.9 ms at 1,000 subscriptions).
                self._write(json.dumps(document))
            except Exception as exc:  # noqa: BLE001 (statistics are best effort; throttled log)
                self._faults.fault("write", "could not write the fan-out statistics", error=exc, level=logging.WARNING)
            else:
                self._faults.clear("write", "the fan-out statistics are written again")

    def write_soon(self) -> None:
        """:meth:`write` now when nothing was written yet, when the failing tables changed since
        the last write (health turns at once), or when the last write is ``write_interval`` old;
        else leave it to the trailing write, ``write_interval`` after the last one. Never raises."""
        with self._cond:
            now = time.monotonic()
            if (
                self._written_at is not None
                and self.failing == self._written_failing
                and now - self._written_at < self.write_interval
            ):
                self._pending = True
                if self._trailer is None:
                    self._trailer = threading.Thread(target=self._trail, name="fanout-stats-writer", daemon=True)
                    self._trailer.start()
                self._cond.notify()
                return
            self.write()

    def flush(self) -> None:
        """Write what waits for the trailing write, now (the job's end). Never raises."""
        with self._cond:
            if self._pending:
                self.write()

    def _trail(self) -> None:
        """The trailing writer's loop: a pending change is written ``write_interval`` after the
        last write."""
        with self._cond:
            while True:
                if not self._pending:
                    self._cond.wait()
                    continue
                left = (self._written_at or 0.0) + self.write_interval - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                self.write()

    def _write(self, text: str) -> None:
        path = _local_file(self.root)
        if path is None:
            return
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".fanout-stats-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise


# Every /metrics scrape and /health request reads the file: an unreadable one is logged when that
# starts, at most every few minutes while it lasts, and when it reads again (HTTP threads: a lock).
_read_faults = ThrottledLog(log)
_read_lock = threading.Lock()


def read_stats(root: str) -> dict[str, Any] | None:  # Any: json.load's document, read by key
    """The last statistics document under ``root`` (None: none written yet, or unreadable; the
    latter is logged, see ``_read_faults``). Any thread."""
    path = _local_file(root)
    if path is None:
        return None
    try:
        with open(path) as fh:
            document = json.load(fh)
        if not isinstance(document, dict):
            raise ValueError(f"not a JSON object but {type(document).__name__}")
    except FileNotFoundError:
        return None  # the job has not written it yet
    except (OSError, ValueError) as exc:
        with _read_lock:
            _read_faults.fault(path, "cannot read the fan-out statistics %s", path, error=exc, level=logging.WARNING)
        return None
    with _read_lock:
        _read_faults.clear(path, "the fan-out statistics %s are readable again", path)
    return document


def topic_lag(root: str, topic: str, routed_version: int, now: float) -> float:
    """Seconds the oldest commit of ``topic`` the fan-out has not routed has waited: the age of
    commit ``routed_version + 1`` of the topic table (its log entry's modification time), or 0
    when there is no such commit (everything committed is routed). Local data dirs only (0
    elsewhere)."""
    if local_path(root) is None:
        return 0.0
    try:
        made = os.stat(log_file(layout.topic_table(root, topic), routed_version + 1)).st_mtime
    except OSError:
        return 0.0
    return max(0.0, now - made)
