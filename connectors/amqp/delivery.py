"""Delivery: tail subscription tables and hand their rows to consumer links.

Two halves:

* :class:`Tailer` (its own thread, does the I/O): for every subscription with consumers on this
  front end it first loads the generation table's current snapshot minus the acknowledged rows
  (its backlog), then probes the Delta log for new commits, reads the new rows (references
  ``(topic, seq)``), resolves each payload from the :class:`PayloadCache` or the topic table, and
  posts ``(key, rows)`` to the reactor. At most ``max_in_flight`` rows per subscription are posted
  but not yet sent, so a slow consumer bounds memory.
* :class:`Dispatcher` (reactor thread, no I/O): per subscription a queue of pending rows and the
  consumer links; rows go round-robin to the links that have credit; a link with no credit gets
  nothing and holds nothing back; a row is outstanding on at most one link. Accepted and rejected
  rows are acknowledged (reported to ``on_ack``); released and modified rows, and the unsettled
  rows of a link that goes away, return to the front of the queue.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
from collections.abc import Callable

import proton

from sharedsub.payloads import PayloadCache

from connectors.amqp.translate import with_delivery_count
from sharedsub.storage import delta, layout

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class Row:
    """One routed message ready to send."""

    topic: str
    seq: int
    message: bytes


@dataclasses.dataclass(slots=True)
class _Feed:
    key: str
    table: str
    topic: str
    acked: set[int]
    ack_table: str | None
    next_version: int = -1  # -1: the backlog snapshot is not loaded yet
    in_flight: int = 0  # posted to the reactor, not yet sent (updated by both threads; approximate)


class Tailer:
    """Background reader of subscription tables (see module docstring)."""

    def __init__(
        self,
        root: str,
        cache: PayloadCache,
        post: Callable[[str, list[Row]], None],
        *,
        poll_interval: float = 0.005,
        max_in_flight: int = 2000,
    ) -> None:
        self.root = root
        self._cache = cache
        self._post = post
        self._poll = poll_interval
        self._max_in_flight = max_in_flight
        self._feeds: dict[str, _Feed] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._indexes: dict[str, delta.TopicIndex] = {}
        self._thread = threading.Thread(target=self._run, name="sharedsub-tailer", daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread."""
        self._stop.set()
        self._wake.set()
        self._thread.join(10)

    def watch(self, key: str, table_rel: str, topic: str, *, acked: set[int], ack_table_rel: str | None) -> None:
        """Start delivering a subscription generation's backlog and new rows (idempotent).

        ``acked`` is the live set of acknowledged seqs (the reactor adds to it); rows in it are
        never posted. ``ack_table_rel``, when given, is read once to complete that set.
        """
        with self._lock:
            if key not in self._feeds:
                ack_table = layout.join(self.root, ack_table_rel) if ack_table_rel else None
                self._feeds[key] = _Feed(key, layout.join(self.root, table_rel), topic, acked, ack_table)
        self._wake.set()

    def unwatch(self, key: str) -> None:
        """Stop tailing a subscription."""
        with self._lock:
            self._feeds.pop(key, None)

    def sent(self, key: str, count: int) -> None:
        """Reactor reports ``count`` rows of ``key`` left its queue (frees in-flight room)."""
        feed = self._feeds.get(key)
        if feed is not None:
            feed.in_flight = max(0, feed.in_flight - count)
            if feed.in_flight < self._max_in_flight // 2:
                self._wake.set()

    # ------------------------------------------------------------------ thread

    def _run(self) -> None:
        while not self._stop.is_set():
            busy = False
            with self._lock:
                feeds = list(self._feeds.values())
            for feed in feeds:
                try:
                    busy |= self._poll_feed(feed)
                except Exception:
                    log.exception("reading subscription table %s failed", feed.table)
            if not busy:
                self._wake.wait(self._poll)
                self._wake.clear()

    def _poll_feed(self, feed: _Feed) -> bool:
        if feed.in_flight >= self._max_in_flight:
            return False
        if feed.next_version < 0:
            return self._load_backlog(feed)
        commit = delta.read_commit(feed.table, feed.next_version)
        if commit is None:
            return False
        data = delta.read_files(commit.added, ["seq"])
        feed.next_version = commit.version + 1
        self._emit(feed, data.column("seq").to_pylist() if data is not None else [])
        return True

    def _load_backlog(self, feed: _Feed) -> bool:
        if feed.ack_table is not None and delta.table_exists(feed.ack_table):
            acks = delta.read_table(feed.ack_table, ["seq"])
            if acks is not None:
                feed.acked.update(acks.column("seq").to_pylist())
        version = delta.latest_version(feed.table)
        if version < 0:
            feed.next_version = 0
            return False
        data = delta.read_files(delta.snapshot_files(feed.table, version), ["seq"])
        feed.next_version = version + 1
        self._emit(feed, data.column("seq").to_pylist() if data is not None else [])
        return True

    def _emit(self, feed: _Feed, seqs: list[int]) -> None:
        wanted = sorted(s for s in seqs if s not in feed.acked)
        # Large backlogs go out in slices so one subscription cannot fill memory.
        for start in range(0, len(wanted), self._max_in_flight):
            part = wanted[start : start + self._max_in_flight]
            rows = self._resolve(feed.topic, part)
            if rows and feed.key in self._feeds:
                feed.in_flight += len(rows)
                self._post(feed.key, rows)

    def _resolve(self, topic: str, seqs: list[int]) -> list[Row]:
        found: dict[int, bytes] = {}
        missing = []
        for seq in seqs:
            data = self._cache.get(topic, seq)
            if data is None:
                missing.append(seq)
            else:
                found[seq] = data
        if missing:
            index = self._indexes.get(topic)
            if index is None:
                index = self._indexes[topic] = delta.TopicIndex(layout.topic_table(self.root, topic))
            found.update(delta.read_messages(index, missing))
            lost = [s for s in missing if s not in found]
            if lost:
                log.error("topic %s has no message for seq %s; skipping", topic, lost[:10])
        return [Row(topic, s, found[s]) for s in seqs if s in found]


