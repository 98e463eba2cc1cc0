"""The open transactions holding rows of the dispatcher's generations, until their discharge.

A consumer that settles a delivery inside a transaction (AMQP transactional state 0x34) hands its
row to the transaction: the dispatch rules hold it (sharedsub.core.delivery.dispatch
``SettleTransactional``) until :meth:`Dispatcher.discharge <connectors.amqp.dispatcher.Dispatcher.discharge>`
applies or rolls back its outcome. :class:`TransactionHolds` keeps, per transaction, the
generations holding its rows and the container-id of each consumer that settled in it (the
consumer may be gone by the discharge, and its records still name it). :func:`txn_settlement`
reads the outcome inside a transactional state.

Front end's thread only.
"""

from __future__ import annotations

import dataclasses

import proton

from connectors.amqp.generations import Generation
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


def txn_settlement(outcome: int) -> Settlement:
    """The settlement that proton's state code ``outcome`` inside a transactional state means.

    Raises:
        ValueError: ``outcome`` is not an outcome.
    """
    settlement = _TXN_OUTCOMES.get(outcome)
    if settlement is None:
        raise ValueError(f"not an outcome: {outcome!r}")
    return settlement


@dataclasses.dataclass(slots=True)
class Hold:
    """An open transaction: the generations holding its rows, and the container of each
    consumer that settled in it (the consumer may be gone when it is discharged)."""

    held: dict[int, Generation] = dataclasses.field(default_factory=dict)  # by id()
    containers: dict[int, str] = dataclasses.field(default_factory=dict)


class TransactionHolds:
    """The open transactions by id (module docstring)."""

    __slots__ = ("_txns",)

    def __init__(self) -> None:
        self._txns: dict[bytes, Hold] = {}

    def hold(self, txn_id: bytes, gen: Generation, consumer: int, container: str) -> None:
        """Transaction ``txn_id`` holds a row of ``gen`` that ``consumer`` (of ``container``)
        settled in it."""
        txn = self._txns.setdefault(txn_id, Hold())
        txn.held[id(gen)] = gen
        txn.containers[consumer] = container

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
