"""The transaction coordinator: AMQP 1.0 local transactions applied (rules: sharedsub.core.delivery.transactions).

Reactor thread only. A coordinator link is a link the client sends on whose target is a
``coordinator`` terminus; its transfers are ``declare`` and ``discharge`` messages. A
transaction belongs to the connection that declared it. Committing stores the transaction's
publishes in one group commit (:class:`~sharedsub.runtime.commit_requests.CommitTransaction`), then applies the
consumer settlements the dispatcher held for it, and answers the discharge only after both are
on disk (a :class:`~sharedsub.runtime.commit_requests.Barrier` behind the acknowledgements).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Protocol

import proton
from proton import Condition, Delivery, Described, Endpoint, Terminus, ulong

from connectors.amqp.tokens import Continuation, Tokens
from sharedsub.core.delivery import transactions as rules
from sharedsub.core.errors import MessageDecodeError, NotSupported, SharedSubError, TransactionRolledBack
from sharedsub.runtime.commit_requests import Barrier, CommitTransaction, Publish, Result
from sharedsub.runtime.committer import Committer

log = logging.getLogger(__name__)

TRANSACTIONAL_STATE = 0x34
DECLARED = 0x33
_DECLARE = (0x31, "amqp:declare:list")
_DISCHARGE = (0x32, "amqp:discharge:list")
# Outcome descriptors inside a transactional-state, as codes or symbols.
_OUTCOMES = {
    0x24: Delivery.ACCEPTED, "amqp:accepted:list": Delivery.ACCEPTED,
    0x25: Delivery.REJECTED, "amqp:rejected:list": Delivery.REJECTED,
    0x26: Delivery.RELEASED, "amqp:released:list": Delivery.RELEASED,
    0x27: Delivery.MODIFIED, "amqp:modified:list": Delivery.MODIFIED,
}
_CREDIT = 100


def is_coordinator(link: proton.Link) -> bool:
    """True for a link whose remote target is a transaction coordinator."""
    target = link.remote_target
    return link.is_receiver and target is not None and target.type == Terminus.COORDINATOR


def transaction_of(dlv: Delivery) -> bytes | None:
    """The transaction id a transfer or settlement carries in a transactional-state, else None."""
    if dlv.remote_state != TRANSACTIONAL_STATE:
        return None
    data = dlv.remote.data or []
    if not data or not isinstance(data[0], bytes | memoryview):
        raise MessageDecodeError("transactional-state without a binary txn-id")
    return bytes(data[0])


def _descriptor(value: object) -> object:
    return value.descriptor if isinstance(value, Described) else None


def _held_key(owner: int, txn_id: bytes) -> bytes:
    """The key the dispatcher holds a connection's settlements under: ids are unique per front
    end, but a settlement naming another connection's transaction must never touch that one's."""
    return owner.to_bytes(8, "big") + txn_id


class HoldSettlement(Protocol):
    """``hold(dlv, key, outcome, *, failed, undeliverable, condition)``: see Coordinator."""

    def __call__(
        self, dlv: Delivery, txn_id: bytes, outcome: int, *, failed: bool = ..., undeliverable: bool = ...,
        condition: Condition | None = ...,
    ) -> None:
        """Settle ``dlv`` locally and hold its ``outcome`` in transaction ``txn_id`` until the discharge."""


class Coordinator:
    """Coordinator links, transactional publishes and settlements of a front end."""

    def __init__(
        self,
        transactions: rules.Transactions[Publish],
        committer: Committer,
        tokens: Tokens[Continuation],
        *,
        hold_settlement: HoldSettlement,
        end_settlements: Callable[[bytes, bool], None],
    ) -> None:
        """``hold_settlement`` hands a consumer's transactional settlement to the dispatcher
        (delivery.Dispatcher.settle_transactional); ``end_settlements(key, commit)`` applies
        (True) or undoes (False) what it holds under ``key`` (see :func:`_held_key`)."""
        self._txns = transactions
        self._committer = committer
        self._tokens = tokens
        self._hold = hold_settlement
        self._end = end_settlements
        self._links: set[proton.Link] = set()
        # Connections by a serial number: proton objects hash by address, which a later
        # connection may reuse; the serial is never reused.
        self._owners: dict[proton.Connection, int] = {}
        self._serials = itertools.count(1)

    def _owner(self, link: proton.Link) -> int:
        conn = link.connection
        serial = self._owners.get(conn)
        if serial is None:
            serial = self._owners[conn] = next(self._serials)
        return serial

    # ------------------------------------------------------------------ coordinator links

    def is_coordinator_link(self, link: proton.Link) -> bool:
        """True when ``link`` is an open coordinator link of ours."""
        return link in self._links

    def open(self, link: proton.Receiver) -> None:
        """Attach a coordinator link (local transactions only)."""
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)
        link.open()
        link.flow(_CREDIT)
        self._links.add(link)

    def link_gone(self, link: proton.Link) -> None:
        """A coordinator link detached or its session/connection ended: roll back its open transactions."""
        if link in self._links:
            self._links.discard(link)
            self._roll_back(self._txns.controller_gone(link), self._owner(link))

    def connection_gone(self, conn: proton.Connection) -> None:
        """A connection ended: roll back every transaction it still had open."""
        self._links = {lk for lk in self._links if lk.connection != conn}
        owner = self._owners.pop(conn, None)
        if owner is not None:
            self._roll_back(self._txns.owner_gone(owner), owner)

    def _roll_back(self, ended: list[rules.Rollback], owner: int) -> None:
        for rollback in ended:
            log.info("transaction %s rolled back: its controller went away", rollback.txn_id.hex())
            self._end(_held_key(owner, rollback.txn_id), False)

    # ------------------------------------------------------------------ declare / discharge

    def on_transfer(self, dlv: Delivery) -> None:
        """A complete declare or discharge on a coordinator link."""
        link = dlv.link
        data = link.recv(dlv.pending)
        link.advance()
        link.flow(1)
        try:
            msg = proton.Message()
            try:
                if data is None:
                    raise ValueError("no payload")
                msg.decode(data)
            except Exception as exc:
                raise MessageDecodeError(f"coordinator transfer is not a valid AMQP message: {exc}") from exc
            body = msg.body
            kind = _descriptor(body)
            fields = list(body.value or []) if isinstance(body, Described) and isinstance(body.value, list) else None
            if kind in _DECLARE and fields is not None:
                if fields and fields[0] is not None:
                    raise NotSupported("global transactions are not supported (declare with a global-id)")
                txn_id = self._txns.declare(self._owner(link), link)
                dlv.local.data = [txn_id]  # type: ignore[list-item]  # any AMQP values; the stub says list[int]
                dlv.update(DECLARED)
                dlv.settle()
                log.debug("transaction %s declared", txn_id.hex())
            elif kind in _DISCHARGE and fields and isinstance(fields[0], bytes | memoryview):
                fail = bool(fields[1]) if len(fields) > 1 and fields[1] is not None else False
                self._discharge(dlv, bytes(fields[0]), fail)
            else:
                raise MessageDecodeError(f"coordinator transfer is neither a declare nor a discharge: {body!r:.200}")
        except SharedSubError as exc:
            _reject(dlv, str(exc.condition), exc.description)

    def _discharge(self, dlv: Delivery, txn_id: bytes, fail: bool) -> None:
        owner = self._owner(dlv.link)
        decision = self._txns.discharge(txn_id, owner, fail=fail)
        held = _held_key(owner, txn_id)
        if isinstance(decision, rules.Rollback):
            self._end(held, False)
            if decision.reason is None:
                _accept(dlv)
            else:
                error = TransactionRolledBack(txn_id, decision.reason)
                _reject(dlv, str(error.condition), error.description)
            return

        def settlements_stored(_result: Result) -> None:
            _accept(dlv)

        def stored(result: Result) -> None:
            if result.error is not None:
                log.error("transaction %s: commit failed: %s", txn_id.hex(), result.error)
                self._end(held, False)
                error = TransactionRolledBack(txn_id, f"its messages could not be stored: {result.error}")
                _reject(dlv, str(error.condition), error.description)
                return
            self._end(held, True)  # queues the acknowledgements with the committer
            self._committer.submit(Barrier(self._tokens.put(settlements_stored)))

        publishes = list(decision.publishes)
        if publishes:
            self._committer.submit(CommitTransaction(publishes, self._tokens.put(stored)))
        else:
            stored(Result(Barrier()))

    # ------------------------------------------------------------------ transactional work

    def enlist_publish(self, dlv: Delivery, txn_id: bytes, publish: Publish) -> None:
        """Hold a transactional publish; the publisher hears transactional-state(accepted) now.

        Raises:
            UnknownTransaction, TransactionTooLarge: refuse the transfer (the caller rejects it).
        """
        self._txns.enlist(txn_id, self._owner(dlv.link), publish, len(publish.message))
        dlv.local.data = [txn_id, Described(ulong(0x24), [])]  # type: ignore[list-item]  # as above
        dlv.update(TRANSACTIONAL_STATE)
        dlv.settle()

    def settlement(self, dlv: Delivery, txn_id: bytes) -> None:
        """A consumer settled a delivery inside a transaction: the dispatcher holds it until discharge.

        A settlement naming a transaction this connection does not have open is undone at once
        (the client learns at discharge that the transaction is gone).
        """
        data = dlv.remote.data or []
        outcome = data[1] if len(data) > 1 else None
        code = _OUTCOMES.get(_descriptor(outcome), Delivery.ACCEPTED)
        fields: list[object] = list(outcome.value) if isinstance(outcome, Described) and isinstance(outcome.value, list) else []
        condition = None
        failed = undeliverable = False
        if code == Delivery.REJECTED and fields and isinstance(fields[0], Described):
            err = list(fields[0].value) if isinstance(fields[0].value, list) else []
            condition = Condition(str(err[0]), str(err[1]) if len(err) > 1 and err[1] else None) if err else None
        if code == Delivery.MODIFIED:
            failed = bool(fields[0]) if fields else False
            undeliverable = bool(fields[1]) if len(fields) > 1 else False
        owner = self._owner(dlv.link)
        held = _held_key(owner, txn_id)
        self._hold(dlv, held, code, failed=failed, undeliverable=undeliverable, condition=condition)
        try:
            self._txns.check(txn_id, owner)
        except SharedSubError:
            log.info("settlement in unknown transaction %s: undone", txn_id.hex())
            self._end(held, False)


def _accept(dlv: Delivery) -> None:
    if dlv.link.state & Endpoint.LOCAL_CLOSED:
        return
    dlv.update(Delivery.ACCEPTED)
    dlv.settle()


def _reject(dlv: Delivery, condition: str, description: str) -> None:
    if dlv.link.state & Endpoint.LOCAL_CLOSED:
        return
    dlv.local.condition = Condition(condition, description)
    dlv.update(Delivery.REJECTED)
    dlv.settle()
