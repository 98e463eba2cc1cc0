"""Consumers' dispositions, read as they come and kept until the end of their run of events.

:meth:`KeptSettlements.keep` reads one settled delivery (what :class:`Settled` says of it), settles
it with its peer at once, and keeps the ``Settle`` it means (sharedsub.core.delivery.dispatch and
.outcomes) with the others of its generation; the dispatcher takes them all
(:meth:`KeptSettlements.take`) at the end of a run of delivery events, or before any other event
of its own, and hands each generation's to its rules as one event (``Dispatcher.apply_settled``).
So the acknowledgements of one frame are one event of each subscription and one ``Ack`` per ack
log. A disposition inside a transaction (AMQP 0x34) is not kept here: the coordinator hands it to
``Dispatcher.settle_transactional``.

:meth:`KeptSettlements.keep` runs once per settled message, and it is the dispatcher's
``settle_later`` itself (bound there, no call in between). It reads the dispatcher's own table of
served generations (connectors/amqp/generations.py ``Generations.served``) and its
:class:`~connectors.amqp.sent_deliveries.SentDeliveries` (given, not copied) and writes nothing
of the dispatcher's but the unsettled delivery it pops.

Front end's thread only (it settles proton deliveries).
"""

from __future__ import annotations

from typing import Protocol

import proton

from connectors.amqp.generations import Generation
from connectors.amqp.sent_deliveries import SentDeliveries
from connectors.amqp.transactions import TRANSACTIONAL_STATE
from sharedsub.core.delivery import dispatch as rules
from sharedsub.core.delivery.outcomes import Settlement

_TERMINAL = frozenset(
    (proton.Delivery.ACCEPTED, proton.Delivery.REJECTED, proton.Delivery.RELEASED, proton.Delivery.MODIFIED),
)

Batches = dict[int, tuple[Generation, list[rules.Settle[proton.Condition]]]]
"""Dispositions kept: id(generation) -> it, its settles in the order they came."""


class Settled(Protocol):
    """What :meth:`KeptSettlements.keep` reads of a settled delivery
    (connectors.amqp.wire.proton_events ``Transfer``; ``delivery`` only for a modified or
    rejected outcome's fields)."""

    @property
    def remote_state(self) -> int:
        """The type code of the peer's state (0x24 accepted ... 0x34 transactional; 0 none)."""

    @property
    def settled(self) -> bool:
        """The peer settled it."""

    @property
    def tag(self) -> str:
        """Its delivery-tag."""

    @property
    def delivery(self) -> proton.Delivery:
        """Proton's wrapper of it."""

    def settle(self) -> None:
        """Settle it locally."""


class KeptSettlements:
    """The dispositions decided and not applied yet (module docstring)."""

    __slots__ = ("batches", "_served", "_deliveries")

    def __init__(self, served: dict[str, Generation], deliveries: SentDeliveries) -> None:
        """``served``: the dispatcher's served generations by subscription key (read only);
        ``deliveries``: its sent deliveries (a settled one's tag is popped)."""
        self.batches: Batches = {}  # empty: nothing to apply (read before each dispatcher event)
        self._served = served
        self._deliveries = deliveries

    def keep(self, transfer: Settled) -> None:
        """A consumer's disposition: decide now, apply at the dispatcher's next ``apply_settled``
        (or any other event of the dispatcher, which applies it first). The delivery is settled
        with its peer now. ``transfer``: the delivery as connectors.amqp.wire.proton_events
        ``Transfer`` reads it."""
        state = transfer.remote_state
        if state == TRANSACTIONAL_STATE:
            # Its outcome counts only if the transaction commits: the coordinator calls
            # settle_transactional (then discharge).
            return
        if state not in _TERMINAL and not transfer.settled:
            return  # e.g. a received state: not an outcome yet
        transfer.settle()
        sent = self._deliveries.unsettled.pop(transfer.tag, None)
        gen = None if sent is None else self._served.get(sent.key)
        if sent is None or gen is None:
            return
        error = None
        failed = undeliverable = False
        if state == proton.Delivery.RELEASED:
            settlement = Settlement.RELEASED
        elif state == proton.Delivery.MODIFIED:
            settlement = Settlement.MODIFIED
            remote = transfer.delivery.remote
            failed, undeliverable = bool(remote.failed), bool(remote.undeliverable)
        elif state == proton.Delivery.REJECTED:
            settlement = Settlement.REJECTED
            error = transfer.delivery.remote.condition
        else:  # accepted, or settled with no outcome
            settlement = Settlement.ACCEPTED
        settle = rules.Settle(sent.consumer, sent.seq, settlement, failed, undeliverable, error)
        batch = self.batches.get(id(gen))
        if batch is None:
            self.batches[id(gen)] = (gen, [settle])
        else:
            batch[1].append(settle)

    def take(self) -> Batches:
        """Every disposition kept, now no longer kept."""
        batches, self.batches = self.batches, {}
        return batches
