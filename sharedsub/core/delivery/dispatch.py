"""Dispatch of one subscription's rows to its consumer links: the rules of docs/design.md §5; pure.

The front end keeps one :class:`SubscriptionDispatch` per subscription with consumers on it,
names each consumer link by an int, turns what happens on the wire into an :data:`Event`, hands
it to :meth:`SubscriptionDispatch.handle` with the current time, and applies the returned
:data:`Effect` values in order (connectors/amqp/dispatcher.py ``Dispatcher``). Nothing here does
I/O or reads a clock; rows are whatever the tailer produced (:class:`Offered` says which of
their fields the rules read) and come back untouched inside the effects.

Credit is the adapter's mirror of link credit: :meth:`SubscriptionDispatch.set_credit` sets it
without effects, a :class:`Credit` event sets it and dispatches, and every :class:`Send` uses
one. An adapter that passes ``credit_of`` to :meth:`SubscriptionDispatch.handle` has every
consumer's credit read from it when a dispatch pass starts, so a pass sees the credit the links
have then (read once per event: the adapter applies the event's sends after it), and an event
that dispatches nothing (an acceptance, the common settlement) reads none.

Events and what they do, first match wins where several could apply:

====  =========================================================  ==============================
 #    event / situation                                           effects
====  =========================================================  ==============================
 1    :class:`Offer` of rows acknowledged, outstanding, parked,   ``CountSent(n)`` for them (the
      waiting, or held by a transaction                           tailer's in-flight bound)
 2    :class:`Offer` of other rows                                queued (rows older than the
                                                                  newest waiting one re-sorted),
                                                                  then a dispatch pass
 3    dispatch pass: rows waiting, consumers with credit          ``Send`` round-robin over the
                                                                  consumers with credit; one
                                                                  without credit is skipped and
                                                                  holds nothing back; then
                                                                  ``CountSent(n)`` for the rows
                                                                  taken for the first time (one
                                                                  given back and sent again was
                                                                  counted when first taken)
 4    ... a parked row, this consumer did not refuse it           it goes before the queue head
 5    ... the row is past its expiry at ``now_ms``                ``Record(expired)``, not sent
                                                                  (counted in ``CountSent``)
 6    ... the consumer is pre-settled (at most once)              ``Send(presettled)`` and
                                                                  ``Record(accepted)``
 7    :class:`Settle` accepted, or settled with no outcome        ``Record(accepted)``
 8    :class:`Settle` released                                    back to the queue head, count
                                                                  unchanged; dispatch
 9    :class:`Settle` modified(delivery-failed)                   ``Record(failed)``, count + 1,
                                                                  back to the queue head; dispatch
10    :class:`Settle` modified(undeliverable-here)                parked: waits for a consumer
                                                                  that did not refuse it; dispatch
11    :class:`Settle` rejected                                    ``DeadLetterRow(rejected)``
12    a failed delivery reaching ``max_delivery_count``           ``DeadLetterRow(max-delivery-
                                                                  count)`` instead of 9/13/17
13    :class:`RemoveConsumer` (detach, session end, connection    each of its outstanding rows:
      lost)                                                       ``Record(failed)``, count + 1,
                                                                  requeued; its refusals lifted
                                                                  (rows no one else refused
                                                                  return to the queue); dispatch
14    :class:`AddConsumer`, :class:`Credit`                       a dispatch pass
15    :class:`SettleTransactional`                                the row leaves "outstanding" and
                                                                  is held by the transaction: not
                                                                  sent again, not requeued when
                                                                  its consumer goes
16    :class:`Discharge` commit                                   each held outcome applied as 7-12;
                                                                  dispatch
17    :class:`Discharge` rollback                                 each held row ``Record(failed)``,
                                                                  count + 1, requeued (or 12);
                                                                  dispatch
18    :class:`Discharge` of a transaction not held here           nothing
19    :class:`Shutdown`                                           every outstanding and held row
                                                                  as 13; nothing is sent again
20    :class:`Drop` (no consumer left)                            consumers and queued rows
                                                                  forgotten (held rows kept)
22    :class:`Release` of topic partitions (another member        their waiting and parked rows
      dispatches them now: sharedsub.core.ownership.              forgotten, unsent
      partition_owners)                                           (``CountSent`` for those never
                                                                  sent); their outstanding and
                                                                  held rows stay until settled
                                                                  (``draining`` counts them)
21    dispatch pass: a row given back (8, 9, 13, 17)             as any waiting row (3): to the
                                                                  consumer the round-robin
                                                                  reaches among those with
                                                                  credit then, whoever held it:
                                                                  one that joined after it was
                                                                  first sent included, and the
                                                                  one that gave it back if it
                                                                  still has credit
23    :class:`SettleAll` (a run of dispositions that came         each settle as its own event
      together)                                                   (7-12), in their order
====  =========================================================  ==============================

Redelivery marking (``Send.first_acquirer``, ``Send.delivery_count``): the count is the row's
failed deliveries; a row loaded after an unclean stop (``maybe_delivered``) goes out with at
least 1 without that counting towards the limit; a row sent before and not settled for good
(released, refused, requeued) goes out with first-acquirer false, whatever its count.

Memory: the acknowledged seqs (:class:`sharedsub.core.delivery.acked_seqs.AckedSeqs`) are kept bounded here.
The tailer offers each topic partition's rows in seq order (only a replay's rewind or a consumer
coming back after a :class:`Drop` offers older ones, and those are unsettled rows: reopened, or
forgotten by the drop), so a row not offered yet has a higher seq than every row of its
partition offered so far; all of this is per partition (rows of several partitions interleave). Whenever the
explicit acknowledged seqs have doubled since the last time, the floor is raised to just below
the lowest row that may still be open: waiting, parked, outstanding, held by a transaction, or
not offered yet. A drop first raises it to below the rows it forgets, then stops it there until
they are offered again.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Generic, Protocol, TypeAlias, TypeVar

from sharedsub.core import layout
from sharedsub.core.delivery import outcomes
from sharedsub.core.delivery.acked_seqs import AckedSeqs
from sharedsub.core.delivery.outcomes import AckOutcome, DeadLetterReason, Limits, Requeue, Settlement
from sharedsub.core.value_type import value_type


class Offered(Protocol):
    """What the rules read of a row (sharedsub.runtime.tailer.Row has these and more)."""

    @property
    def seq(self) -> int:
        """The row's seq: its position in the topic, the order rows are dispatched in."""

    @property
    def expires_at(self) -> int | None:
        """When the row expires, in ms since the epoch; None: never."""

    @property
    def failures(self) -> int:
        """Failed deliveries the ack log held when the row was read."""

    @property
    def maybe_delivered(self) -> bool:
        """Loaded after an unclean stop: the row may have been sent already."""


