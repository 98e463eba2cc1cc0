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
  nothing and holds nothing back; a row is outstanding on at most one link. What a settlement
  does is decided by :func:`sharedsub.outcomes.decide` (accepted → acknowledged; released and
  modified → back to the front of the queue; rejected, or too many failed deliveries → the
  dead-letter table); the unsettled rows of a link that goes away count as failed deliveries.
  A row past its expiry is not sent but acknowledged as ``expired``.

  modified(undeliverable-here) parks the row for the links that refused it: it goes to any other
  consumer link of the subscription on this front end. When every current link refused it, it
  waits for another link to attach (or for a refusing link to go away, which lifts its
  refusal); it never returns to a link that said undeliverable-here while that link lives.
  Add delivery-failed to the outcome (as Qpid JMS does after its client-side maxRedeliveries)
  to make such refusals count towards ``max_delivery_count``.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import proton

from sharedsub import metrics, outcomes
from sharedsub.acklog import ack_state_of
from sharedsub.outcomes import Ack, AckOutcome, DeadLetter, Limits, Requeue, Settlement
from sharedsub.payloads import PayloadCache
from sharedsub.storage import delta, layout

from connectors.amqp.translate import with_delivery_count

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class Row:
    """One routed message ready to send."""

    topic: str
    seq: int
    message: bytes
    expires_at: int | None = None  # ms since the epoch (sharedsub.outcomes.expires_at)
    failures: int = 0  # failed deliveries recorded in the ack log when the row was read
    # Loaded after an unclean stop (SIGKILL, power loss) of the previous front end: it may have
    # been sent then without any trace in the ack log, so it goes out marked redelivered.
    maybe_delivered: bool = False
    message_id: str | None = None


# Columns of a subscription table the tailer reads (never the payload, which is in the topic).
_ROW_COLUMNS = ["seq", "ttl", "absolute_expiry_time", "published_at", "message_id"]


@dataclasses.dataclass(slots=True)
class _Feed:
    key: str
    table: str
    topic: str
    acked: set[int]
    ack_table: str | None
    next_version: int = -1  # -1: the backlog snapshot is not loaded yet
    in_flight: int = 0  # posted to the reactor, not yet sent (updated by both threads; approximate)
    rewind: bool = False  # set by :meth:`Tailer.rewind`: load the backlog snapshot again
    # Rows read but not posted yet, in seq order: (seq, expires_at, message_id, failures,
    # maybe_delivered). A large backlog waits here, without payloads, until the reactor has sent
    # enough of what was posted (``max_in_flight``); new commits are read only once it is empty.
    unposted: collections.deque[tuple[int, int | None, str | None, int, bool]] = dataclasses.field(
        default_factory=collections.deque
    )


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
        after_unclean_stop: bool = False,
    ) -> None:
        self.root = root
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

    def forget_topic(self, topic: str) -> None:
        """``topic`` was dropped: its table index is stale (any thread)."""
        self._indexes.pop(topic, None)

    def rewind(self, key: str) -> bool:
        """Load ``key``'s backlog again (snapshot minus what the ack log settles) before its next
        new commit: a replay (connectors/amqp/replays.py) opened settled messages again. Rows
        already waiting or outstanding are not queued twice (:meth:`Dispatcher.offer`). Returns
        False when ``key`` is not tailed here (its backlog is loaded when a consumer attaches)."""
        with self._lock:
            feed = self._feeds.get(key)
            if feed is None:
                return False
            feed.rewind = True
        self._wake.set()
        return True

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
        if feed.rewind:
            feed.unposted.clear()
        if feed.in_flight >= self._max_in_flight:
            return False
        if feed.next_version < 0 or feed.rewind:
            feed.rewind = False
            return self._load_backlog(feed)
        if feed.unposted:
            return self._post_unposted(feed)
        commit = delta.read_commit(feed.table, feed.next_version)
        if commit is None:
            return False
        data = delta.read_files(commit.added, _ROW_COLUMNS)
        feed.next_version = commit.version + 1
        self._emit(feed, data, {})
        return True

    def _load_backlog(self, feed: _Feed) -> bool:
        failures: dict[int, int] = {}
        if feed.ack_table is not None and delta.table_exists(feed.ack_table):
            state = ack_state_of(delta.read_table(feed.ack_table, ["seq", "outcome"]))
            feed.acked.update(state.settled)
            failures = state.delivery_counts
        version = delta.latest_version(feed.table)
        if version < 0:
            feed.next_version = 0
            return False
        data = delta.read_files(delta.snapshot_files(feed.table, version), _ROW_COLUMNS)
        feed.next_version = version + 1
        first = feed.table not in self._first_loads
        self._first_loads.add(feed.table)
        self._emit(feed, data, failures, maybe_delivered=self._after_unclean_stop and first)
        return True

    def _emit(self, feed: _Feed, data: Any, failures: dict[int, int], *, maybe_delivered: bool = False) -> None:
        """Queue the not-acknowledged rows of ``data`` (subscription-table columns) in seq order and
        post as many as ``max_in_flight`` allows (the rest on later polls)."""
        if data is None:
            return
        meta: dict[int, tuple[int | None, str | None]] = {}
        columns = (data.column(c).to_pylist() for c in _ROW_COLUMNS)
        for seq, ttl, absolute, published, message_id in zip(*columns, strict=True):
            if seq in feed.acked:
                continue
            published_ms = int(published.timestamp() * 1000) if published is not None else None
            meta[seq] = (outcomes.expires_at(ttl, absolute, published_ms), message_id)
        for seq in sorted(meta):
            feed.unposted.append((seq, *meta[seq], failures.get(seq, 0), maybe_delivered))
        self._post_unposted(feed)

    def _post_unposted(self, feed: _Feed) -> bool:
        """Post unposted rows (payloads resolved now) while fewer than ``max_in_flight`` are in
        flight; return whether anything was posted."""
        posted = False
        while feed.unposted and feed.in_flight < self._max_in_flight and feed.key in self._feeds:
            room = self._max_in_flight - feed.in_flight
            part = [feed.unposted.popleft() for _ in range(min(room, len(feed.unposted)))]
            extra = {seq: rest for seq, *rest in part}
            rows = [
                dataclasses.replace(
                    r,
                    expires_at=extra[r.seq][0],
                    message_id=extra[r.seq][1],
                    failures=extra[r.seq][2],
                    maybe_delivered=extra[r.seq][3],
                )
                for r in self._resolve(feed.topic, [seq for seq, *_ in part])
            ]
            if rows:
                feed.in_flight += len(rows)
                self._post(feed.key, rows)
                posted = True
        return posted

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
"""``on_ack(key, seq, outcome, consumer_container)``: a row was settled for good, or (outcome
``failed``) one delivery of it failed; see sharedsub.outcomes.AckOutcome."""

