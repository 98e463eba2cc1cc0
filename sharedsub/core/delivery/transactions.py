"""Local transactions as JMS transacted sessions use them: the rules, no I/O.

The Qpid JMS client runs one AMQP 1.0 transaction at a time per transacted session: it attaches
a coordinator link, *declares* a transaction (gets an id), sends messages whose transfers carry
``transactional-state(txn-id)`` and settles the messages it consumed with
``transactional-state(txn-id, accepted)``, then *discharges* the transaction: ``fail=false``
commits, ``fail=true`` rolls back, and the client declares the next one at once.

What this module decides (the AMQP adapter, connectors/amqp/transactions.py, applies it):

===============================  =================================================================
event                            rule
===============================  =================================================================
declare on a controller link     a new id, owned by the link's connection
transactional publish            held (not committed) under its transaction; the publisher hears
                                 ``transactional-state(accepted)`` at once
publish past the limits          refused (resource-limit-exceeded); the transaction is marked
                                 rollback-only
id unknown, or another owner's   refused with ``amqp:transaction:unknown-id`` (publish, settlement,
                                 discharge alike): one connection never reaches another's work
discharge fail=false             :class:`Commit` with every held publish, to be stored in one
                                 group commit; held settlements are applied once it is stored
discharge fail=false, rollback-  :class:`Rollback` with the reason (the discharge is then refused
only                             with ``amqp:transaction:rollback``)
discharge fail=true              :class:`Rollback`: publishes dropped, held settlements undone
controller link or connection    every transaction it declared / owns is rolled back
gone before discharge
===============================  =================================================================

A transaction leaves the registry when it is discharged, so a connection lost while its
commit is being stored does not roll that commit back.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from sharedsub.core.errors import TransactionTooLarge, UnknownTransaction

P = TypeVar("P")
"""A held publish, opaque here (the adapter's commit request: sharedsub.runtime.commit_requests.Publish)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """Per-transaction bounds on held publishes (0 = unlimited)."""

    max_messages: int = 0
    max_bytes: int = 0


@dataclasses.dataclass(slots=True)
class _Transaction(Generic[P]):
    owner: Hashable
    controller: Hashable
    publishes: list[P] = dataclasses.field(default_factory=list)
    size: int = 0
    rollback_only: str | None = None  # why it can no longer commit


@dataclasses.dataclass(frozen=True, slots=True)
class Commit(Generic[P]):
    """Store ``publishes`` (in one group commit), then apply the held settlements."""

    txn_id: bytes
    publishes: tuple[P, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Rollback:
    """Drop the held publishes, undo the held settlements. ``reason`` is set when a commit was
    asked for and refused (the discharge then fails with amqp:transaction:rollback)."""

    txn_id: bytes
    reason: str | None = None


def _counter_ids() -> Callable[[], bytes]:
    counter = itertools.count(1)
    return lambda: next(counter).to_bytes(8, "big")


class Transactions(Generic[P]):
    """The transactions of one front end, keyed by id (reactor thread only)."""

    def __init__(self, limits: Limits = Limits(), new_id: Callable[[], bytes] | None = None) -> None:
        self._limits = limits
        self._new_id = new_id or _counter_ids()
        self._open: dict[bytes, _Transaction[P]] = {}

    def __len__(self) -> int:
        return len(self._open)

    def declare(self, owner: Hashable, controller: Hashable) -> bytes:
        """A new transaction of connection ``owner``, declared on link ``controller``; its id."""
        txn_id = self._new_id()
        self._open[txn_id] = _Transaction(owner, controller)
        return txn_id

    def _get(self, txn_id: bytes, owner: Hashable) -> _Transaction[P]:
        txn = self._open.get(txn_id)
        if txn is None or txn.owner != owner:
            raise UnknownTransaction(txn_id)
        return txn

    def check(self, txn_id: bytes, owner: Hashable) -> None:
        """Raise :class:`UnknownTransaction` unless ``owner`` has ``txn_id`` open."""
        self._get(txn_id, owner)

    def enlist(self, txn_id: bytes, owner: Hashable, publish: P, size: int) -> None:
        """Hold ``publish`` (``size`` bytes) until ``txn_id`` is discharged.

        Raises:
            UnknownTransaction: not an open transaction of ``owner``.
            TransactionTooLarge: past the limits; the transaction is rollback-only from now on.
        """
        txn = self._get(txn_id, owner)
        lim = self._limits
        over = None
        if lim.max_messages and len(txn.publishes) + 1 > lim.max_messages:
            over = f"{lim.max_messages} messages"
        elif lim.max_bytes and txn.size + size > lim.max_bytes:
            over = f"{lim.max_bytes} bytes"
        if over is not None:
            error = TransactionTooLarge(txn_id, over)
            txn.rollback_only = txn.rollback_only or error.description
            raise error
        txn.publishes.append(publish)
        txn.size += size

    def discharge(self, txn_id: bytes, owner: Hashable, *, fail: bool) -> Commit[P] | Rollback:
        """End ``txn_id``: commit (``fail`` false) or roll back. Raises :class:`UnknownTransaction`."""
        txn = self._get(txn_id, owner)
        del self._open[txn_id]
        if fail:
            return Rollback(txn_id)
        if txn.rollback_only is not None:
            return Rollback(txn_id, reason=txn.rollback_only)
        return Commit(txn_id, tuple(txn.publishes))

    def _end_where(self, keep: Callable[[_Transaction[P]], bool]) -> list[Rollback]:
        gone = [txn_id for txn_id, txn in self._open.items() if not keep(txn)]
        for txn_id in gone:
            del self._open[txn_id]
        return [Rollback(txn_id) for txn_id in gone]

    def controller_gone(self, controller: Hashable) -> list[Rollback]:
        """The coordinator link ``controller`` detached: its open transactions roll back."""
        return self._end_where(lambda txn: txn.controller != controller)

    def owner_gone(self, owner: Hashable) -> list[Rollback]:
        """Connection ``owner`` ended: its open transactions roll back."""
        return self._end_where(lambda txn: txn.owner != owner)
