"""The tailer: a thread that reads subscription tables and hands their rows to the front end.

For every subscription generation with consumers on this front end it first reads the table's
current snapshot minus the acknowledged rows (its backlog; a slice of files at a time, as the
consumers take them, so a large backlog is never in memory whole), then probes the Delta log for
new commits, reads the new rows (references ``(topic, seq)``), resolves each payload from the
:class:`~sharedsub.runtime.payloads.PayloadCache` or the topic table, and posts ``(key, watch,
rows)`` to the front end. ``watch`` names the watch that read them (:meth:`Tailer.watch`): rows
posted before an unwatch may reach the front end after the next watch of the same key began, and
:meth:`Tailer.current` tells them apart. At most ``max_in_flight`` rows per subscription are posted but not yet sent,
so a slow consumer bounds memory. While idle it keeps the table snapshots of durable
subscriptions without consumers here (and their topics' payload indexes) up to date
(:meth:`Tailer.keep_warm`), so a consumer that attaches to a large backlog is not kept waiting
for a replay of their logs.

It reads through the storage package only and knows nothing of AMQP: what happens to a row once
posted is the dispatcher's (connectors/amqp/dispatcher.py, the adapter of
sharedsub.core.delivery.dispatch).

Threads: everything here runs on the tailer's own thread except the methods documented as
called from the front end's thread (:meth:`Tailer.watch`, :meth:`Tailer.unwatch`,
:meth:`Tailer.rewind`, :meth:`Tailer.sent`, :meth:`Tailer.forget_topic`). The acknowledged
seqs a feed is given are owned and written by the dispatcher on the front end's thread; this
thread only reads them, as a hint that spares resolving payloads of rows already settled. The
dispatcher filters every offered row against the same state again, so a read that races a
write can only post a row that is then dropped, never lose one.

Why stale rows must be told apart: a new watch reads the backlog from its first seq, and the
dispatch rules take rows in seq order (sharedsub.core.delivery.dispatch, "Memory": the
acknowledged floor rises to below the lowest row that may be open, counting every row above the
highest one offered as not read yet). Rows of the previous watch arriving first would be offered
ahead of lower open rows of the new backlog, and a floor raised past those would drop them when
they come: open rows never delivered.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import logging
import threading
import time
from collections.abc import Callable, Collection, Container

import pyarrow as pa
import pyarrow.compute as pc

from sharedsub.core import layout
from sharedsub.core.delivery import outcomes
from sharedsub.core.delivery.acklog import ack_state_of
from sharedsub.core.fanout.change_notes import ChangeWatch
from sharedsub.core.ops.logthrottle import ThrottledLog
from sharedsub.core.ops.poll_backoff import feed_idle_interval, next_interval
from sharedsub.core.ops.stage_timing import StageTimes
from sharedsub.core.value_type import value_type
from sharedsub.runtime.payloads import PayloadCache
from sharedsub.storage.change_notes import read_notes
from sharedsub.storage.delta.commit_log import read_commit
from sharedsub.storage.delta.table_reads import read_files, read_table
from sharedsub.storage.delta.tables import table_exists
from sharedsub.storage.payload_index import TopicIndex, read_messages
from sharedsub.storage.topics import SeqFile, topic_files

log = logging.getLogger(__name__)


@value_type
class Row:
    """One routed message ready to send."""

    topic: str
    seq: int
    message: bytes
    expires_at: int | None = None  # ms since the epoch (sharedsub.core.delivery.outcomes.expires_at)
    failures: int = 0  # failed deliveries recorded in the ack log when the row was read
    # Loaded after an unclean stop (SIGKILL, power loss) of the previous front end: it may have
    # been sent then without any trace in the ack log, so it goes out marked redelivered.
    maybe_delivered: bool = False
    message_id: str | None = None
    published_ms: int | None = None  # its topic commit, ms since the epoch (stage publish_to_send)


# Rows posted to the front end at most at once: the first ones go out after their payloads are
# resolved, not after those of the whole in-flight window (a consumer attaching to a backlog
# waited for 2,000 payloads before its first delivery).
_POST_CHUNK = 256

# Unposted rows whose payloads a read of the topic table also takes when they are in the row
# groups it reads anyway, and the bytes of them kept per feed (Tailer._resolve).
_READ_AHEAD = _POST_CHUNK
_READ_AHEAD_BYTES = 8 << 20

# Rows of a read turned into Python values at once (see Tailer._emit).
_EMIT_CHUNK = 2048

# Data files of a backlog snapshot read per slice (a fan-out batch or a compacted file each).
_BACKLOG_FILES = 16
WARM_INTERVAL = 2.0
"""Seconds between two refreshes of the idle durable subscriptions' snapshots (Tailer.keep_warm)."""
WARM_MAX_TABLES = 64
"""Subscriptions kept warm at most (the process's snapshot cache holds 256 tables:
sharedsub.storage.delta.log_snapshot.CACHED_TABLES; warming more would push each other out)."""