R = TypeVar("R", bound=Offered)
"""A row, as the tailer produced it (sharedsub.runtime.tailer.Row): handed back untouched in the effects."""
E = TypeVar("E")
"""A rejected outcome's error (the adapter's condition), opaque here: handed back in :class:`DeadLetterRow`."""


# ---------------------------------------------------------------------------------- events


@value_type
class Offer(Generic[R]):
    """Rows read by the tailer, in seq order (a replay's may be older than what waits)."""

    rows: tuple[R, ...]


@value_type
class AddConsumer:
    """A consumer link joined; ``presettled``: it takes messages settled on sending."""

    consumer: int
    credit: int = 0
    presettled: bool = False


@value_type
class RemoveConsumer:
    """A consumer link went away (detach, session end, connection lost)."""

    consumer: int


@value_type
class Credit:
    """The current credit of some consumers (the others keep theirs); then dispatch."""

    credit: Mapping[int, int]


@value_type
class Settle(Generic[E]):
    """``consumer`` settled its delivery of ``seq`` with ``settlement`` (the fields of a
    modified outcome in ``delivery_failed`` / ``undeliverable_here``; ``error``: a rejected
    outcome's condition, opaque here, handed back in :class:`DeadLetterRow`)."""

    consumer: int
    seq: int
    settlement: Settlement
    delivery_failed: bool = False
    undeliverable_here: bool = False
    error: E | None = None


