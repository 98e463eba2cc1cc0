"""Delivery: tail subscription tables and hand their rows to consumer links.

Two halves:

* :class:`Tailer` (its own thread, does the I/O): for every subscription with consumers on this
  front end it probes the generation table's Delta log for new commits, reads the new rows
  (references ``(topic, seq)``), resolves each payload from the :class:`PayloadCache` or the topic
  table, and posts ``(key, rows)`` to the reactor. It keeps at most ``max_in_flight`` rows per
  subscription posted but not yet dispatched, so a slow consumer bounds memory.
* :class:`Dispatcher` (reactor thread, no I/O): per subscription a queue of pending rows and the
  consumer links; rows go round-robin to the links that have credit; a link with no credit gets
  nothing and holds nothing back. Released / modified deliveries go back to the front of the queue.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading

from collections.abc import Callable

import proton

from sharedsub.payloads import PayloadCache
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
    next_version: int = 0
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
        max_in_flight: int = 5000,
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

    def watch(self, key: str, table_rel: str, topic: str, *, from_version: int = 0) -> None:
        """Start tailing a subscription generation table (idempotent)."""
        with self._lock:
            if key not in self._feeds:
                self._feeds[key] = _Feed(key, layout.join(self.root, table_rel), topic, from_version)
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
        commit = delta.read_commit(feed.table, feed.next_version)
        if commit is None:
            return False
        data = delta.read_files(commit.added, ["seq"])
        seqs = sorted(data.column("seq").to_pylist()) if data is not None else []
        rows = self._resolve(feed.topic, seqs)
        feed.next_version = commit.version + 1
        if rows:
            feed.in_flight += len(rows)
            if feed.key in self._feeds:
                self._post(feed.key, rows)
        return True

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


@dataclasses.dataclass(slots=True)
class _Subscription:
    consumers: list[proton.Sender] = dataclasses.field(default_factory=list)
    pending: collections.deque[Row] = dataclasses.field(default_factory=collections.deque)
    cursor: int = 0


class Dispatcher:
    """Round-robin dispatch of pending rows over consumer links with credit (reactor thread)."""

    def __init__(self, on_sent: Callable[[str, int], None]) -> None:
        self._subs: dict[str, _Subscription] = {}
        self._on_sent = on_sent
        self._tag = 0
        self.delivered = 0

    def add_consumer(self, key: str, link: proton.Sender) -> None:
        """Attach a consumer link to subscription ``key``."""
        self._subs.setdefault(key, _Subscription()).consumers.append(link)
        self.dispatch(key)

    def remove_consumer(self, key: str, link: proton.Sender) -> int:
        """Detach a consumer link; return how many consumers remain."""
        sub = self._subs.get(key)
        if sub is None:
            return 0
        sub.consumers = [c for c in sub.consumers if c != link]
        return len(sub.consumers)

    def consumers(self, key: str) -> int:
        """Number of consumer links on ``key``."""
        sub = self._subs.get(key)
        return len(sub.consumers) if sub else 0

    def drop(self, key: str) -> None:
        """Forget a subscription and its pending rows."""
        self._subs.pop(key, None)

    def offer(self, key: str, rows: list[Row]) -> None:
        """Queue rows read by the tailer and dispatch what credit allows."""
        sub = self._subs.get(key)
        if sub is None:
            return
        sub.pending.extend(rows)
        self.dispatch(key)

    def requeue(self, key: str, row: Row) -> None:
        """Put a released / modified row back at the front."""
        sub = self._subs.get(key)
        if sub is None:
            return
        sub.pending.appendleft(row)
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
            self._send(link, key, row)
            sent += 1
        if sent:
            self.delivered += sent
            self._on_sent(key, sent)

    def _send(self, link: proton.Sender, key: str, row: Row) -> None:
        self._tag += 1
        dlv = link.delivery(str(self._tag))
        dlv.ss_row = (key, row)
        link.send(row.message)
        link.advance()
        if link.snd_settle_mode == proton.Link.SND_SETTLED:
            dlv.settle()