DeadLetterCallback = Callable[[str, Row, DeadLetter, proton.Condition | None, str], None]
"""``on_dead_letter(key, row, decision, error, consumer_container)``: move a row to the dead-letter table."""


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclasses.dataclass(slots=True)
class _Subscription:
    consumers: list[proton.Sender] = dataclasses.field(default_factory=list)
    pending: collections.deque[Row] = dataclasses.field(default_factory=collections.deque)
    # Rows refused with undeliverable-here, waiting for a link that did not refuse them.
    parked: list[Row] = dataclasses.field(default_factory=list)
    excluded: dict[int, set[int]] = dataclasses.field(default_factory=dict)  # seq -> consumer ids
    outstanding: dict[int, tuple[proton.Sender, Row]] = dataclasses.field(default_factory=dict)
    acked: set[int] = dataclasses.field(default_factory=set)
    failures: dict[int, int] = dataclasses.field(default_factory=dict)  # seq -> failed deliveries
    acquired: set[int] = dataclasses.field(default_factory=set)  # seqs sent before, not settled for good
    maybe_delivered: set[int] = dataclasses.field(default_factory=set)  # see Row.maybe_delivered
    cursor: int = 0


class Dispatcher:
    """Round-robin dispatch of pending rows over consumer links with credit (reactor thread)."""

    def __init__(
        self,
        on_sent: Callable[[str, int], None],
        on_ack: AckCallback,
        on_dead_letter: DeadLetterCallback,
        *,
        limits: Limits = Limits(),
        clock: Callable[[], int] = _now_ms,
        counters: metrics.Counters | None = None,
    ) -> None:
        self._subs: dict[str, _Subscription] = {}
        self._counters = counters if counters is not None else metrics.Counters()
        self._on_sent = on_sent
        self._on_ack = on_ack
        self._on_dead_letter = on_dead_letter
        self._limits = limits
        self._clock = clock
        self._tag = 0
        self._next_consumer = 0
        self._stopped = False

    def open(self, key: str, acked: set[int], failures: dict[int, int]) -> None:
        """Make ``key`` dispatchable; ``acked`` (acknowledged seqs) and ``failures`` (failed
        deliveries per seq, the AMQP delivery-count) are live and outlive idle periods."""
        if key not in self._subs:
            self._subs[key] = _Subscription(acked=acked, failures=failures)

    def add_consumer(self, key: str, link: proton.Sender) -> None:
        """Attach a consumer link to subscription ``key`` (opened before)."""
        self._next_consumer += 1
        link.ss_consumer_id = self._next_consumer
        self._subs[key].consumers.append(link)
        self.dispatch(key)

    def remove_consumer(self, key: str, link: proton.Sender) -> int:
        """Detach a consumer link, returning its unsettled rows to the queue; return consumers left.

        Its unsettled deliveries failed (DESIGN §5): each is requeued with its delivery count + 1,
        or dead-lettered at ``max_delivery_count``. Its undeliverable-here refusals are lifted.
        """
        sub = self._subs.get(key)
        if sub is None:
            return 0
        sub.consumers = [c for c in sub.consumers if c != link]
        gone = getattr(link, "ss_consumer_id", None)
        back = sorted((row for lk, row in sub.outstanding.values() if lk == link), key=lambda r: r.seq)
        for row in back:
            del sub.outstanding[row.seq]
        unparked = []
        for row in sub.parked:
            refused = sub.excluded.get(row.seq, set())
            refused.discard(gone)  # type: ignore[arg-type]
            if not refused:
                sub.excluded.pop(row.seq, None)
                unparked.append(row)
        if unparked:
            sub.parked = [r for r in sub.parked if r.seq in sub.excluded]
        container = link.connection.remote_container or ""
        for row in reversed(back):
            decision = outcomes.decide(Settlement.LINK_LOST, sub.failures.get(row.seq, 0), self._limits)
            self._apply(key, sub, row, decision, None, None, container)
        sub.pending.extendleft(sorted(unparked, key=lambda r: r.seq, reverse=True))
        if back or unparked:
            self.dispatch(key)
        return len(sub.consumers)

    def fail_outstanding(self) -> None:
        """Shutting down: every unsettled delivery failed (recorded now, while the ack log can
        still be written), and nothing more is sent."""
        self._stopped = True
        for key, sub in self._subs.items():
            for link, row in sorted(sub.outstanding.values(), key=lambda lr: -lr[1].seq):
                container = link.connection.remote_container or ""
                decision = outcomes.decide(Settlement.LINK_LOST, sub.failures.get(row.seq, 0), self._limits)
                self._apply(key, sub, row, decision, None, None, container)
            sub.outstanding.clear()

    def consumers(self, key: str) -> int:
        """Number of consumer links on ``key``."""
        sub = self._subs.get(key)
        return len(sub.consumers) if sub else 0

    def drop(self, key: str) -> None:
        """Forget a subscription and its pending rows (they stay in the table unless acknowledged)."""
        self._subs.pop(key, None)

    def offer(self, key: str, rows: list[Row]) -> None:
        """Queue rows read by the tailer and dispatch what credit allows.

        A row that is acknowledged, outstanding, parked or already waiting is not queued (a
        backlog loaded again after a replay repeats rows that are open); the skipped ones count
        as sent for the tailer's in-flight bound. A row older than the newest waiting one (a
        replay's) is queued in seq order.
        """
        sub = self._subs.get(key)
        if sub is None:
            return
        parked = {r.seq for r in sub.parked}
        tail = sub.pending[-1].seq if sub.pending else None
        waiting = {r.seq for r in sub.pending} if tail is not None and rows and rows[0].seq <= tail else set()
        skipped = 0
        unordered = False
        for row in rows:
            if row.seq in sub.acked or row.seq in sub.outstanding or row.seq in parked or row.seq in waiting:
                skipped += 1
                continue
            if row.failures > sub.failures.get(row.seq, 0):  # counted before a restart, or a replay
                sub.failures[row.seq] = row.failures
            if row.maybe_delivered:
                sub.maybe_delivered.add(row.seq)
            unordered |= tail is not None and row.seq < tail
            sub.pending.append(row)
        if unordered:
            sub.pending = collections.deque(sorted(sub.pending, key=lambda r: r.seq))
        if skipped:
            self._on_sent(key, skipped)
        self.dispatch(key)

    def dispatch(self, key: str) -> None:
        """Send pending (and parked) rows of ``key`` round-robin to links with credit."""
        sub = self._subs.get(key)
        if self._stopped or sub is None or not (sub.pending or sub.parked) or not sub.consumers:
            return
        sent = 0
        n = len(sub.consumers)
        idle = 0
        now = self._clock()
        while (sub.pending or sub.parked) and idle < n:
            link = sub.consumers[sub.cursor % n]
            sub.cursor = (sub.cursor + 1) % n
            if link.credit <= 0 or not (link.state & proton.Endpoint.LOCAL_ACTIVE):
                idle += 1
                continue
            row = self._take(sub, link)
            if row is None:
                idle += 1
                continue
            idle = 0
            if row.seq in sub.acked:
                continue
            if outcomes.is_expired(row.expires_at, now):
                self._settle_for_good(key, sub, row, AckOutcome.EXPIRED, "")
                continue
            self._send(link, key, sub, row)
            sent += 1
        if sent:
            self._on_sent(key, sent)

    def _take(self, sub: _Subscription, link: proton.Sender) -> Row | None:
        """Next row for ``link``: a parked row it did not refuse, else the head of the queue."""
        me = getattr(link, "ss_consumer_id", None)
        for i, row in enumerate(sub.parked):
            if me not in sub.excluded.get(row.seq, ()):
                del sub.parked[i]
                sub.excluded.pop(row.seq, None)
                return row
        return sub.pending.popleft() if sub.pending else None

    def _send(self, link: proton.Sender, key: str, sub: _Subscription, row: Row) -> None:
        self._tag += 1
        dlv = link.delivery(str(self._tag))
        dlv.ss_row = (key, row)
        count = sub.failures.get(row.seq, 0)
        if row.seq in sub.maybe_delivered:
            count = max(count, 1)  # delivery-count > 0 is what makes JMSRedelivered true
        self._counters.inc(metrics.DELIVERED, row.topic, key)
        if count or row.seq in sub.acquired:
            self._counters.inc(metrics.REDELIVERED, row.topic, key)
        # A row sent before (and not settled for good) may have been acquired by another link:
        # first-acquirer false, whatever the count (a released one keeps count 0).
        link.send(with_delivery_count(row.message, count) if count or row.seq in sub.acquired else row.message)
        link.advance()
        if link.snd_settle_mode == proton.Link.SND_SETTLED:
            # At-most-once consumer: settled on sending, acknowledged at once.
            dlv.settle()
            self._settle_for_good(key, sub, row, AckOutcome.ACCEPTED, link.connection.remote_container or "")
        else:
            sub.outstanding[row.seq] = (link, row)
            sub.acquired.add(row.seq)

    def _settle_for_good(self, key: str, sub: _Subscription, row: Row, outcome: AckOutcome, consumer: str) -> None:
        sub.acked.add(row.seq)
        sub.failures.pop(row.seq, None)
        sub.acquired.discard(row.seq)
        sub.maybe_delivered.discard(row.seq)
        if outcome in (AckOutcome.ACCEPTED, AckOutcome.EXPIRED):
            name = metrics.ACKNOWLEDGED if outcome == AckOutcome.ACCEPTED else metrics.EXPIRED
            self._counters.inc(name, row.topic, key)
        self._on_ack(key, row.seq, outcome, consumer)

    def _apply(
        self,
        key: str,
        sub: _Subscription,
        row: Row,
        decision: outcomes.Decision,
        link: proton.Sender | None,
        error: proton.Condition | None,
        consumer: str,
    ) -> None:
        """Carry out a settlement decision for ``row`` (no longer outstanding)."""
        match decision:
            case Ack(outcome=outcome):
                self._settle_for_good(key, sub, row, outcome, consumer)
            case DeadLetter():
                sub.acked.add(row.seq)
                sub.failures.pop(row.seq, None)
                sub.acquired.discard(row.seq)
                self._counters.inc(metrics.DEAD_LETTERED, row.topic, key)
                self._on_dead_letter(key, row, decision, error, consumer)
            case Requeue(delivery_count=count, exclude_link=exclude, failed=failed):
                if count:
                    sub.failures[row.seq] = count
                if failed:
                    self._on_ack(key, row.seq, AckOutcome.FAILED, consumer)
                if exclude and link is not None:
                    sub.excluded.setdefault(row.seq, set()).add(link.ss_consumer_id)
                    sub.parked.append(row)
                else:
                    sub.pending.appendleft(row)

    def settled(self, dlv: proton.Delivery) -> None:
        """A consumer's disposition: decide (sharedsub.outcomes) and apply."""
        key, row = getattr(dlv, "ss_row", (None, None))
        state = dlv.remote_state
        terminal = (proton.Delivery.ACCEPTED, proton.Delivery.REJECTED, proton.Delivery.RELEASED, proton.Delivery.MODIFIED)
        if state not in terminal and not dlv.settled:
            return  # e.g. a received state: not an outcome yet
        dlv.settle()
        if key is None:
            return
        sub = self._subs.get(key)
        if sub is None or sub.outstanding.pop(row.seq, None) is None:
            return
        link = dlv.link
        count = sub.failures.get(row.seq, 0)
        error = None
        if state == proton.Delivery.RELEASED:
            decision = outcomes.decide(Settlement.RELEASED, count, self._limits)
        elif state == proton.Delivery.MODIFIED:
            decision = outcomes.decide(
                Settlement.MODIFIED,
                count,
                self._limits,
                delivery_failed=bool(dlv.remote.failed),
                undeliverable_here=bool(dlv.remote.undeliverable),
            )
        elif state == proton.Delivery.REJECTED:
            error = dlv.remote.condition
            decision = outcomes.decide(Settlement.REJECTED, count, self._limits)
        else:  # accepted, or settled with no outcome
            decision = outcomes.decide(Settlement.ACCEPTED, count, self._limits)
        self._apply(key, sub, row, decision, link, error, link.connection.remote_container or "")
        if isinstance(decision, Requeue):
            self.dispatch(key)