@value_type
class SettleAll(Generic[E]):
    """Several :class:`Settle` events at once, applied in their order with exactly the effects
    they would have one by one (the adapter hands over a run of dispositions that arrived
    together; one event instead of one per message)."""

    settles: tuple[Settle[E], ...]


@value_type
class SettleTransactional(Generic[E]):
    """``settle`` made inside transaction ``txn``: held until :class:`Discharge`."""

    txn: bytes
    settle: Settle[E]


@value_type
class Discharge:
    """Transaction ``txn`` ends: ``commit`` applies its held outcomes, else it rolls back."""

    txn: bytes
    commit: bool


@value_type
class Shutdown:
    """The front end stops: every unsettled delivery failed; nothing more is sent."""


@value_type
class Drop:
    """No consumer is left: forget consumers and queued rows (they stay in the table)."""


@value_type
class Release:
    """Another member dispatches these topic partitions now: forget their rows not sent yet."""

    partitions: frozenset[int]


if TYPE_CHECKING:  # generic in the row and error types; at run time the plain union of the classes
    Event: TypeAlias = (
        Offer[R] | AddConsumer | RemoveConsumer | Credit | Settle[E] | SettleAll[E] | SettleTransactional[E] | Discharge
        | Shutdown | Drop | Release
    )
else:
    Event = (
        Offer | AddConsumer | RemoveConsumer | Credit | Settle | SettleAll | SettleTransactional | Discharge | Shutdown
        | Drop | Release
    )


# ---------------------------------------------------------------------------------- effects


@value_type
class Send(Generic[R]):
    """Send ``row`` to ``consumer``: header delivery-count ``delivery_count``; when
    ``first_acquirer`` is false the header says so (and the count); ``presettled``: settle the
    delivery on sending (a :class:`Record` of ``accepted`` follows)."""

    consumer: int
    row: R
    delivery_count: int
    first_acquirer: bool
    presettled: bool = False


@value_type
class Record(Generic[R]):
    """Record ``outcome`` for ``row`` in the ack log (``failed`` counts a failed delivery;
    the others settle it for good). ``consumer``: whose settlement it was (None: nobody's)."""

    row: R
    outcome: AckOutcome
    consumer: int | None


@value_type
class DeadLetterRow(Generic[R, E]):
    """Move ``row`` to the dead-letter table (never delivered again)."""

    row: R
    reason: DeadLetterReason
    delivery_count: int
    consumer: int | None
    error: E | None = None


@value_type
class CountSent:
    """``count`` rows offered by the tailer left the queue (sent or skipped): in-flight room."""

    count: int


if TYPE_CHECKING:  # as Event
    Effect: TypeAlias = Send[R] | Record[R] | DeadLetterRow[R, E] | CountSent
else:
    Effect = Send | Record | DeadLetterRow | CountSent


# ---------------------------------------------------------------------------------- state


# A seq's topic partition is in its high bits (sharedsub.core.layout, "Partitions").
_PARTITION_BITS = layout.PARTITION_BITS

# Explicit acknowledged seqs a subscription may hold before its floor is first raised.
_ADVANCE_MIN = 1024

# Limits is a frozen dataclass, so one shared instance can be the default of every SubscriptionDispatch.
_DEFAULT_LIMITS = Limits()


@value_type
class _Held(Generic[R, E]):
    """A settlement held by a transaction, with the row it settles."""

    row: R
    settle: Settle[E]


