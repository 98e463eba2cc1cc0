"""Spark streaming source over every topic table of a data dir (Python Data Source API, delta-rs).

``spark.readStream.format("sharedsub_topics").option("data_dir", D).load()`` yields one row per
published message of every topic under ``D``: a leading ``topic`` column, then
``schemas.ROUTING_COLUMNS`` (everything but the payload, which stays in the topic table).

Offsets are ``{"topics": {feed: last_version_included}, "ids": {feed: table_id}}`` where a
feed is one table of a topic, named as its directory under ``topics/``: the topic's name for its
partition 0 (so offsets written before partitions existed keep their meaning) and
``<topic>~p<k>`` for partition k (sharedsub.core.layout, "Partitions"); below, "topic" in the
offset rules means a feed. Rows carry the topic's name, whichever partition they come from. A
version is a Delta table version of that feed, ``-1`` means "nothing read yet", and the id is the
Delta ``metaData.id`` of the table those versions belong to. Because a Delta commit is atomic
(put-if-absent of ``_delta_log/<v>.json``), a version number is a complete, stable cut of a topic,
so a micro-batch ``(start, end]`` is exactly the files added by the commits in between.

Table identity (``sharedsub topics drop`` then a topic created again under the same name): the new
table restarts at version 0, so versions alone would skip its first commits. A topic whose table
id differs from the offset's is read from ``-1`` (everything), in ``latestOffset`` and in
``partitions`` alike (see :func:`continue_from`). So is a table whose latest version is below the
offset's (versions only grow), which also catches it for offsets without ids. An offset without
``ids`` (written before ids existed) means "the same table" otherwise. A topic dropped and not
created again keeps its offset entry (version and id) unchanged: nothing is read for it and the
query does not fail; if it is created again, the id differs and the new table is read from -1.
A batch planned on a table that was dropped before it was read reads nothing of it.

Contracts:

* A new query starts with every topic at ``-1``, i.e. reads each topic from its beginning (routing
  filters by each subscription's ``start_seq``). Topics created while the query runs are added at
  ``-1`` by the next ``latestOffset``.
* ``max_commits_per_batch`` caps how many commits of *each* topic one micro-batch takes, unless the
  engine asks for everything (``ReadAllAvailable``). ``first_batch_max_commits`` caps the first
  micro-batch planned by a reader instance (a fresh start or a restart) so the job reports itself
  running quickly; a brand-new query's first batch then covers only the topics' creation commits.
* ``Trigger.AvailableNow`` is supported: the target is fixed when the query starts, and the query
  stops once it is reached, in as many capped batches as needed (docs/feasibility.md gotcha 3).
* A topic with no active subscription in the catalog has its offset moved forward at most every
  ``unsubscribed_topic_interval`` seconds (``0``: with every commit); a commit of such a topic
  alone starts no micro-batch. Not under ``Trigger.AvailableNow``, whose target is reached in
  full. The rule and why it loses nothing: :mod:`sharedsub.core.fanout.fanout_pacing`.
* With ``hold`` (seconds, > 0: on a local data dir under a trigger of 0) each ``latestOffset``
  call is held until the commits waiting may start a batch (admitted, and ``batch_interval``
  seconds since the last batch began), woken by the front ends' commit signal, for at most
  ``hold`` seconds: batches start at commits rather than on a trigger grid; a batch that waited
  for the interval waits up to ``align`` seconds more for the next commit
  (:mod:`sharedsub.core.fanout.batch_hold`). Not under ``Trigger.AvailableNow``.
* With ``idle_hold`` (seconds, > 0: on a local data dir) an ask that finds nothing, once nothing
  was found for a while, is held up to ``idle_hold`` seconds (at least ``hold``) and probes
  again at each commit signal (:mod:`sharedsub.core.fanout.idle_hold`). Not under
  ``Trigger.AvailableNow``.
* With ``change_notes`` (``true`` on object storage) a topic table is probed only while the
  writers' change notes say it may have news, and every one at a sweep (at start, when a writer
  starts again, a new note appears, and every ``change_sweep_interval`` seconds, default 3600);
  a quiet table keeps its offset entry as it is. Why nothing is missed:
  :mod:`sharedsub.core.fanout.change_notes`. Not under ``Trigger.AvailableNow``.
* Only data-changing ``add`` actions are read, so OPTIMIZE rewrites are not read twice.
* Reading a topic again from -1 never duplicates routed rows: the fan-out drops rows at or below
  each subscription table's app-transaction version, and the subscriptions of a dropped topic are
  deleted with it (a re-created topic gets new subscriptions, with new generation tables).

Process model (docs/feasibility.md gotcha 4): the reader's driver side (``latestOffset``, ``partitions``)
lives in one long-lived Python process, so it may cache; ``read`` runs in Python workers and is
stateless. Workers must run the venv's Python (``PYSPARK_PYTHON``) so this module imports.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
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

from sharedsub.core import layout
from sharedsub.core.fanout.batch_admission import admitted_in
from sharedsub.core.fanout.batch_hold import Pace, next_step
from sharedsub.core.fanout.change_notes import NOTE_LIST_INTERVAL, SWEEP_INTERVAL, ChangeWatch
from sharedsub.core.fanout.fanout_pacing import takes_commits
from sharedsub.core.fanout.idle_hold import idle_wait
from sharedsub.core.ops.poll_backoff import next_interval
from sharedsub.runtime.commit_wake import CommitListener
from sharedsub.storage import schemas
from sharedsub.storage.catalog import CatalogReader
from sharedsub.storage.change_notes import list_notes, note_location, read_notes
from sharedsub.storage.delta import commit_log
from sharedsub.storage.delta.table_reads import read_files, snapshot_files
from sharedsub.storage.delta.tables import log_file, object_exists, table_exists
from sharedsub.storage.objects import prefetch
from sharedsub.storage.retention import read_batch_offset
from sharedsub.storage.topics import list_topic_partitions

SOURCE_NAME = "sharedsub_topics"

# The source's row: which topic, then the routing columns in the topic table's order.
ARROW_SCHEMA = pa.schema([pa.field("topic", pa.string()), *[schemas.TOPIC.field(c) for c in schemas.ROUTING_COLUMNS]])
SPARK_SCHEMA: StructType = from_arrow_schema(ARROW_SCHEMA)
# The topic alone: the schema a query gives that never reads the rows through Spark (jobs/fanout.py).
TOPIC_ONLY: StructType = StructType([SPARK_SCHEMA["topic"]])
# What Spark checks each returned batch against (exact equality, nullability included).
_SPARK_ARROW_SCHEMA = to_arrow_schema(SPARK_SCHEMA, timezone="UTC")

DEFAULT_MAX_COMMITS = 1000
DEFAULT_FIRST_BATCH_COMMITS = 1
# Files of one topic read by one Spark task; more files make more, parallel tasks.
DEFAULT_FILES_PER_PARTITION = 16
# Re-list the topics directory at most this often (seconds): listing stats every topic's log
# dir, and latestOffset runs every trigger (every ~10 ms with a 0 trigger interval).
DEFAULT_TOPIC_LIST_INTERVAL = 0.5
# A topic without subscriptions has its offset moved forward at most this often (seconds; 0 =
# with every commit): each micro-batch costs Spark work whatever it routes
# (sharedsub.core.fanout.fanout_pacing).
DEFAULT_UNSUBSCRIBED_TOPIC_INTERVAL = 5.0
# With batch_max_wait: a micro-batch starts at once when this many rows wait.
DEFAULT_BATCH_MIN_ROWS = 50

log = logging.getLogger("sharedsub.fanout.source")

Offset = dict[str, object]
"""A source offset as :func:`make_offset` builds it (Spark's DataSourceStreamReader takes a ``dict``)."""


def make_offset(versions: Mapping[str, int], ids: Mapping[str, str | None] | None = None) -> Offset:
    """The offset dict for ``{topic: last version included}`` and ``{topic: table id}``.

    ``ids`` entries that are None or name no topic of ``versions`` are left out; without any id
    the offset has no ``ids`` key (the format written before ids existed).
    """
    offset: Offset = {"topics": dict(sorted(versions.items()))}
    known = {t: i for t, i in (ids or {}).items() if i is not None and t in versions}
    if known:
        offset["ids"] = dict(sorted(known.items()))
    return offset


# Any: an offset as Spark hands it back or the checkpoint holds it (JSON-decoded), read by key
def offset_versions(offset: Mapping[str, Any] | None) -> dict[str, int]:
    """``{topic: last version included}`` of an offset dict (empty for None)."""
    if not offset:
        return {}
    return {str(k): int(v) for k, v in offset.get("topics", {}).items()}


def offset_ids(offset: Mapping[str, Any] | None) -> dict[str, str]:  # Any: as offset_versions
    """``{topic: table id}`` of an offset dict (empty for None and for offsets without ids)."""
    if not offset:
        return {}
    return {str(k): str(v) for k, v in (offset.get("ids") or {}).items()}


def continue_from(version: int, offset_id: str | None, current_id: str | None, *, older: bool = False) -> int:
    """The version after which to read a topic whose offset entry is ``(version, offset_id)``.

    ``-1`` (everything) when the table now under the topic's name is not the one the entry
    counted: both ids are known and differ, or the table is ``older`` than ``version`` (its
    latest version is below it, and a table's versions only grow). Otherwise ``version``: an
    unknown id (an offset written before ids existed, or no table any more) means the same table.
    """
    if older:
        return -1
    if offset_id is not None and current_id is not None and offset_id != current_id:
        return -1
    return version


@dataclasses.dataclass(frozen=True)
class TopicFiles(InputPartition):
    """One Spark task: Parquet files added to one topic table, read in this order.

    ``table`` and ``table_id`` (the table the files were planned on; None when unknown) let a
    worker tell a dropped table's vanished files from a real loss.
    """

    topic: str
    files: tuple[str, ...]
    table: str = ""
    table_id: str | None = None
    rows: int | None = None  # rows of the files (their add statistics); None when unknown


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

    def __init__(self, options: Mapping[str, str], columns: Sequence[str] | None = None) -> None:
        """``columns``: the columns :meth:`read` yields, in that order (None: SPARK_SCHEMA's)."""
        root = options.get("data_dir")
        if not root:
            raise ValueError(f"format {SOURCE_NAME!r} needs option 'data_dir'")
        self.root: str = root
        self.columns = None if columns is None or list(columns) == SPARK_SCHEMA.fieldNames() else list(columns)
        self.max_commits = _int_option(options, "max_commits_per_batch", DEFAULT_MAX_COMMITS)
        self.first_batch_commits = min(
            self.max_commits, _int_option(options, "first_batch_max_commits", DEFAULT_FIRST_BATCH_COMMITS)
        )
        self.files_per_partition = _int_option(options, "files_per_partition", DEFAULT_FILES_PER_PARTITION)
        self.topic_list_interval = float(options.get("topic_list_interval", DEFAULT_TOPIC_LIST_INTERVAL))
        self.unsubscribed_topic_interval = float(
            options.get("unsubscribed_topic_interval", DEFAULT_UNSUBSCRIBED_TOPIC_INTERVAL)
        )
        self._catalog = CatalogReader(root)
        self._catalog_version = -2  # the catalog version ``_subscribed`` was computed from
        self._subscribed: frozenset[str] = frozenset()
        self._taken_at: dict[str, float] = {}  # when an unsubscribed topic's offset last moved
        self._planned_once = False
        self._target: dict[str, tuple[str | None, int]] | None = None  # AvailableNow: (id, version)
        # Newest version probed per topic, and the id of the table it belongs to (a cache).
        self._latest_seen: dict[str, tuple[str | None, int]] = {}
        self._ids = commit_log.TableIds()  # one stat per topic and probe; a table read when one changes
        self._topics: list[str] = []
        self._listed_at = float("-inf")
        # On object storage every probe is requests: while nothing comes, probe less often
        # (sharedsub.core.ops.poll_backoff; 0 = probe at every trigger).
        self.idle_probe_interval = float(options.get("idle_probe_interval", 0) or 0)
        self.probe_interval = float(options.get("probe_interval", 0) or 0)  # the trigger interval
        self._probe_interval = self.probe_interval
        self._next_probe = float("-inf")
        # On object storage (option ``change_notes``) only the tables the writers' change notes
        # name are probed (sharedsub.core.fanout.change_notes), not every table every trigger.
        self._watch: ChangeWatch | None = None
        if options.get("change_notes", "false").lower() == "true":
            sweep = float(options.get("change_sweep_interval", SWEEP_INTERVAL))
            self._watch = ChangeWatch(sweep_interval=sweep)
        self._note_names: list[str] = []
        self._notes_listed_at = float("-inf")
        # Under light traffic a micro-batch waits for company (sharedsub.core.fanout.batch_admission):
        # at most batch_max_wait seconds (0 = never waits), unless batch_min_rows rows wait.
        self.batch_max_wait = float(options.get("batch_max_wait", 0) or 0)
        self.batch_min_rows = _int_option(options, "batch_min_rows", DEFAULT_BATCH_MIN_ROWS)
        self._pending: dict[tuple[str, int], tuple[int, int]] = {}  # (table, version) -> (rows, ms)
        # Under a trigger of 0 the source holds each latestOffset call up to ``hold`` seconds
        # (0 = never), starting a batch at a front end's commit signal and at most once per
        # ``batch_interval`` seconds on average (sharedsub.core.fanout.batch_hold).
        self.hold = float(options.get("hold", 0) or 0)
        self.batch_interval = float(options.get("batch_interval", 0) or 0)
        # A batch held for the interval waits at most this much longer for the next commit (the
        # front ends' commit interval; 0 = not at all): batches start as commits land.
        self.align = float(options.get("align", 0) or 0)
        self._pace = Pace(self.batch_interval)  # when this reader may start its next batch
        self._signals: CommitListener | None = None  # made by the first held call
        # Once nothing came for a while, an ask that found nothing is held up to ``idle_hold``
        # seconds until a commit's signal (sharedsub.core.fanout.idle_hold).
        self.idle_hold = float(options.get("idle_hold", 0) or 0)
        self._found_at = time.monotonic()  # when a probe last found commits (the start counts)

    # ------------------------------------------------------------------ offsets (driver side)

    def initialOffset(self) -> Offset:
        """Every topic that exists now, at -1: a new query reads all topics from the start."""
        return make_offset({t: -1 for t in self._list_topics(force=True)})

    def getDefaultReadLimit(self) -> ReadLimit:
        """The per-topic commit cap, expressed as the closest built-in limit (files)."""
        return ReadMaxFiles(self.max_commits)

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the target: every topic's table and latest version now; nothing later is read
        (a table created again under the same name after this counts as later)."""
        target: dict[str, tuple[str | None, int]] = {}
        for topic in self._list_topics(force=True):
            ident = self._ids.get(self._table(topic))
            target[topic] = (ident, self._probe(topic, -1, ident))
        self._target = target

    def latestOffset(self, start: dict, limit: ReadLimit) -> Offset:
        """``start`` advanced per topic to its newest version, capped as the module doc says.

        Each topic's entry names the table it counts (its id); a topic whose table is not the one
        ``start`` names is started again from -1, a dropped topic keeps its entry unchanged.
        """
        begin, begin_ids = offset_versions(start), offset_ids(start)
        now = time.monotonic()
        if self._target is None and self.idle_probe_interval > 0 and now < self._next_probe:
            return start  # backing off: nothing probed, so nothing new (no micro-batch)
        first = not self._planned_once
        offset = self._latest(begin, begin_ids, limit)
        if self.hold > 0 and self._target is None:
            return self._held(start, begin, begin_ids, limit, offset, now, first=first)
        if self.idle_hold > 0 and self._target is None and not first:
            offset = self._idle(begin, begin_ids, limit, offset, now)
        if not first and self._target is None and self._admission_wait(begin, begin_ids, offset) > 0:
            return start  # waiting for company (sharedsub.core.fanout.batch_admission)
        self._pending.clear()  # (the commits counted so far are in this batch)
        if self.idle_probe_interval > 0:
            found = offset != make_offset(begin, begin_ids)
            self._probe_interval = next_interval(
                self._probe_interval, found=found, base=self.probe_interval, idle=self.idle_probe_interval
            )
            # The trigger after the interval probes (a trigger comes every probe_interval).
            self._next_probe = now + self._probe_interval - self.probe_interval / 2
        return offset

    def _held(
        self,
        start: dict,
        begin: dict[str, int],
        begin_ids: dict[str, str],
        limit: ReadLimit,
        offset: Offset,
        called: float,
        *,
        first: bool,
    ) -> Offset:
        """The latestOffset call under a trigger of 0: ``offset`` (just probed) once it may start a
        batch, probing again after each sleep, or ``start`` (no batch) when the hold is over
        (sharedsub.core.fanout.batch_hold). A reader's ``first`` batch starts as soon as it finds
        anything, as without the hold; while it finds nothing it holds like any other."""
        if self._signals is None:
            self._signals = CommitListener(self.root)
        gated = False  # the commits were admitted before the interval was over (the fan-out keeps up)
        nothing_new = make_offset(begin, begin_ids)
        # Once nothing came for a while, an ask that finds nothing is held longer: an idle
        # service costs Spark one ask per idle_hold, not one per hold (sharedsub.core.fanout.idle_hold).
        hold = self.hold
        if offset == nothing_new:
            listening, quiet_for = self._signals.listening, called - self._found_at
            hold = max(hold, idle_wait(waiting=False, listening=listening, quiet_for=quiet_for, hold=self.idle_hold))
        while True:
            now = time.monotonic()
            waiting = offset != nothing_new
            if waiting:
                self._found_at = now
            step = next_step(
                waiting=waiting,
                admitted_in=self._admission_wait(begin, begin_ids, offset) if waiting and not first else 0.0,
                pace_left=self._pace.left(now),
                hold_left=called + hold - now,
                gated=gated,
                newest_age=self._newest_age(begin, offset) if gated and waiting and self.align > 0 else 0.0,
                align=self.align,
                hold=hold,
            )
            if step.start:
                self._pace = self._pace.started(now)
                self._pending.clear()
                return offset
            if step.sleep <= 0:
                return start
            if step.signal:
                self._signals.wait(step.sleep)
            else:  # admitted, held for the interval only
                gated = True
                time.sleep(step.sleep)
            offset = self._latest(begin, begin_ids, limit)

    def _idle(self, begin: dict[str, int], begin_ids: dict[str, str], limit: ReadLimit, offset: Offset, called: float) -> Offset:
        """On the grid: ``offset`` (just probed), or, when it holds nothing new and the source has
        found nothing for a while, what a probe finds at the first commit signal within the hold
        (``offset`` again when none comes: the next ask probes). sharedsub.core.fanout.idle_hold."""
        nothing_new = make_offset(begin, begin_ids)
        if offset != nothing_new:
            self._found_at = called
            return offset
        if self._signals is None:
            self._signals = CommitListener(self.root)
        wait = idle_wait(waiting=False, listening=self._signals.listening, quiet_for=called - self._found_at, hold=self.idle_hold)
        deadline = called + wait
        while wait > 0 and self._signals.wait(wait):
            offset = self._latest(begin, begin_ids, limit)
            if offset != nothing_new:
                self._found_at = time.monotonic()
                return offset
            wait = deadline - time.monotonic()  # a signal of a commit probed already: hold on
        return offset

    def _latest(self, begin: dict[str, int], begin_ids: dict[str, str], limit: ReadLimit) -> Offset:
        """LatestOffset's probe of every topic (see latestOffset)."""
        if isinstance(limit, ReadAllAvailable):
            cap: int | None = None
        elif isinstance(limit, ReadMaxFiles):
            cap = max(1, limit.max_files)
        else:
            cap = self.max_commits
        if not self._planned_once:
            cap = self.first_batch_commits if cap is None else min(cap, self.first_batch_commits)
        topics = set(begin)  # (feeds: each partition of a topic is probed and capped apart)
        watched = self._watch is not None and self._target is None
        if watched:
            assert self._watch is not None
            probe, notes = self._watch.active(), self._note_locations()
        else:
            topics.update(self._target if self._target is not None else self._list_topics())
            probe, notes = topics, []
        end: dict[str, int] = {}
        end_ids: dict[str, str | None] = {}
        catalog = self.unsubscribed_topic_interval > 0
        started = time.monotonic()
        # On object storage one round trip: the catalog's next entry too (its refresh's probe),
        # and the writers' change notes.
        with contextlib.ExitStack() as fetched:
            fetched.enter_context(prefetch.prefetched([*notes, *self._probed_entries(probe, begin, catalog=catalog)]))
            if watched:
                probe = self._noted(probe, begin, started, fetched)
            subscribed = self._subscribed_topics() if catalog else None
            self._probe_topics(sorted(probe), begin, begin_ids, cap, subscribed, end, end_ids)
        for topic in begin.keys() - end.keys():  # not probed (quiet): where it was
            end[topic], end_ids[topic] = begin[topic], begin_ids.get(topic)
        if watched:
            assert self._watch is not None
            for topic in probe:
                latest = self._latest_seen.get(topic, (None, -1))[1]
                news = end.get(topic, -1) != begin.get(topic, -1) or latest > end.get(topic, -1)
                self._watch.probed(topic, news=news, started=started)
        offset = make_offset(end, end_ids)
        if offset != make_offset(begin, begin_ids):
            self._planned_once = True
        return offset

    def _admission_wait(self, begin: Mapping[str, int], begin_ids: Mapping[str, str], offset: Offset) -> float:
        """Seconds until the commits ``offset`` takes after ``begin`` start a micro-batch
        (sharedsub.core.fanout.batch_admission; 0: now): counts their rows from their log entries
        (each read once; counting stops at ``batch_min_rows``) and how long the oldest has waited
        (its log file's time). A topic new to the offset, or whose table changed, starts one at once.
        """
        if self.batch_max_wait <= 0:
            return 0.0
        end, end_ids = offset_versions(offset), offset_ids(offset)
        rows, oldest_ms = 0, None
        for topic, version in end.items():
            known = begin.get(topic)
            if known is None or end_ids.get(topic) != begin_ids.get(topic):
                return 0.0
            for v in range(known + 1, version + 1):
                commit = self._pending_commit(self._table(topic), v)
                if commit is None:
                    return 0.0  # gone (or not readable): as before, no waiting
                added, at_ms = commit
                rows += added
                oldest_ms = at_ms if oldest_ms is None else min(oldest_ms, at_ms)
                if rows >= self.batch_min_rows:
                    break
            if rows >= self.batch_min_rows:
                break
        if oldest_ms is None:
            return 0.0
        waited = time.time() - oldest_ms / 1000
        return admitted_in(rows=rows, waited=waited, min_rows=self.batch_min_rows, max_wait=self.batch_max_wait)

    def _newest_age(self, begin: Mapping[str, int], offset: Offset) -> float:
        """Seconds since the newest of the commits ``offset`` takes after ``begin`` landed (its log
        file's time); 0 when one cannot be read (the batch is then not held for alignment)."""
        newest_ms = None
        for topic, version in offset_versions(offset).items():
            if version <= begin.get(topic, -1):
                continue
            commit = self._pending_commit(self._table(topic), version)
            if commit is None:
                return 0.0
            newest_ms = commit[1] if newest_ms is None else max(newest_ms, commit[1])
        return 0.0 if newest_ms is None else max(0.0, time.time() - newest_ms / 1000)

    def _pending_commit(self, table: str, version: int) -> tuple[int, int] | None:
        """``(rows it adds, its log file's time in ms)`` of a topic commit, read once; None when
        it is not in the log or does not say how many rows it adds."""
        key = (table, version)
        if key not in self._pending:
            entry = commit_log.read_log_entry(table, version)
            if entry is None or any(n is None for n in entry.added_rows):
                return None
            marked = commit_log.MAINTENANCE_MARK in entry.info  # re-adds kept rows: none are new
            self._pending[key] = (0 if marked else sum(n for n in entry.added_rows if n is not None), entry.mtime_ms)
        return self._pending[key]

    def _note_locations(self) -> list[str]:
        """The writers' change notes, listed again every NOTE_LIST_INTERVAL (a new one is read
        by the next probe: its first read sweeps)."""
        now = time.monotonic()
        if now - self._notes_listed_at >= NOTE_LIST_INTERVAL:
            self._note_names = list_notes(self.root)
            self._notes_listed_at = now
        return [note_location(self.root, name) for name in self._note_names]

    def _noted(self, probe: set[str], begin: Mapping[str, int], now: float, fetched: contextlib.ExitStack) -> set[str]:
        """The feeds to probe now, after reading the change notes (prefetched with ``probe``'s
        entries): ``probe`` and those the notes name; every feed on a sweep (a new writer, a
        new note, the watch's start or its safety interval), listed again then. The entries of
        those not in ``probe`` are prefetched into ``fetched``."""
        assert self._watch is not None
        news = self._watch.read(read_notes(self.root, self._note_names), now)
        if news.sweep or self._watch.sweep_due(now):
            self._watch.sweep({*begin, *self._list_topics(force=True)}, now)
        known = set(self._topics)
        self._topics.extend(sorted(feed for feed in news.feeds if feed not in known))
        wanted = self._watch.active()
        fetched.enter_context(prefetch.prefetched(self._probed_entries(wanted - probe, begin, catalog=False)))
        return wanted

    def _probed_entries(self, topics: Iterable[str], begin: Mapping[str, int], *, catalog: bool) -> Iterator[str]:
        """The log entries a probe of ``topics`` reads first: each one's version 0 (its table's
        id), the version it is known at and the next two (commit_log.latest_version); with
        ``catalog``, the catalog's next one (CatalogReader.refresh, once it has read the catalog)."""
        if catalog and self._catalog.version >= 0:
            yield log_file(self._catalog.path, self._catalog.version + 1)
        for topic in topics:
            table, known = self._table(topic), begin.get(topic, -1)
            yield from (log_file(table, v) for v in {0, max(known, 0), known + 1, known + 2})

    def _probe_topics(
        self,
        topics: list[str],
        begin: dict[str, int],
        begin_ids: dict[str, str],
        cap: int | None,
        subscribed: frozenset[str] | None,
        end: dict[str, int],
        end_ids: dict[str, str | None],
    ) -> None:
        """The body of :meth:`_latest`: each topic's end version and table id into ``end``, ``end_ids``."""
        for topic in topics:
            known, known_id = begin.get(topic, -1), begin_ids.get(topic)
            older = self._older(topic, known)
            current = self._ids.get(self._table(topic), reload=older)
            if current is None:
                # Dropped (and not created again): the entry stays as it is; nothing to read.
                end[topic], end_ids[topic] = known, known_id
                continue
            known = continue_from(known, known_id, current, older=older)
            latest = self._probe(topic, known, current)
            if self._target is not None:
                target_id, target_version = self._target.get(topic, (current, known))
                latest = min(latest, target_version if target_id == current else known)
            if cap is not None and latest > known + cap and self._has_log(topic, known + 1):
                # Only cap when the commits in between can be read one by one; when the log
                # was cleaned (a start from -1 on an old table) the batch reads a snapshot.
                latest = known + cap
            # A table replaced after its id was read may have lent ``latest`` from the new one:
            # the batch's plan reads the id again and reads nothing of a table whose id is not
            # the offset's (partitions), and the next probe starts the new table from -1. So no
            # second look here (on a bucket it was a HEAD on the message's path).
            if self._target is None and not self._takes(topic, subscribed, new_commits=latest > known):
                # Nobody subscribes to it: its commits wait for a later batch (fanout_pacing).
                end[topic], end_ids[topic] = begin.get(topic, -1), known_id
                continue
            end[topic], end_ids[topic] = max(known, latest), current

    def reportLatestOffset(self) -> Offset | None:
        """Newest versions probed so far (for the query's progress reports)."""
        if not self._latest_seen:
            return None
        seen = self._latest_seen.items()
        return make_offset({t: v for t, (_, v) in seen}, {t: i for t, (i, _) in seen})

    # ------------------------------------------------------------------ planning (driver side)

    def partitions(self, start: dict, end: dict) -> Sequence[TopicFiles]:
        """Files added by each topic's commits in ``(start, end]``, a few files per partition.

        A topic whose table in ``end`` is not the one in ``start`` is read from -1; a topic whose
        table ``end`` names is gone (dropped) reads nothing.

        Raises:
            RuntimeError: a commit in the range is missing from the log although the batch does
                not start at the table's beginning (the checkpoint is older than the log
                retention; data would be skipped).
        """
        parts: list[TopicFiles] = []
        for topic, ident, first, last in self._ranges(start, end):
            table = self._table(topic)
            # On object storage one round trip: its id's entry and the batch's entries, together.
            with prefetch.prefetched(self._plan_entries(table, first, last)):
                current = self._ids.get(table)
                dropped = current is None or (ident is not None and current != ident)
                if not dropped:
                    files, file_rows = self._added_files(topic, first, last)
            if dropped:
                # The table this batch was planned on was dropped (and perhaps created again):
                # its files are gone. A new table is read from -1 by the next batch (ids differ).
                log.warning("topic %s: its table %s was dropped before this batch read it", topic, ident)
                continue
            for i in range(0, len(files), self.files_per_partition):
                counts = file_rows[i : i + self.files_per_partition]
                rows = None if any(c is None for c in counts) else sum(c for c in counts if c is not None)
                chunk = tuple(files[i : i + self.files_per_partition])
                parts.append(TopicFiles(_topic_of(topic), chunk, table, ident, rows))
        return parts

    def _ranges(self, start: dict, end: dict) -> Iterator[tuple[str, str | None, int, int]]:
        """(topic, table id, first, last) of each topic with commits ``(first, last]`` between
        the offsets (see partitions)."""
        begin, begin_ids, end_ids = offset_versions(start), offset_ids(start), offset_ids(end)
        for topic, last in sorted(offset_versions(end).items()):
            ident, known = end_ids.get(topic), begin.get(topic, -1)
            # An end below the start is a different, shorter table (ids may be unknown in start).
            first = continue_from(known, begin_ids.get(topic), ident, older=last < known)
            if last > first:
                yield topic, ident, first, last

    def plan_reads(self, start: dict, end: dict) -> list[str]:
        """The log entries :meth:`partitions` reads first for these offsets (each table's id
        entry and the batch's entries), for a caller that prefetches them with its own reads."""
        return [
            entry
            for topic, _, first, last in self._ranges(start, end)
            for entry in self._plan_entries(self._table(topic), first, last)
        ]

    @staticmethod
    def _plan_entries(table: str, first: int, last: int) -> list[str]:
        return [log_file(table, 0), *(log_file(table, v) for v in range(first + 1, last + 1))]

    def _added_files(self, topic: str, first: int, last: int) -> tuple[list[str], list[int | None]]:
        """The files ``topic``'s commits in ``(first, last]`` added, and each one's rows (None: unknown)."""
        table = self._table(topic)
        if first < 0 and not self._has_log(topic, 0):
            # The table's early commits were cleaned from the log: everything up to ``last`` is
            # exactly the snapshot at ``last`` (topics are append-only).
            snapshot = snapshot_files(table, last)
            return snapshot, [None] * len(snapshot)
        files: list[str] = []
        rows: list[int | None] = []
        for version in range(first + 1, last + 1):  # (prefetched by partitions on object storage)
            commit = commit_log.read_commit(table, version)
            if commit is None:
                raise RuntimeError(
                    f"topic {topic!r}: commit {version} is no longer in the Delta log of {table}; the "
                    "fan-out checkpoint is older than the topic's log retention. Restart the fan-out "
                    "with a new checkpoint (subscription tables are idempotent, nothing is routed twice)."
                )
            files.extend(commit.added)
            rows.extend(commit.added_rows or [None] * len(commit.added))
        return files, rows

    # ------------------------------------------------------------------ reading (workers)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Record batches of the partition's files (:func:`read_topic_files`), of the reader's columns."""
        assert isinstance(partition, TopicFiles)
        if self.columns is None:
            return read_topic_files(partition)
        columns = self.columns
        return (batch.select(columns) for batch in read_topic_files(partition))

    # ------------------------------------------------------------------ helpers

    def _list_topics(self, *, force: bool = False) -> list[str]:
        """The feeds (every partition of every topic; module docstring), re-listed at most every
        ``topic_list_interval`` unless ``force``."""
        now = time.monotonic()
        if force or now - self._listed_at >= self.topic_list_interval:
            self._topics = [
                layout.topic_partition_dir(topic, p)
                for topic, parts in list_topic_partitions(self.root).items()
                for p in parts
            ]
            self._listed_at = now
        return self._topics

    def _subscribed_topics(self) -> frozenset[str] | None:
        """Topics with an active subscription in the catalog now; None when the catalog cannot
        be read (then every topic counts as subscribed: nothing is held)."""
        try:
            records = self._catalog.refresh()
        except Exception:
            log.warning("the subscription catalog could not be read; no topic is held back", exc_info=True)
            return None
        if self._catalog.version != self._catalog_version:
            self._subscribed = frozenset(r.topic for r in records.values() if r.active)
            self._catalog_version = self._catalog.version
        return self._subscribed

    def _takes(self, topic: str, subscribed: frozenset[str] | None, *, new_commits: bool) -> bool:
        """Whether this batch takes ``topic``'s new commits (sharedsub.core.fanout.fanout_pacing)."""
        is_subscribed = subscribed is None or _topic_of(topic) in subscribed
        now = time.monotonic()
        taken_at = self._taken_at.get(topic)
        since = None if taken_at is None else now - taken_at
        if not takes_commits(
            subscribed=is_subscribed, new_commits=new_commits, since_last_taken=since,
            interval=self.unsubscribed_topic_interval,
        ):
            return False
        if not is_subscribed and new_commits:
            self._taken_at[topic] = now
        return True

    def _table(self, feed: str) -> str:
        return layout.join(self.root, layout.TOPICS_DIR, feed)

    def _probe(self, topic: str, known: int, ident: str | None) -> int:
        """Newest committed version of ``topic``'s table ``ident`` (cheap: continues from what
        was seen before of that same table)."""
        seen_id, seen = self._latest_seen.get(topic, (None, -1))
        start = max(known, seen) if seen_id == ident else known
        latest = commit_log.latest_version(self._table(topic), start)
        self._latest_seen[topic] = (ident, latest)
        return latest

    def _older(self, topic: str, version: int) -> bool:
        """True when ``topic``'s table (if any) is older than ``version``: a different table.

        Two stats in the usual case; a table load only when neither ``version`` nor the next
        one is in the log (a new, shorter table, or no table).
        """
        if version < 0 or self._has_log(topic, version) or self._has_log(topic, version + 1):
            return False
        return table_exists(self._table(topic)) and commit_log.latest_version(self._table(topic)) < version

    def _has_log(self, topic: str, version: int) -> bool:
        # A stat (a HEAD on object storage), not a parse: the commit file exists until log
        # cleanup removes it.
        return object_exists(log_file(self._table(topic), version))


def _topic_of(feed: str) -> str:
    """The topic a feed (a directory name under ``topics/``) is a partition of."""
    parsed = layout.parse_topic_dir(feed)
    return parsed[0] if parsed is not None else feed


def read_topic_files(partition: TopicFiles) -> Iterator[pa.RecordBatch]:
    """Record batches of the partition's files, with the topic column, in the source's schema.

    Stateless: runs in a Python worker (the source's tasks, the executors' routing tasks) or on
    the driver. Reads only the routing columns, never ``message``. A file that is gone because
    its topic was dropped while the batch ran reads as nothing; any other missing file raises.
    Files are put into the source's schema together, up to :data:`_CONVERT_ROWS` rows at a time:
    most are one small commit each, whose own select, topic column and cast cost more than
    reading them.
    """
    with prefetch.prefetched(partition.files):  # on object storage: one round trip for the files
        yield from _read_topic_files(partition)


def _read_topic_files(partition: TopicFiles) -> Iterator[pa.RecordBatch]:
    pending: list[pa.Table] = []
    rows = 0
    for path in partition.files:
        try:
            data = read_files([path], schemas.ROUTING_COLUMNS)
        except FileNotFoundError:
            if partition.table_id is None or commit_log.table_id(partition.table) == partition.table_id:
                raise  # the table is still there: a file it needs is missing
            return  # the topic was dropped while this batch ran: nothing of it is left
        if data is None or data.num_rows == 0:
            continue
        pending.append(data)
        rows += data.num_rows
        if rows >= _CONVERT_ROWS:
            yield from _in_source_schema(partition.topic, pending)
            pending, rows = [], 0
    yield from _in_source_schema(partition.topic, pending)


# Rows of a partition's files converted to the source's schema at once (bounds the memory of a
# partition of many large files: routing columns only, a few hundred bytes a row).
_CONVERT_ROWS = 65536


def _in_source_schema(topic: str, tables: list[pa.Table]) -> Iterator[pa.RecordBatch]:
    """``tables`` (routing columns of one topic's files, in order) as record batches of the
    source's schema, with the topic column."""
    if not tables:
        return
    data = pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0]
    data = data.select(schemas.ROUTING_COLUMNS)
    data = data.add_column(0, "topic", pa.repeat(pa.scalar(topic, pa.string()), data.num_rows))
    yield from data.cast(_SPARK_ARROW_SCHEMA).to_batches()