# Columns of a subscription table the tailer reads (never the payload, which is in the topic).
_ROW_COLUMNS = ["seq", "ttl", "absolute_expiry_time", "published_at", "message_id"]
# Read with new rows only (not the backlog), for the ``tail_visible`` stage.
_NEW_ROW_COLUMNS = [*_ROW_COLUMNS, "routed_at"]


@dataclasses.dataclass(slots=True)
class _Feed:
    key: str
    watch: int  # which watch of ``key`` this is (Tailer.current)
    table: str
    topic: str
    acked: Container[int]  # the dispatcher's acknowledged seqs: read here, written there
    ack_table: str | None
    # The topic partitions whose rows are posted (None: all). Several members share a
    # subscription by partition (sharedsub.core.ownership.partition_owners); the front end's
    # thread replaces it, this thread reads it.
    partitions: frozenset[int] | None = None
    next_version: int = -1  # -1: the backlog snapshot is not loaded yet
    in_flight: int = 0  # posted to the front end, not yet sent (updated by both threads; approximate)
    rewind: bool = False  # set by :meth:`Tailer.rewind`: load the backlog snapshot again
    # Rows read but not posted yet, in seq order: (seq, expires_at, message_id, published_ms,
    # failures, maybe_delivered). A large backlog waits here, without payloads, until the front end
    # has sent enough of what was posted (``max_in_flight``); new commits are read only once it
    # is empty.
    unposted: collections.deque[tuple[int, int | None, str | None, int | None, int, bool]] = dataclasses.field(
        default_factory=collections.deque
    )
    # The backlog snapshot still to read (see :meth:`Tailer._read_backlog`): its files not read
    # yet, by first seq; rows read from files but above the last slice's bound; and what the
    # ack log said when the snapshot was taken.
    backlog_files: list[SeqFile] = dataclasses.field(default_factory=list)
    backlog_carry: pa.Table | None = None
    backlog_settled: Container[int] = ()
    backlog_failures: dict[int, int] = dataclasses.field(default_factory=dict)
    backlog_maybe_delivered: bool = False
    backlog_first_slice: bool = False  # the next slice is the snapshot's first (read small)
    # Partitions taken over from a member that died: the next backlog load marks their rows
    # possibly delivered (that member may have sent them).
    taken_over: frozenset[int] = frozenset()
    backlog_taken_over: frozenset[int] = frozenset()
    # Payloads of unposted rows read with an earlier chunk's (Tailer._resolve), by seq.
    ahead: dict[int, bytes] = dataclasses.field(default_factory=dict)
    # Its probe schedule (Tailer._run): when it is due next (time.monotonic()), and the interval
    # it backs off by while its probes find nothing.
    due: float = 0.0
    interval: float = 0.0

    def clear_backlog(self) -> None:
        """Forget what is left of the backlog snapshot (a rewind loads it again)."""
        self.unposted.clear()
        self.ahead = {}
        self.backlog_files = []
        self.backlog_carry = None
        self.backlog_settled = ()
        self.backlog_failures = {}