class SubscriptionDispatch(Generic[R, E]):
    """One subscription's dispatch state (see module docstring).

    ``acked`` (acknowledged seqs) and ``failures`` (failed deliveries per seq, the AMQP
    delivery-count) are the caller's live containers: they outlive this object and others
    (the tailer, a replay) read and change them.
    """

    def __init__(self, acked: AckedSeqs, failures: dict[int, int], limits: Limits = _DEFAULT_LIMITS) -> None:
        self.acked = acked
        # Highest seq offered per topic partition (see "Memory" in the module docstring); rows
        # of a partition above its entry are unread. No entry: the partition's floor.
        self._offered_to: dict[int, int] = {}
        self._advance_at = _ADVANCE_MIN
        self.failures = failures
        self.limits = limits
        self._consumers: list[int] = []
        self._credit: dict[int, int] = {}
        self._presettled: set[int] = set()
        self._pending: collections.deque[R] = collections.deque()
        # Rows refused with undeliverable-here, waiting for a consumer that did not refuse them.
        self._parked: list[R] = []
        self._excluded: dict[int, set[int]] = {}  # seq -> consumers that refused it
        self._outstanding: dict[int, tuple[int, R]] = {}  # seq -> (consumer, row)
        self._acquired: set[int] = set()  # seqs sent before, not settled for good
        self._maybe_delivered: set[int] = set()  # see Offered.maybe_delivered
        self._held: dict[bytes, list[_Held[R, E]]] = {}  # txn id -> settlements, in arrival order
        self._cursor = 0
        self._stopped = False
        self._credit_of: Callable[[int], int] | None = None  # during handle() only

    # ------------------------------------------------------------------ views

    @property
    def consumers(self) -> tuple[int, ...]:
        """Consumers, in round-robin order."""
        return tuple(self._consumers)

    @property
    def pending(self) -> tuple[int, ...]:
        """Seqs waiting in the queue, head first."""
        return tuple(r.seq for r in self._pending)

    @property
    def parked(self) -> dict[int, frozenset[int]]:
        """Parked seqs and the consumers that refused each."""
        return {r.seq: frozenset(self._excluded.get(r.seq, ())) for r in self._parked}

    @property
    def outstanding(self) -> dict[int, int]:
        """Seqs sent and not settled, and the consumer holding each."""
        return {seq: consumer for seq, (consumer, _row) in self._outstanding.items()}

    @property
    def held(self) -> dict[bytes, tuple[int, ...]]:
        """Seqs held by each open transaction."""
        return {txn: tuple(h.row.seq for h in rows) for txn, rows in self._held.items()}

    def draining(self, partitions: frozenset[int]) -> int:
        """Rows of ``partitions`` sent or held by a transaction and not settled yet (what a
        member handing those partitions over waits for)."""
        held = (h.row.seq for hs in self._held.values() for h in hs)
        return sum(1 for seq in (*self._outstanding, *held) if seq >> _PARTITION_BITS in partitions)

    def holds_transactions(self) -> bool:
        """True while some transaction holds rows of this subscription."""
        return bool(self._held)

    def credit(self, consumer: int) -> int:
        """The credit this state holds for ``consumer``."""
        return self._credit.get(consumer, 0)

    # ------------------------------------------------------------------ input

    def set_credit(self, consumer: int, credit: int) -> None:
        """Mirror ``consumer``'s link credit (no effects; unknown consumers are ignored)."""
        if consumer in self._credit:
            self._credit[consumer] = credit

    def handle(
        self, event: Event[R, E], now_ms: int, credit_of: Callable[[int], int] | None = None
    ) -> list[Effect[R, E]]:
        """Apply ``event`` at ``now_ms`` (ms since the epoch); return the effects, in order.

        ``credit_of(consumer)``: its link's credit now, read for every consumer when the
        event's first dispatch pass starts (see the module docstring); None: the credit set
        before is used.
        """
        self._credit_of = credit_of
        try:
            return self._handle(event, now_ms)
        finally:
            self._credit_of = None

    def _handle(self, event: Event[R, E], now_ms: int) -> list[Effect[R, E]]:
        out: list[Effect[R, E]] = []
        match event:
            case Offer(rows=rows):
                self._offer(rows, now_ms, out)
            case AddConsumer(consumer=c, credit=credit, presettled=presettled):
                if c not in self._credit:
                    self._consumers.append(c)
                self._credit[c] = credit
                if presettled:
                    self._presettled.add(c)
                self._dispatch(now_ms, out)
            case RemoveConsumer(consumer=c):
                self._remove(c, now_ms, out)
            case Credit(credit=credit):
                for c, n in credit.items():
                    self.set_credit(c, n)
                self._dispatch(now_ms, out)
            case Settle():
                self._settle(event, now_ms, out)
            case SettleAll(settles=settles):
                self._settle_all(settles, now_ms, out)
            case SettleTransactional(txn=txn, settle=settle):
                self._hold(txn, settle)
            case Discharge(txn=txn, commit=commit):
                self._discharge(txn, commit, now_ms, out)
            case Shutdown():
                self._shutdown(out)
            case Release(partitions=partitions):
                self._release(partitions, out)
            case Drop():
                self._drop()
            case _:
                raise TypeError(f"not a dispatch event: {event!r}")
        return out

    # ------------------------------------------------------------------ rules

    def _hold(self, txn: bytes, settle: Settle[E]) -> None:
        """Row 15: the settled row leaves "outstanding", held by ``txn``."""
        entry = self._outstanding.get(settle.seq)
        if entry is not None and entry[0] == settle.consumer:
            del self._outstanding[settle.seq]
            self._held.setdefault(txn, []).append(_Held(entry[1], settle))

    def _drop(self) -> None:
        """Row 20: forget consumers and queued rows (held rows stay)."""
        self._advance()
        # The rows forgotten now come again from the table when a consumer returns, below the
        # highest seq offered: the floor must not pass them before that.
        self._offered_to = {}
        self._consumers.clear()
        self._credit.clear()
        self._presettled.clear()
        self._pending.clear()
        self._parked.clear()
        self._excluded.clear()
        self._outstanding.clear()
        self._acquired.clear()
        self._maybe_delivered.clear()
        self._cursor = 0

    def _offer(self, rows: Iterable[R], now_ms: int, out: list[Effect[R, E]]) -> None:
        rows = list(rows)
        parked = {r.seq for r in self._parked}
        held = {h.row.seq for hs in self._held.values() for h in hs}
        tail = self._pending[-1].seq if self._pending else None
        waiting = {r.seq for r in self._pending} if tail is not None and rows and rows[0].seq <= tail else set()
        skipped = 0
        unordered = False
        for row in rows:
            seq = row.seq
            partition = seq >> _PARTITION_BITS
            if seq > self._offered_to.get(partition, self.acked.floor_of(partition)):
                self._offered_to[partition] = seq
            if seq in self.acked or seq in self._outstanding or seq in parked or seq in waiting or seq in held:
                skipped += 1
                continue
            if row.failures > self.failures.get(seq, 0):  # counted before a restart, or a replay
                self.failures[seq] = row.failures
            if row.maybe_delivered:
                self._maybe_delivered.add(seq)
            unordered |= tail is not None and seq < tail
            self._pending.append(row)
        if unordered:
            self._pending = collections.deque(sorted(self._pending, key=lambda r: r.seq))
        if skipped:
            out.append(CountSent(skipped))
        self._dispatch(now_ms, out)

    def _dispatch(self, now_ms: int, out: list[Effect[R, E]]) -> None:
        """Round-robin pass: rows to consumers with credit until rows or credit run out."""
        if self._stopped or not (self._pending or self._parked) or not self._consumers:
            return
        if self._credit_of is not None:
            # Once per event: the sends of an earlier pass of this event are not on the links
            # yet (the adapter applies them after), only in this state's own count.
            for c in self._consumers:
                self._credit[c] = self._credit_of(c)
            self._credit_of = None
        sent = 0
        n = len(self._consumers)
        idle = 0
        while (self._pending or self._parked) and idle < n:
            consumer = self._consumers[self._cursor % n]
            self._cursor = (self._cursor + 1) % n
            if self._credit.get(consumer, 0) <= 0:
                idle += 1
                continue
            row = self._take(consumer)
            if row is None:
                idle += 1
                continue
            idle = 0
            # Every row taken off the queue leaves the tailer's in-flight window, sent or not:
            # uncounted expired rows would hold that window shut and stall the subscription. A
            # row sent before and given back (released, failed, its link gone, rolled back) left
            # the window when it was first taken: counted again, the window would open wider
            # than max_in_flight with every redelivery.
            if row.seq not in self._acquired:
                sent += 1
            if row.seq in self.acked:
                continue
            if outcomes.is_expired(row.expires_at, now_ms):
                self._settle_for_good(row, AckOutcome.EXPIRED, None, out)
                continue
            self._send(consumer, row, out)
        if sent:
            out.append(CountSent(sent))

    def _take(self, consumer: int) -> R | None:
        """Next row for ``consumer``: a parked row it did not refuse, else the head of the queue.

        Only an undeliverable-here refusal ties a row to consumers: a row given back (row 21)
        goes to whichever consumer with credit the round-robin reaches, so it never waits for
        the link that held it, nor skips one that joined after it was first sent."""
        for i, row in enumerate(self._parked):
            if consumer not in self._excluded.get(row.seq, ()):
                del self._parked[i]
                self._excluded.pop(row.seq, None)
                return row
        return self._pending.popleft() if self._pending else None

    def _send(self, consumer: int, row: R, out: list[Effect[R, E]]) -> None:
        self._credit[consumer] -= 1
        count = self.failures.get(row.seq, 0)
        if row.seq in self._maybe_delivered:
            count = max(count, 1)  # delivery-count > 0 is what makes JMSRedelivered true
        # Sent before (and not settled for good): another link may have acquired it already.
        first = not (count or row.seq in self._acquired)
        presettled = consumer in self._presettled
        out.append(Send(consumer, row, count, first, presettled))
        if presettled:
            self._settle_for_good(row, AckOutcome.ACCEPTED, consumer, out)
        else:
            self._outstanding[row.seq] = (consumer, row)
            self._acquired.add(row.seq)

    def _settle_for_good(self, row: R, outcome: AckOutcome, consumer: int | None, out: list[Effect[R, E]]) -> None:
        self._forget(row.seq)
        out.append(Record(row, outcome, consumer))

    def _forget(self, seq: int) -> None:
        self.acked.add(seq)
        self.failures.pop(seq, None)
        self._acquired.discard(seq)
        self._maybe_delivered.discard(seq)
        if self.acked.held() >= self._advance_at:
            self._advance()

    def _release(self, partitions: frozenset[int], out: list[Effect[R, E]]) -> None:
        """Row 22: forget the waiting and parked rows of ``partitions``."""
        self._advance()
        gone = [r for r in (*self._pending, *self._parked) if r.seq >> _PARTITION_BITS in partitions]
        self._pending = collections.deque(r for r in self._pending if r.seq >> _PARTITION_BITS not in partitions)
        self._parked = [r for r in self._parked if r.seq >> _PARTITION_BITS not in partitions]
        for row in gone:
            self._excluded.pop(row.seq, None)
        never_sent = sum(1 for r in gone if r.seq not in self._acquired)
        if never_sent:
            out.append(CountSent(never_sent))  # they leave the queue unsent (the tailer's bound)
        # Their rows come again from the table if they come back here: the floor must not pass
        # them before that.
        for partition in partitions:
            self._offered_to.pop(partition, None)

    def lowest_open(self) -> dict[int, int]:
        """Per topic partition, the lowest seq that may still be open here: waiting, parked,
        outstanding, held by a transaction, or not offered yet (the seq after the highest offered)."""
        low = {p: seq + 1 for p, seq in self._offered_to.items()}
        for seqs in (
            (r.seq for r in self._pending),
            (r.seq for r in self._parked),
            self._outstanding,
            (h.row.seq for hs in self._held.values() for h in hs),
        ):
            for seq in seqs:
                partition = seq >> _PARTITION_BITS
                low[partition] = min(low.get(partition, self.acked.floor_of(partition) + 1), seq)
        return low

    def _advance(self) -> None:
        """Raise the acknowledged floor (module docstring, "Memory"); O(open rows), so it runs
        only when the explicit seqs have doubled since the last time."""
        self.acked.advance(self.lowest_open())
        self._advance_at = max(_ADVANCE_MIN, 2 * self.acked.held())

    def _apply(
        self,
        row: R,
        decision: outcomes.Decision,
        consumer: int | None,
        error: E | None,
        out: list[Effect[R, E]],
    ) -> bool:
        """Carry out a settlement decision for ``row`` (no longer outstanding); True when it
        went back to the queue (a dispatch may send it)."""
        match decision:
            case outcomes.Ack(outcome=outcome):
                self._settle_for_good(row, outcome, consumer, out)
            case outcomes.DeadLetter(reason=reason, delivery_count=count):
                self._forget(row.seq)
                out.append(DeadLetterRow(row, reason, count, consumer, error))
            case Requeue(delivery_count=count, exclude_link=exclude, failed=failed):
                if count:
                    self.failures[row.seq] = count
                if failed:
                    out.append(Record(row, AckOutcome.FAILED, consumer))
                if exclude and consumer is not None and consumer in self._credit:
                    self._excluded.setdefault(row.seq, set()).add(consumer)
                    self._parked.append(row)
                else:
                    self._pending.appendleft(row)
                return True
        return False

    def _decide(self, settlement: Settlement, seq: int, delivery_failed: bool, undeliverable_here: bool) -> outcomes.Decision:
        return outcomes.decide(
            settlement,
            self.failures.get(seq, 0),
            self.limits,
            delivery_failed=delivery_failed,
            undeliverable_here=undeliverable_here,
        )

    def _settle(self, event: Settle[E], now_ms: int, out: list[Effect[R, E]]) -> None:
        entry = self._outstanding.get(event.seq)
        if entry is None or entry[0] != event.consumer:
            return  # not (or no longer) outstanding on that consumer
        del self._outstanding[event.seq]
        decision = self._decide(event.settlement, event.seq, event.delivery_failed, event.undeliverable_here)
        error = event.error if event.settlement == Settlement.REJECTED else None
        if self._apply(entry[1], decision, event.consumer, error, out):
            self._dispatch(now_ms, out)

    def _settle_all(self, settles: Iterable[Settle[E]], now_ms: int, out: list[Effect[R, E]]) -> None:
        """Row 23. Each as its own event would be: a requeue dispatches before the next settle.
        The credit read once for the event stays exact across them: the state counts its own
        sends, and no flow comes in between."""
        for one in settles:
            self._settle(one, now_ms, out)

    def _fail(self, rows: list[tuple[int, R]], out: list[Effect[R, E]]) -> None:
        """Failed deliveries (link lost, rollback, shutdown), requeued at the queue head in seq order."""
        for consumer, row in sorted(rows, key=lambda cr: -cr[1].seq):
            self._apply(row, self._decide(Settlement.LINK_LOST, row.seq, False, False), consumer, None, out)

    def _remove(self, consumer: int, now_ms: int, out: list[Effect[R, E]]) -> None:
        if consumer in self._credit:
            self._consumers.remove(consumer)
            del self._credit[consumer]
        self._presettled.discard(consumer)
        back = [(c, row) for c, row in self._outstanding.values() if c == consumer]
        for _c, row in back:
            del self._outstanding[row.seq]
        unparked = []
        for row in self._parked:
            refused = self._excluded.get(row.seq, set())
            refused.discard(consumer)
            if not refused:
                self._excluded.pop(row.seq, None)
                unparked.append(row)
        if unparked:
            self._parked = [r for r in self._parked if r.seq in self._excluded]
        self._fail(back, out)
        self._pending.extendleft(sorted(unparked, key=lambda r: r.seq, reverse=True))
        if back or unparked:
            self._dispatch(now_ms, out)

    def _discharge(self, txn: bytes, commit: bool, now_ms: int, out: list[Effect[R, E]]) -> None:
        held = self._held.pop(txn, None)
        if held is None:
            return
        if not commit:
            # JMS: rolled-back messages come again, redelivered, as after a failed delivery.
            self._fail([(h.settle.consumer, h.row) for h in held], out)
        else:
            requeued = False
            for h in sorted(held, key=lambda h: -h.row.seq):
                st = h.settle
                decision = self._decide(st.settlement, h.row.seq, st.delivery_failed, st.undeliverable_here)
                error = st.error if st.settlement == Settlement.REJECTED else None
                requeued |= self._apply(h.row, decision, st.consumer, error, out)
            if not requeued:
                return
        self._dispatch(now_ms, out)

    def _shutdown(self, out: list[Effect[R, E]]) -> None:
        self._stopped = True
        rows = list(self._outstanding.values())
        self._outstanding.clear()
        for held in self._held.values():
            rows += [(h.settle.consumer, h.row) for h in held]
        self._held.clear()
        self._fail(rows, out)