class DriverBatchReader:
    """The rows of one micro-batch of this source, read on the driver from the offsets Spark
    logged for it, without running a Spark job.

    Spark writes a micro-batch's end offset to ``<checkpoint>/offsets/<batch>`` before it hands
    the batch to ``foreachBatch``, and its start is the previous batch's end (a query's batch 0
    starts at the initial offset: every topic at -1, which an empty offset means too). From
    those two, :meth:`TopicsStreamReader.partitions` names the files and
    :meth:`TopicsStreamReader.read` reads them, exactly as the source's tasks would: the same
    code, the same rows. What is saved is the Spark job itself: a Python worker reading the
    files, the rows crossing into the JVM and back to the driver's ``toArrow`` (most of a
    micro-batch's time when batches are small; bench/ reports it as ``fanout_source_read``).
    """

    def __init__(self, checkpoint: str, options: Mapping[str, str]) -> None:
        """``checkpoint``: the query's local checkpoint dir; ``options``: the source's."""
        self.offsets_dir = os.path.join(checkpoint, "offsets")
        self._reader = TopicsStreamReader(options)

    # Any: the checkpoint's offsets as json.loads gives them (sharedsub.storage.retention.read_batch_offset)
    def offsets(self, batch_id: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start and end offset of micro-batch ``batch_id``.

        Raises:
            RuntimeError: the batch's offset, or the previous batch's, is not in the checkpoint.
        """
        end = read_batch_offset(self.offsets_dir, batch_id)
        if end is None:
            raise RuntimeError(f"no offset for micro-batch {batch_id} in {self.offsets_dir}")
        if batch_id == 0:
            return {}, end
        start = read_batch_offset(self.offsets_dir, batch_id - 1)
        if start is None:
            raise RuntimeError(f"no offset for micro-batch {batch_id - 1} in {self.offsets_dir}")
        return start, end

    def plan(self, batch_id: int, topics: Collection[str]) -> list[TopicFiles]:
        """The files of micro-batch ``batch_id`` of the given topics, as the source's tasks would
        read them."""
        start, end = self.offsets(batch_id)
        return [part for part in self._reader.partitions(start, end) if part.topic in topics]

    def plan_reads(self, batch_id: int) -> list[str]:
        """The log entries :meth:`plan` reads first (TopicsStreamReader.plan_reads)."""
        start, end = self.offsets(batch_id)
        return self._reader.plan_reads(start, end)

    def read(self, batch_id: int, topics: Collection[str]) -> pa.Table:
        """The rows of micro-batch ``batch_id`` of the given topics, in the source's schema."""
        return read_parts(self.plan(batch_id, topics))


def read_parts(parts: Sequence[TopicFiles]) -> pa.Table:
    """The rows of ``parts``, read here, in the source's schema."""
    with prefetch.prefetched(path for part in parts for path in part.files):  # all parts' files at once
        batches = [batch for part in parts for batch in read_topic_files(part)]
    return pa.Table.from_batches(batches, schema=_SPARK_ARROW_SCHEMA)


class TopicsDataSource(DataSource):
    """``format("sharedsub_topics")``: options ``data_dir`` (required), ``max_commits_per_batch``,
    ``first_batch_max_commits``, ``files_per_partition``, ``topic_list_interval`` (seconds),
    ``unsubscribed_topic_interval`` (seconds), ``probe_interval`` and ``idle_probe_interval``
    (seconds: while no topic has new commits, probe at most every ``probe_interval`` doubling up
    to ``idle_probe_interval``; 0, the default: at every trigger), ``change_notes``
    (``true``: probe the tables the writers' change notes name) and ``change_sweep_interval``
    (seconds). Its schema is SPARK_SCHEMA; ``readStream.schema(...)`` with some of its fields
    reads those only (e.g. TOPIC_ONLY)."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        if not options.get("data_dir"):
            # Checked here so that load() fails, not the query's first trigger.
            raise ValueError(f"format {SOURCE_NAME!r} needs option 'data_dir' (the sharedsub data dir)")

    @classmethod
    def name(cls) -> str:
        """The format name Spark knows this source by: ``sharedsub_topics``."""
        return SOURCE_NAME

    def schema(self) -> StructType:
        """The rows' schema (SPARK_SCHEMA): the topic, then the topic table's routing columns."""
        return SPARK_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A reader of every topic table's new commits under this source's options, of ``schema``'s
        columns: SPARK_SCHEMA, or some of its fields given with ``readStream.schema(...)`` (the
        fan-out job reading batches on the driver gives one: jobs/fanout.py).

        Raises:
            ValueError: ``schema`` has a field SPARK_SCHEMA lacks, or with another type.
        """
        known = {field.name: field.dataType for field in SPARK_SCHEMA.fields}
        wrong = [f.name for f in schema.fields if known.get(f.name) != f.dataType]
        if wrong:
            raise ValueError(
                f"format {SOURCE_NAME!r} has no columns {wrong} of those types; its schema: {SPARK_SCHEMA.simpleString()}"
            )
        return TopicsStreamReader(self.options, schema.fieldNames())