AckCallback = Callable[[str, int, str, str], None]
"""``on_ack(key, seq, outcome, consumer_container)``: a row was settled for good."""


@dataclasses.dataclass(slots=True)
class _Subscription:
    consumers: list[proton.Sender] = dataclasses.field(default_factory=list)
    pending: collections.deque[Row] = dataclasses.field(default_factory=collections.deque)
    outstanding: dict[int, tuple[proton.Sender, Row]] = dataclasses.field(default_factory=dict)
    acked: set[int] = dataclasses.field(default_factory=set)
    failures: dict[int, int] = dataclasses.field(default_factory=dict)  # seq -> failed deliveries
    cursor: int = 0


class Dispatcher:
    """Round-robin dispatch of pending rows over consumer links with credit (reactor thread)."""

    def __init__(self, on_sent: Callable[[str, int], None], on_ack: AckCallback) -> None:
        self._subs: dict[str, _Subscription] = {}
        self._on_sent = on_sent
        self._on_ack = on_ack
        self._tag = 0

    def open(self, key: str, acked: set[int], failures: dict[int, int]) -> None:
        """Make ``key`` dispatchable; ``acked`` (acknowledged seqs) and ``failures`` (failed
        deliveries per seq, the AMQP delivery-count) are live and outlive idle periods."""
        if key not in self._subs:
            self._subs[key] = _Subscription(acked=acked, failures=failures)

    def add_consumer(self, key: str, link: proton.Sender) -> None:
        """Attach a consumer link to subscription ``key`` (opened before)."""
        self._subs[key].consumers.append(link)
        self.dispatch(key)

    def remove_consumer(self, key: str, link: proton.Sender) -> int:
        """Detach a consumer link, returning its unsettled rows to the queue; return consumers left."""
        sub = self._subs.get(key)
        if sub is None:
            return 0
        sub.consumers = [c for c in sub.consumers if c != link]
        back = sorted((row for lk, row in sub.outstanding.values() if lk == link), key=lambda r: r.seq)
        for row in back:
            del sub.outstanding[row.seq]
        # Unsettled deliveries of a link that went away count as failed (DESIGN §5).
        for row in back:
            sub.failures[row.seq] = sub.failures.get(row.seq, 0) + 1
        sub.pending.extendleft(reversed(back))
        if back:
            self.dispatch(key)
        return len(sub.consumers)

    def consumers(self, key: str) -> int:
        """Number of consumer links on ``key``."""
        sub = self._subs.get(key)
        return len(sub.consumers) if sub else 0

    def drop(self, key: str) -> None:
        """Forget a subscription and its pending rows (they stay in the table unless acknowledged)."""
        self._subs.pop(key, None)

    def offer(self, key: str, rows: list[Row]) -> None:
        """Queue rows read by the tailer and dispatch what credit allows."""
        sub = self._subs.get(key)
        if sub is None:
            return
        sub.pending.extend(r for r in rows if r.seq not in sub.acked and r.seq not in sub.outstanding)
        self.dispatch(key)

    def dispatch(self, key: str) -> None:
        """Send pending rows of ``key`` round-robin to links with credit."""
        sub = self._subs.get(key)
        if sub is None or not sub.pending or not sub.consumers:
            return
        sent = 0
        n = len(sub.consumers)
        idle = 0
        while sub.pending and idle < n:
            link = sub.consumers[sub.cursor % n]
            sub.cursor = (sub.cursor + 1) % n
            if link.credit <= 0 or not (link.state & proton.Endpoint.LOCAL_ACTIVE):
                idle += 1
                continue
            idle = 0
            row = sub.pending.popleft()
            if row.seq in sub.acked:
                continue
            self._send(link, key, sub, row)
            sent += 1
        if sent:
            self._on_sent(key, sent)

    def _send(self, link: proton.Sender, key: str, sub: _Subscription, row: Row) -> None:
        self._tag += 1
        dlv = link.delivery(str(self._tag))
        dlv.ss_row = (key, row)
        count = sub.failures.get(row.seq, 0)
        link.send(with_delivery_count(row.message, count) if count else row.message)
        link.advance()
        if link.snd_settle_mode == proton.Link.SND_SETTLED:
            # At-most-once consumer: settled on sending, acknowledged at once.
            dlv.settle()
            self._ack(key, sub, row, "accepted", link)
        else:
            sub.outstanding[row.seq] = (link, row)

    def _ack(self, key: str, sub: _Subscription, row: Row, outcome: str, link: proton.Sender) -> None:
        sub.acked.add(row.seq)
        sub.failures.pop(row.seq, None)
        self._on_ack(key, row.seq, outcome, link.connection.remote_container or "")

    def settled(self, dlv: proton.Delivery) -> None:
        """A consumer's disposition: acknowledge, or put the row back."""
        key, row = getattr(dlv, "ss_row", (None, None))
        dlv.settle()
        if key is None:
            return
        sub = self._subs.get(key)
        if sub is None or sub.outstanding.pop(row.seq, None) is None:
            return
        state = dlv.remote_state
        if state == proton.Delivery.RELEASED:  # not delivered: count unchanged
            sub.pending.appendleft(row)
            self.dispatch(key)
        elif state == proton.Delivery.MODIFIED:
            if dlv.remote.failed:
                sub.failures[row.seq] = sub.failures.get(row.seq, 0) + 1
            sub.pending.appendleft(row)
            self.dispatch(key)
        elif state == proton.Delivery.REJECTED:
            self._ack(key, sub, row, "rejected", dlv.link)
        else:  # accepted, or settled with no outcome
            self._ack(key, sub, row, "accepted", dlv.link)