class Tailer:
    """Background reader of subscription tables (see module docstring)."""

    def __init__(
        self,
        root: str,
        cache: PayloadCache,
        post: Callable[[str, int, list[Row]], None],
        *,
        poll_interval: float = 0.005,
        idle_poll_interval: float | None = None,
        max_in_flight: int = 2000,
        after_unclean_stop: bool = False,
        stages: StageTimes | None = None,
        partitioned: bool = False,
        announced: bool = False,
        change_note: str | None = None,
    ) -> None:
        """``stages``: where the ``tail_read`` and ``tail_visible`` times go (this thread is
        their only writer; sharedsub.core.ops.stage_timing). ``idle_poll_interval``: the longest
        wait between polls while nothing comes (sharedsub.core.ops.poll_backoff; None: always
        ``poll_interval``). ``partitioned``: several members share the data dir's
        subscriptions, so a new watch posts no partition's rows until :meth:`set_partitions`
        gives it some (else every partition's). ``announced``: the fan-out announces the tables
        it writes (:meth:`hint`), so idle tables are probed seldom
        (sharedsub.core.ops.poll_backoff.feed_idle_interval). ``change_note``: the name of the
        fan-out's change note under ``<root>/_changes/`` (a ``sharedsub frontend`` on a bucket,
        which has no announcements): it is read every ``poll_interval``, backing off to
        ``idle_poll_interval`` while it names nothing new, and the tables it names are probed
        then, backing off as usual (sharedsub.core.fanout.change_notes); idle tables are probed
        as seldom as with announcements."""
        self.root = root
        self._partitioned = partitioned
        self._stages = stages if stages is not None else StageTimes()
        self._cache = cache
        self._post = post
        # The previous front end on this data dir died without its clean stop (which records
        # unsettled deliveries as failed): the first backlog of each subscription may hold rows
        # it had sent. JMS says such messages must come marked redelivered; we cannot tell which
        # were sent, so every one is (a possibly-redelivered mark, not a failed delivery: it
        # does not count towards max_delivery_count).
        self._after_unclean_stop = after_unclean_stop
        self._first_loads: set[str] = set()
        self._poll = poll_interval
        self._idle_poll = max(poll_interval, idle_poll_interval or poll_interval)
        self._max_in_flight = max_in_flight
        self._announced = announced
        self._change_note = change_note
        self._notes = ChangeWatch()
        self._note_interval = poll_interval
        self._note_due = 0.0  # time.monotonic() of the next read of the change note
        self._feeds: dict[str, _Feed] = {}
        self._lock = threading.Lock()
        self._watches = itertools.count(1)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._marked: set[str] = set()  # feeds to probe at the next pass (under _lock)
        self._every = False  # probe every feed at the next pass (under _lock)
        self._indexes: dict[str, TopicIndex] = {}
        self._warm_tables: Callable[[], list[tuple[str, str]]] = list
        self._next_warm = 0.0
        self._thread = threading.Thread(target=self._run, name="sharedsub-tailer", daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread."""
        self._stop.set()
        self._wake.set()
        self._thread.join(10)

    def hint(self, tables: Collection[str] | None = None) -> None:
        """New rows may be in ``tables`` (paths relative to the data dir; None: in any table):
        the fan-out says a batch wrote them (sharedsub.core.fanout.routed_tables). Those are
        probed at once. Any thread."""
        if tables is None:
            with self._lock:
                self._every = True
        else:
            self._mark_tables(tables)
        self._wake.set()

    def _mark_tables(self, tables: Collection[str], *, renew: bool = False) -> None:
        """Probe the feeds of ``tables`` (relative to the data dir) at the next pass; with
        ``renew`` (this thread only: it sets their interval), backing off from the poll interval
        again after it (a change note's news)."""
        wanted = {layout.join(self.root, table) for table in tables}
        with self._lock:
            for feed in self._feeds.values():
                if feed.table in wanted:
                    self._marked.add(feed.key)
                    if renew:
                        feed.interval = self._poll

    def _mark(self, key: str) -> None:
        """Probe ``key``'s table at the next pass (news of it: a watch, a rewind, room freed)."""
        with self._lock:
            self._marked.add(key)
        self._wake.set()

    def watch(self, key: str, table_rel: str, topic: str, *, acked: Container[int], ack_table_rel: str | None) -> None:
        """Start delivering a subscription generation's backlog and new rows (idempotent; the
        front end's thread).

        ``acked``: the acknowledged seqs as the dispatcher holds them (it writes them on the front
        end's thread; this thread only reads them, see the module docstring); rows in it are not
        posted. ``ack_table_rel``, when given, is read with each backlog load: rows it settles
        are not posted either.
        """
        with self._lock:
            if key not in self._feeds:
                ack_table = layout.join(self.root, ack_table_rel) if ack_table_rel else None
                self._feeds[key] = _Feed(
                    key, next(self._watches), layout.join(self.root, table_rel), topic, acked, ack_table,
                    frozenset() if self._partitioned else None,
                )
            self._marked.add(key)
        self._wake.set()

    def keep_warm(self, tables: Callable[[], list[tuple[str, str]]]) -> None:
        """Keep the snapshots of ``tables()`` (``(table_rel, topic)`` of durable subscriptions;
        called on this thread, so it must be safe to call from any thread) up to date while
        idle, every :data:`WARM_INTERVAL` seconds, with their topics' payload indexes: the
        first of those reads after a consumer attaches then reads only the commits since
        (a log replay of a table 292 versions long took 18 ms, its topic's index 24 ms). At most
        :data:`WARM_MAX_TABLES` tables; tables tailed for a consumer are fresh anyway."""
        self._warm_tables = tables

    def current(self, key: str, watch: int) -> bool:
        """True when rows posted as ``(key, watch)`` come from the watch of ``key`` still going
        (any thread; the front end's thread asks, where watch and unwatch happen too, so the
        answer holds while it offers them). Rows of an ended watch are dropped: the next watch
        reads them again (module docstring)."""
        feed = self._feeds.get(key)
        return feed is not None and feed.watch == watch

    def unwatch(self, key: str) -> None:
        """Stop tailing a subscription."""
        with self._lock:
            self._feeds.pop(key, None)

    def forget_topic(self, topic: str) -> None:
        """``topic`` was dropped: its table index is stale (any thread)."""
        self._indexes.pop(topic, None)

    def rewind(self, key: str) -> bool:
        """Load ``key``'s backlog again (snapshot minus what the ack log settles) before its next
        new commit: a replay (connectors/amqp/replays.py) opened settled messages again. Rows
        already waiting or outstanding are not queued twice (the dispatcher's ``offer``). Returns
        False when ``key`` is not tailed here (its backlog is loaded when a consumer attaches)."""
        with self._lock:
            feed = self._feeds.get(key)
            if feed is None:
                return False
            feed.rewind = True
            self._marked.add(key)
        self._wake.set()
        return True

    def set_partitions(self, key: str, partitions: frozenset[int], *, taken_over: frozenset[int] = frozenset()) -> bool:
        """Post only the rows of ``partitions`` of ``key`` from now on (the partitions this member
        dispatches); partitions gained are read again from the backlog, those in ``taken_over``
        (their previous dispatcher died) marked possibly delivered. Rows of partitions lost that
        were read but not posted are not posted. The front end's thread; False when ``key`` is
        not tailed here."""
        with self._lock:
            feed = self._feeds.get(key)
            if feed is None:
                return False
            gained = partitions - (feed.partitions or frozenset())
            feed.partitions = partitions
            if gained:
                feed.taken_over = feed.taken_over | (taken_over & gained)
                feed.rewind = True
            self._marked.add(key)
        self._wake.set()
        return True

    def sent(self, key: str, count: int) -> None:
        """The front end reports ``count`` rows of ``key`` left its queue (frees in-flight room; its thread)."""
        feed = self._feeds.get(key)
        if feed is not None:
            feed.in_flight = max(0, feed.in_flight - count)
            if feed.in_flight < self._max_in_flight // 2:
                self._mark(key)

    # ------------------------------------------------------------------ thread

    def _run(self) -> None:
        # A table that cannot be read fails again on every poll until it is repaired: its fault
        # is logged when it starts, then at most every few minutes, and once when a poll of it
        # reads something again. (A poll that returns False may not have read the table at all,
        # e.g. with max_in_flight rows posted: taking that for a recovery would log the fault
        # again at the next failing read.)
        #
        # Each table is probed on its own schedule: at once while it gives rows, and when
        # something says it may have some (a watch, a rewind, room freed by sends, the
        # fan-out's announcement of the tables a batch wrote: Tailer.hint); otherwise backing
        # off up to poll_backoff.feed_idle_interval. A pass costs what the tables that have
        # news cost, not what every watched table costs (issue 41: a thousand tables probed
        # every few ms were most of the front end's CPU).
        faults = ThrottledLog(log)
        while not self._stop.is_set():
            now = time.monotonic()
            with self._lock:
                feeds = list(self._feeds.values())
                marked, self._marked = self._marked, set()
                every, self._every = self._every, False
            if self._change_note is not None and now >= self._note_due:
                self._read_note(now, faults)
                with self._lock:  # (what it named)
                    marked |= self._marked
                    every = every or self._every
                    self._marked, self._every = set(), False
            told = self._announced or self._change_note is not None
            cap = feed_idle_interval(len(feeds), base=self._poll, idle=self._idle_poll, announced=told)
            busy = False
            for feed in feeds:
                if not (every or feed.due <= now or feed.key in marked):
                    continue
                try:
                    read = self._poll_feed(feed)
                except Exception as exc:  # noqa: BLE001 (one unreadable table must not stop the others; throttled log)
                    faults.fault(feed.table, "reading subscription table %s failed", feed.table, error=exc)
                    read = False
                else:
                    if read:
                        faults.clear(feed.table, "reading subscription table %s works again", feed.table)
                if read:
                    busy = True
                    feed.interval, feed.due = self._poll, now
                elif self._announced:
                    # Rows the fan-out writes are announced (hint): no need to look again soon.
                    feed.interval, feed.due = cap, now + cap
                else:
                    feed.interval = next_interval(feed.interval, found=False, base=self._poll, idle=cap)
                    feed.due = now + feed.interval
            if not busy:
                self._warm(feeds)
                soonest = min((feed.due for feed in feeds), default=now + cap)
                if self._change_note is not None:
                    soonest = min(soonest, self._note_due)
                self._wake.wait(max(0.0, min(soonest - time.monotonic(), cap)))
                self._wake.clear()

    def _read_note(self, now: float, faults: ThrottledLog) -> None:
        """Read the fan-out's change note; what it names is probed at this pass (hint)."""
        assert self._change_note is not None
        try:
            notes = read_notes(self.root, [self._change_note])
        except Exception as exc:  # noqa: BLE001 (the tables are still probed, seldom; throttled log)
            faults.fault("change-note", "reading the fan-out's change note failed", error=exc)
            self._note_interval = self._idle_poll
        else:
            faults.clear("change-note", "reading the fan-out's change note works again")
            news = self._notes.read(notes, now)
            if news.sweep:
                self.hint(None)
            elif news.feeds:
                # Probed now and, backing off from the poll interval, again after R: a commit
                # the job made within R of its note is not in it (change_notes).
                self._mark_tables(news.feeds, renew=True)
            found = news.sweep or bool(news.feeds)
            self._note_interval = next_interval(self._note_interval, found=found, base=self._poll, idle=self._idle_poll)
        self._note_due = now + self._note_interval

    def _warm(self, feeds: list[_Feed]) -> None:
        """Refresh the idle durable subscriptions' snapshots (:meth:`keep_warm`) when due."""
        now = time.monotonic()
        if now < self._next_warm:
            return
        self._next_warm = now + WARM_INTERVAL
        tailed = {feed.table for feed in feeds}
        topics: set[str] = set()
        warmed = 0
        for table_rel, topic in self._warm_tables():
            if warmed >= WARM_MAX_TABLES:
                break
            table = layout.join(self.root, table_rel)
            if table in tailed:
                continue
            warmed += 1
            try:
                topic_files(table)
            except Exception:  # noqa: BLE001 (not written yet (no routed row), or unreadable: the attach will say)
                continue
            topics.add(topic)
        for topic in topics:
            try:
                self._index(topic).refresh()
            except Exception:  # noqa: BLE001 (the topic was dropped meanwhile, or is unreadable: as above)
                self._indexes.pop(topic, None)

    def _index(self, topic: str) -> TopicIndex:
        index = self._indexes.get(topic)
        if index is None:
            index = self._indexes[topic] = TopicIndex(self.root, topic)
        return index

    def _poll_feed(self, feed: _Feed) -> bool:
        if feed.rewind:
            feed.clear_backlog()
        if feed.in_flight >= self._max_in_flight:
            return False
        if feed.next_version < 0 or feed.rewind:
            feed.rewind = False
            self._load_backlog(feed)
        if feed.unposted:
            return self._post_unposted(feed)
        if feed.backlog_files or feed.backlog_carry is not None:
            return self._read_backlog(feed)
        t0 = time.perf_counter()
        commit = read_commit(feed.table, feed.next_version)
        if commit is None:
            return False
        data = read_files(commit.added, _NEW_ROW_COLUMNS)
        feed.next_version = commit.version + 1
        self._stages.observe("tail_read", time.perf_counter() - t0)
        if data is not None and data.num_rows:
            oldest = pc.min(data.column("routed_at")).as_py()
            if oldest is not None:
                self._stages.observe("tail_visible", time.time() - oldest.timestamp())
        self._emit(feed, data, {})
        return True

    def _load_backlog(self, feed: _Feed) -> None:
        """Take the table's current snapshot as the backlog: its file list (with each file's seq
        range from the log's statistics) and the ack log's state; the rows are read slice by
        slice (:meth:`_read_backlog`), so a large backlog is never in memory whole.

        Until it succeeds the feed counts as not loaded (``next_version`` -1), so a load that
        raises (an unreadable ack log or table, maybe for a moment) is tried again on the next
        poll: neither a rewind nor the rest of a backlog is given up for new commits."""
        feed.clear_backlog()
        feed.next_version = -1
        if feed.ack_table is not None:  # (read_table answers None for an ack log not written yet)
            state = ack_state_of(read_table(feed.ack_table, ["seq", "outcome"]))
            feed.backlog_settled = state.settled  # filtered here only: the dispatcher alone changes feed.acked
            feed.backlog_failures = state.delivery_counts
        if not table_exists(feed.table):
            feed.next_version = 0
            return
        version, files = topic_files(feed.table)  # any table with seq statistics
        feed.next_version = version + 1
        # Files without statistics sort first: their rows are read with the first slice.
        feed.backlog_files = sorted(files, key=lambda f: -1 if f.first_seq is None else f.first_seq)
        first = feed.table not in self._first_loads
        self._first_loads.add(feed.table)
        feed.backlog_maybe_delivered = self._after_unclean_stop and first
        feed.backlog_taken_over, feed.taken_over = feed.taken_over, frozenset()
        feed.backlog_first_slice = True

    def _read_backlog(self, feed: _Feed) -> bool:
        """Read the next slice of the backlog and queue its rows in seq order.

        A slice is the next ``_BACKLOG_FILES`` files by first seq, plus the rows carried over;
        it queues the rows below the first seq of the files left and carries the rest (files
        compacted together may overlap in seq). Every row queued later has a higher seq than
        every row queued now: the dispatch rules rely on rows coming in seq order.
        """
        # The first slice is one file: a consumer attaching to a large backlog gets its first
        # messages after one small read, not sixteen.
        size = 1 if feed.backlog_first_slice else _BACKLOG_FILES
        feed.backlog_first_slice = False
        take = size
        while take - size < len(feed.backlog_files) and feed.backlog_files[take - size].first_seq is None:
            take += 1  # files without statistics sort first and all go with the first slice
        files, feed.backlog_files = feed.backlog_files[:take], feed.backlog_files[take:]
        try:
            read = read_files([f.path for f in files], _ROW_COLUMNS)
        except FileNotFoundError:
            # Maintenance rewrote and vacuumed files of the snapshot meanwhile: take the table's
            # snapshot again. Rows queued already are not queued twice (the dispatcher's ``offer``).
            self._load_backlog(feed)
            return True
        parts = [p for p in (feed.backlog_carry, read) if p is not None]
        feed.backlog_carry = None
        if not parts:
            return bool(feed.backlog_files)
        data = pa.concat_tables(parts, promote_options="default") if len(parts) > 1 else parts[0]
        bound = feed.backlog_files[0].first_seq if feed.backlog_files else None
        if bound is not None:
            below = pc.less(data.column("seq"), bound)
            feed.backlog_carry = data.filter(pc.invert(below))
            if feed.backlog_carry.num_rows == 0:
                feed.backlog_carry = None
            data = data.filter(below)
        self._emit(
            feed, data, feed.backlog_failures, feed.backlog_settled, maybe_delivered=feed.backlog_maybe_delivered,
            maybe_partitions=feed.backlog_taken_over,
        )
        return True

    def _emit(
        self,
        feed: _Feed,
        data: pa.Table | None,
        failures: dict[int, int],
        settled: Container[int] = (),
        *,
        maybe_delivered: bool = False,
        maybe_partitions: frozenset[int] = frozenset(),
    ) -> None:
        """Queue the not-acknowledged rows of ``data`` (subscription-table columns) in seq order
        (a seq twice in ``data`` once) and post as many as ``max_in_flight`` allows (the rest on
        later polls). Rows become Python values ``_EMIT_CHUNK`` at a time, each chunk posted
        before the next is converted: the first delivery of a large backlog slice does not wait
        for all of it (``published_at`` as datetimes was most of that wait, profiled). Only the
        rows of the feed's partitions are queued; those of ``maybe_partitions`` marked possibly
        delivered."""
        if data is None or data.num_rows == 0:
            return
        with self._lock:
            if feed.rewind:
                # Partitions were gained (or a replay reopened rows) since these rows were read:
                # the backlog is read again from its start, these with it. Posted now, with the
                # gained partitions, they would come ahead of that partition's lower rows, and
                # the dispatch rules' floor (which takes each partition's rows in seq order)
                # could pass those lower rows before they are read.
                return
            partitions = feed.partitions
        if partitions is not None:
            of_row = pc.shift_right(data.column("seq"), layout.PARTITION_BITS)
            data = data.filter(pc.is_in(of_row, pa.array(sorted(partitions), pa.int64())))
            if data.num_rows == 0:
                return
        data = data.sort_by("seq")
        previous = None
        for start in range(0, data.num_rows, _EMIT_CHUNK):
            part = data.slice(start, _EMIT_CHUNK)
            published = pc.divide(part.column("published_at").cast(pa.int64()), 1000)  # µs -> ms
            columns = (
                part.column("seq").to_pylist(),
                part.column("ttl").to_pylist(),
                part.column("absolute_expiry_time").to_pylist(),
                published.to_pylist(),
                part.column("message_id").to_pylist(),
            )
            for seq, ttl, absolute, published_ms, message_id in zip(*columns, strict=True):
                if seq == previous or seq in feed.acked or seq in settled:
                    continue
                previous = seq
                expires = outcomes.expires_at(ttl, absolute, published_ms)
                maybe = maybe_delivered or (bool(maybe_partitions) and seq >> layout.PARTITION_BITS in maybe_partitions)
                feed.unposted.append((seq, expires, message_id, published_ms, failures.get(seq, 0), maybe))
            self._post_unposted(feed)

    def _post_unposted(self, feed: _Feed) -> bool:
        """Post unposted rows (payloads resolved now) while fewer than ``max_in_flight`` are in
        flight; return whether anything was posted."""
        posted = False
        while feed.unposted and feed.in_flight < self._max_in_flight and feed.key in self._feeds:
            room = min(self._max_in_flight - feed.in_flight, _POST_CHUNK)
            part = [feed.unposted.popleft() for _ in range(min(room, len(feed.unposted)))]
            if feed.partitions is not None:  # (a partition given up since these were read)
                owned = feed.partitions
                part = [p for p in part if p[0] >> layout.PARTITION_BITS in owned]
            found = self._resolve(feed, [seq for seq, *_ in part])
            rows = [
                Row(feed.topic, seq, message, expires, failures, maybe_delivered, message_id, published_ms)
                for seq, expires, message_id, published_ms, failures, maybe_delivered in part
                if (message := found.get(seq)) is not None
            ]
            if rows:
                feed.in_flight += len(rows)
                self._post(feed.key, feed.watch, rows)
                posted = True
        return posted

    def _resolve(self, feed: _Feed, seqs: list[int]) -> dict[int, bytes]:
        """The payloads of ``seqs`` of the feed's topic: read ahead before, cached, else read from
        the topic table; a seq the topic lacks is logged and left out.

        A read from the table also takes the payloads of the next :data:`_READ_AHEAD` unposted
        rows found in the same row groups (up to :data:`_READ_AHEAD_BYTES`), kept for the next
        chunks: a publish commit holds a few hundred messages, so a chunk's rows and the next
        chunk's share a file, which was read (and decoded) once per chunk."""
        topic = feed.topic
        ahead = feed.ahead
        found: dict[int, bytes] = {}
        missing = []
        for seq in seqs:
            data = ahead.pop(seq, None)
            if data is None:
                data = self._cache.get(topic, seq)
            if data is None:
                missing.append(seq)
            else:
                found[seq] = data
        if missing:
            upcoming = [row[0] for row in itertools.islice(feed.unposted, _READ_AHEAD)]
            read = read_messages(self._index(topic), missing, upcoming)
            for seq in missing:
                data = read.pop(seq, None)
                if data is not None:
                    found[seq] = data
            # What was read ahead before and not asked for since is not kept: rows come in seq
            # order, so it will not be (a rewind reads the table again).
            feed.ahead = kept = {}
            room = _READ_AHEAD_BYTES
            for seq, data in read.items():
                room -= len(data)
                if room < 0:
                    break
                kept[seq] = data
            lost = [s for s in missing if s not in found]
            if lost:
                log.error("topic %s has no message for seq %s; skipping", topic, lost[:10])
        return found


