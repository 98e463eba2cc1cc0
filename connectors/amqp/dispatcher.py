"""The dispatcher: the proton adapter of the dispatch rules, and the one owner of delivery state.

Front end's thread only, except :meth:`Dispatcher.first_open_in_memory` and
:meth:`Dispatcher.delivery_state_sizes` (any thread; each says what it reads).

It applies the dispatch rules of :mod:`sharedsub.core.delivery.dispatch` (one pure state machine
per subscription, over consumers named by ints) to proton links. Rows go round-robin to the links
that have credit; a link with no credit gets nothing and holds nothing back; a row is
outstanding on at most one link. What a settlement does is decided by
:func:`sharedsub.core.delivery.outcomes.decide` (accepted → acknowledged; released and modified →
back to the front of the queue; rejected, or too many failed deliveries → the dead-letter table);
the unsettled rows of a link that goes away count as failed deliveries. A row past its expiry is
not sent but acknowledged as ``expired``.

modified(undeliverable-here) parks the row for the links that refused it: it goes to any other
consumer link of the subscription on this front end. When every current link refused it, it
waits for another link to attach (or for a refusing link to go away, which lifts its refusal);
it never returns to a link that said undeliverable-here while that link lives. Add
delivery-failed to the outcome (as Qpid JMS does after its client-side maxRedeliveries) to make
such refusals count towards ``max_delivery_count``.

Transactions (:meth:`Dispatcher.settle_transactional`, :meth:`Dispatcher.discharge`): a delivery
settled inside a transaction is held by it until the discharge; commit applies its outcome as a
plain settlement, rollback returns it redelivered with its count + 1.

**Delivery state has one owner.** Per subscription generation (named by its table) the dispatcher
keeps the acknowledged seqs (:class:`~sharedsub.core.delivery.acked_seqs.AckedSeqs`) and the
failed deliveries per seq (the AMQP delivery-count); they outlive the generation's idle periods
and go with :meth:`Dispatcher.end_generation`. Only the front end's thread writes them: the rules
as settlements come, and :meth:`Dispatcher.reopen` when a replay opens seqs again. The tailer
thread reads the acknowledged seqs (:meth:`Dispatcher.open` returns them for
``Tailer.watch``) as a hint only: every row it offers is checked against them here again.

What is settled is recorded through the committer (sharedsub.runtime.commit_requests): a final
outcome or a failed delivery as an ``Ack`` in the generation's ack log (durable generations only;
a non-durable one's acknowledgements live in this memory), a dead letter as a
``DeadLetterMessage``. A generation that was ended records nothing more.

**Its parts** (each front end's thread only, like the dispatcher): the generations served and
their delivery state (connectors/amqp/generations.py), the consumer links named by ints
(consumer_links.py), what goes on the wire for a row and the deliveries not settled yet
(sent_deliveries.py), the records to the committer (ack_records.py) and the transactions holding
rows (transaction_holds.py); a consumer's disposition is read and kept until the end of its run
of events in kept_settlements.py. The dispatcher composes them: it alone hands events to the rules and
applies their effects, and callers use it alone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Container

import proton

from connectors.amqp.ack_records import AckRecords
from connectors.amqp.consumer_links import ConsumerLinks
from connectors.amqp.generations import Generation, Generations, GenerationTables
from connectors.amqp.kept_settlements import KeptSettlements, Settled
from connectors.amqp.sent_deliveries import SentDeliveries
from connectors.amqp.transaction_holds import TransactionHolds
from sharedsub.core.delivery import dispatch as rules
from sharedsub.core.delivery.outcomes import Limits
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops import metrics
from sharedsub.core.ops.stage_timing import StageTimes
from sharedsub.runtime.commit_requests import Ack, Request
from sharedsub.runtime.tailer import Row

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


# Limits is a frozen dataclass, so one shared instance can be the default of every Dispatcher.
_DEFAULT_LIMITS = Limits()


class Dispatcher:
    """Applies the dispatch rules to proton links and owns delivery state (module docstring).

    Consumer links are named by ints (connectors/amqp/consumer_links.py); a delivery sent and not
    settled is found by its tag (connectors/amqp/sent_deliveries.py: tags are this dispatcher's
    counter, unique across its links, and only it sends on the service's sender links).
    """

    settle_later: Callable[[Settled], None]
    """A consumer's disposition: decided now, applied at the next :meth:`apply_settled` (or any
    other event of the dispatcher, which applies it first); the handler calls that at the end of
    a run of delivery events. It is connectors/amqp/kept_settlements.py ``KeptSettlements.keep``."""

    def __init__(
        self,
        submit: Callable[[Request], None],
        on_sent: Callable[[str, int], None],
        *,
        limits: Limits = _DEFAULT_LIMITS,
        clock: Callable[[], int] = _now_ms,
        counters: metrics.Counters | None = None,
        stages: StageTimes | None = None,
    ) -> None:
        """``submit``: where settlement records go (the committer's queue); ``on_sent(key, n)``:
        ``n`` rows of ``key`` left the queue (the tailer's in-flight bound); ``stages``: where the
        ``publish_to_send`` times go (sharedsub.core.ops.stage_timing)."""
        counters = counters if counters is not None else metrics.Counters()
        self._gens = Generations(limits, clock)  # module docstring: the one owner of delivery state
        self._links = ConsumerLinks()
        self._deliveries = SentDeliveries(counters, stages if stages is not None else StageTimes())
        self._records = AckRecords(submit, counters)
        self._txns = TransactionHolds(self._gens.served, self._deliveries, self._links)
        self._kept = KeptSettlements(self._gens.served, self._deliveries)
        self.settle_later = self._kept.keep  # once per settled message: no call in between
        self._on_sent = on_sent
        self._clock = clock

    # ------------------------------------------------------------------ generations

    def open(self, key: str, tables: GenerationTables) -> Container[int]:
        """Make ``key`` dispatchable as the generation ``tables`` (idempotent). Returns its
        acknowledged seqs, for the tailer to read (module docstring)."""
        acked = self._gens.serve(key, tables)
        self._links.open(key)
        return acked

    def release(self, key: str, partitions: frozenset[int]) -> None:
        """Another member dispatches ``partitions`` of ``key`` now: forget their rows not sent
        (sharedsub.core.delivery.dispatch row 22)."""
        gen = self._gens.served.get(key)
        if gen is not None:
            self._handle(gen, rules.Release(partitions))

    def draining(self, key: str, partitions: frozenset[int]) -> int:
        """Rows of ``partitions`` of ``key`` sent or held by a transaction and not settled yet."""
        self.apply_settled()
        gen = self._gens.find(key)
        return gen.state.draining(partitions) if gen is not None else 0

    def consumers(self, key: str) -> int:
        """Number of consumer links on ``key``."""
        gen = self._gens.served.get(key)
        return len(gen.state.consumers) if gen else 0

    def drop(self, key: str) -> None:
        """No consumer of ``key`` is left here: forget its pending rows (they stay in the table
        unless acknowledged); its delivery state is kept. Rows an open transaction holds stay
        held until it is discharged."""
        self.apply_settled()
        self._gens.drop(key)
        self._links.drop(key)
        self._deliveries.forget_subscription(key)

    def end_generation(self, key: str, table: str) -> None:
        """The generation ``table`` of ``key`` ended (deleted, or replaced by another): drop it,
        forget its delivery state, and record nothing more for it (a transaction holding its
        rows is still discharged, without records)."""
        self.apply_settled()
        gen = self._gens.served.get(key)
        if gen is not None and gen.tables.table == table:
            self.drop(key)
        self._gens.end(key, table)
        self._txns.end_generation(table)

    def reopen(self, table: str, seqs: frozenset[int]) -> None:
        """A replay opened ``seqs`` of generation ``table`` again (their ``replayed`` ack rows are
        committed): they are no longer acknowledged, and go out marked redelivered (their
        failed-delivery count + 1 here at once; the ack log's count may say more)."""
        self.apply_settled()
        self._gens.delivery.reopen(table, seqs)

    def first_open_in_memory(self, rec: SubscriptionRecord) -> int | None:
        """Any thread (maintenance): connectors/amqp/generations.py
        ``DeliveryState.first_open_in_memory``."""
        return self._gens.delivery.first_open_in_memory(rec)

    def delivery_state_sizes(self) -> dict[str, int]:
        """Any thread: connectors/amqp/generations.py ``DeliveryState.sizes``."""
        return self._gens.delivery.sizes()

    # ------------------------------------------------------------------ consumers

    def add_consumer(self, key: str, link: proton.Link) -> None:
        """Attach a consumer link to subscription ``key`` (opened before)."""
        self.apply_settled()
        consumer, outgoing = self._links.add(key, link)
        presettled = link.snd_settle_mode == proton.Link.SND_SETTLED  # at most once
        self._handle(self._gens.served[key], rules.AddConsumer(consumer, outgoing.credit, presettled))

    def remove_consumer(self, key: str, link: proton.Link) -> int:
        """Detach a consumer link, returning its unsettled rows to the queue; return consumers left.

        Its unsettled deliveries failed (docs/design.md §5): each is requeued with its delivery count + 1,
        or dead-lettered at ``max_delivery_count``. Its undeliverable-here refusals are lifted.
        Rows it settled inside a transaction stay with the transaction.
        """
        self.apply_settled()
        gen = self._gens.served.get(key)
        if gen is None:
            return 0
        consumer = self._links.remove(key, link)
        if consumer is None:
            return len(gen.state.consumers)
        self._deliveries.forget_consumer(consumer)
        self._handle(gen, rules.RemoveConsumer(consumer))
        self._links.forget_container(consumer)  # after its failed deliveries are recorded under it
        return len(gen.state.consumers)

    def fail_outstanding(self) -> None:
        """Shutting down: every unsettled delivery failed (recorded now, while the ack log can
        still be written), and nothing more is sent. Rows held by transactions not discharged
        yet fail the same way."""
        self.apply_settled()
        containers = self._txns.containers()
        for gen in self._gens.stop():
            self._handle(gen, rules.Shutdown(), containers)
        self._deliveries.clear()
        self._txns.clear()

    # ------------------------------------------------------------------ rows

    def offer(self, key: str, rows: list[Row]) -> None:
        """Queue rows read by the tailer and dispatch what credit allows.

        A row that is acknowledged, outstanding, parked, held by a transaction or already waiting
        is not queued (a backlog loaded again after a replay repeats rows that are open); the
        skipped ones count as sent for the tailer's in-flight bound. A row older than the newest
        waiting one (a replay's) is queued in seq order.
        """
        gen = self._gens.served.get(key)
        if gen is not None:
            self._handle(gen, rules.Offer(tuple(rows)))

    def credit_arrived(self, link: proton.Link) -> None:
        """The peer of consumer ``link`` sent a flow: read that link's credit, then dispatch.

        Only this link's credit is read. Every other consumer's stays what the dispatch state
        holds, which is exact: a link's credit changes by a flow from its peer (which comes here),
        by the sends this dispatcher makes (the state counts them), and by the front end draining
        it (:meth:`credit_drained`). With N consumers each flow would otherwise read N links
        (profiled: 4 consumers consumed ~10% slower than 1)."""
        found = self._links.find(link)
        if found is None:
            return
        key, consumer, outgoing = found
        gen = self._gens.served.get(key)
        if outgoing is not None and gen is not None:
            self._handle(gen, rules.Credit({consumer: outgoing.credit}), read_credit=False)

    def credit_drained(self, link: proton.Link) -> None:
        """Consumer ``link``'s credit was given back (``drained``): the state holds it as read now.
        (Every other event's dispatch pass reads all the links' credit anyway; this keeps the
        state exact for a flow on another link that comes before any of those.)"""
        self.apply_settled()
        found = self._links.find(link)
        if found is None:
            return
        key, consumer, outgoing = found
        gen = self._gens.served.get(key)
        if gen is not None and outgoing is not None:
            gen.state.set_credit(consumer, outgoing.credit)

    # ------------------------------------------------------------------ settlements

    def apply_settled(self) -> None:
        """Apply the dispositions ``settle_later`` kept: each generation's as one event. One
        generation's failure is logged and does not keep the others' from being applied (its
        rows stay outstanding until their links go, then they are delivered again)."""
        if not self._kept.batches:
            return
        for gen, settles in self._kept.take().values():
            try:
                self._handle(gen, settles[0] if len(settles) == 1 else rules.SettleAll(tuple(settles)))
            except Exception:
                log.exception("applying %d disposition(s) of subscription %s failed", len(settles), gen.key)

    def settle_transactional(
        self,
        dlv: proton.Delivery,
        txn_id: bytes,
        outcome: int,
        *,
        failed: bool = False,
        undeliverable: bool = False,
        condition: proton.Condition | None = None,
    ) -> None:
        """A consumer settled ``dlv`` with a transactional state (AMQP 0x34) of transaction
        ``txn_id`` whose outcome is ``outcome`` (proton's state code: 0x24 accepted, 0x25
        rejected, 0x26 released, 0x27 modified with ``failed`` / ``undeliverable``; 0 none, as
        accepted). ``dlv`` is settled locally now; its row is no longer outstanding on its link
        and is held by the transaction until :meth:`discharge`: not sent again, and not
        requeued when its link, session or connection goes."""
        held = self._txns.settle(dlv, bytes(txn_id), outcome, failed, undeliverable, condition)
        if held is not None:
            gen, event = held
            self._handle(gen, event)
            self._txns.hold(gen, event)

    def discharge(self, txn_id: bytes, commit: bool) -> None:
        """Transaction ``txn_id`` ends. Commit: each outcome settled in it is applied as a plain
        settlement would have been (acknowledgements recorded, dead letters, requeues).
        Rollback: every row it holds goes back to its subscription marked redelivered with its
        delivery count + 1 (dead-lettered at ``max_delivery_count``), then dispatch. Unknown
        ``txn_id``: nothing happens."""
        txn = self._txns.pop(bytes(txn_id))
        if txn is None:
            return
        event = rules.Discharge(bytes(txn_id), commit)
        for gen in txn.held.values():
            self._handle(gen, event, txn.containers)
            self._gens.discharged(gen)

    # ------------------------------------------------------------------ effects

    def _handle(
        self,
        gen: Generation,
        event: rules.Event,
        containers: dict[int, str] | None = None,
        *,
        read_credit: bool = True,
    ) -> None:
        """Hand ``gen``'s dispatch state ``event`` (it reads the links' credit if it dispatches,
        unless ``read_credit`` is false: then the credit it holds is used), apply the effects.
        Dispositions kept for later are applied first: events keep their order."""
        if self._kept.batches:
            self.apply_settled()
        key = gen.key
        links = self._links.by_key.get(key, {}) if self._gens.served.get(key) is gen else {}

        def credit_of(consumer: int) -> int:
            outgoing = links.get(consumer)
            return 0 if outgoing is None else outgoing.credit

        # Sends are applied link by link, each link's in the order decided. Proton queues a
        # transport event for every send whose connection differs from the last one's, so
        # round-robin order across consumers on separate connections would cost one transport
        # event (and its output pass) per message instead of one per connection.
        sends: dict[int, list[rules.Send[Row]]] = {}
        # Consecutive records of one outcome and consumer go to the committer as one Ack
        # (connectors/amqp/ack_records.py); any other request submitted in between closes it
        # first, so the committer gets everything in the order decided.
        ack: Ack | None = None
        for effect in gen.state.handle(event, self._clock(), credit_of if read_credit else None):
            match effect:
                case rules.Send():
                    sends.setdefault(effect.consumer, []).append(effect)
                case rules.Record():
                    ack = self._records.record(gen, effect, self._links.container(effect.consumer, containers), ack)
                case rules.DeadLetterRow():
                    self._records.dead_letter(gen, effect, self._links.container(effect.consumer, containers), ack)
                    ack = None
                case rules.CountSent(count=count):
                    self._on_sent(key, count)
        if ack is not None:
            self._records.submit(ack)
        for receiver, effects in sends.items():
            outgoing = links[receiver]
            for send in effects:
                self._deliveries.send(key, outgoing, send)
