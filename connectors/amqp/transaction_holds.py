"""The open transactions holding rows of the dispatcher's generations, until their discharge.

A consumer that settles a delivery inside a transaction (AMQP transactional state 0x34) hands its
row to the transaction: the dispatch rules hold it (sharedsub.core.delivery.dispatch
``SettleTransactional``) until :meth:`Dispatcher.discharge <connectors.amqp.dispatcher.Dispatcher.discharge>`
applies or rolls back its outcome. :class:`TransactionHolds` reads such a settlement
(:meth:`TransactionHolds.settle`: the outcome inside the transactional state, the delivery's row)
and keeps, per transaction, the generations holding its rows and the container-id of each
consumer that settled in it (the consumer may be gone by the discharge, and its records still
name it). It reads the dispatcher's table of served generations, its sent deliveries and its
consumer links (given, not copied); of the dispatcher's state it writes only the unsettled
delivery it pops and, when a generation ends, that generation's ``ended``.

Front end's thread only (it settles proton deliveries).
"""

from __future__ import annotations

import dataclasses

import proton

from connectors.amqp.consumer_links import ConsumerLinks
from connectors.amqp.generations import Generation
from connectors.amqp.sent_deliveries import SentDeliveries
from sharedsub.core.delivery import dispatch as rules
from sharedsub.core.delivery.outcomes import Settlement

# Delivery state codes of the outcome inside a transactional state (AMQP 0x34), as proton
# numbers them, and the settlement each means. 0: settled inside the transaction with no outcome.
_TXN_OUTCOMES = {
    0: Settlement.ACCEPTED,
    proton.Delivery.ACCEPTED: Settlement.ACCEPTED,
    proton.Delivery.REJECTED: Settlement.REJECTED,
    proton.Delivery.RELEASED: Settlement.RELEASED,
    proton.Delivery.MODIFIED: Settlement.MODIFIED,
}


@dataclasses.dataclass(slots=True)
class Hold:
    """An open transaction: the generations holding its rows, and the container of each
    consumer that settled in it (the consumer may be gone when it is discharged)."""

    held: dict[int, Generation] = dataclasses.field(default_factory=dict)  # by id()
    containers: dict[int, str] = dataclasses.field(default_factory=dict)


class TransactionHolds:
    """The open transactions by id (module docstring)."""

    __slots__ = ("_txns", "_served", "_deliveries", "_links")

    def __init__(self, served: dict[str, Generation], deliveries: SentDeliveries, links: ConsumerLinks) -> None:
        """``served``: the dispatcher's served generations by key (read only); ``deliveries``: its
        sent deliveries (a settled one's tag is popped); ``links``: its consumer links (read)."""
        self._txns: dict[bytes, Hold] = {}
        self._served = served
        self._deliveries = deliveries
        self._links = links

    def settle(
        self,
        dlv: proton.Delivery,
        txn_id: bytes,
        outcome: int,
        failed: bool,
        undeliverable: bool,
        condition: proton.Condition | None,
    ) -> tuple[Generation, rules.SettleTransactional[proton.Condition]] | None:
        """A consumer settled ``dlv`` inside transaction ``txn_id`` with ``outcome`` (the
        dispatcher's ``settle_transactional`` says what each argument is): settle ``dlv`` locally
        now, and return its generation and the event that hands its row to the transaction
        (None: ``dlv`` is no unsettled delivery of a served generation). Hand the event to the
        generation's rules, then :meth:`hold` it.

        Raises:
            ValueError: ``outcome`` is not an outcome (``dlv`` is not settled then).
        """
        settlement = _TXN_OUTCOMES.get(outcome)
        if settlement is None:
            raise ValueError(f"not an outcome: {outcome!r}")
        dlv.settle()
        sent = self._deliveries.unsettled.pop(dlv.tag, None)
        if sent is None:
            return None
        gen = self._served.get(sent.key)
        if gen is None:
            return None
        return gen, rules.SettleTransactional(
            txn_id,
            rules.Settle(
                sent.consumer,
                sent.seq,
                settlement,
                delivery_failed=failed and settlement == Settlement.MODIFIED,
                undeliverable_here=undeliverable and settlement == Settlement.MODIFIED,
                error=condition if settlement == Settlement.REJECTED else None,
            ),
        )

    def hold(self, gen: Generation, event: rules.SettleTransactional[proton.Condition]) -> None:
        """``gen``'s rules took ``event`` (from :meth:`settle`): its transaction holds a row of
        ``gen``, settled in it by a consumer whose container-id is kept with it."""
        consumer = event.settle.consumer
        txn = self._txns.setdefault(event.txn, Hold())
        txn.held[id(gen)] = gen
        txn.containers[consumer] = self._links.container_of(consumer)

    def pop(self, txn_id: bytes) -> Hold | None:
        """Transaction ``txn_id`` is discharged: what it held (None: it held nothing here)."""
        return self._txns.pop(txn_id, None)

    def end_generation(self, table: str) -> None:
        """Generation ``table`` ended: the transactions holding its rows record nothing for them."""
        for txn in self._txns.values():
            for gen in txn.held.values():
                if gen.tables.table == table:
                    gen.ended = True

    def containers(self) -> dict[int, str]:
        """The container-id of every consumer that settled in an open transaction."""
        return {c: name for txn in self._txns.values() for c, name in txn.containers.items()}

    def clear(self) -> None:
        """Forget every open transaction (shutting down)."""
        self._txns.clear()
