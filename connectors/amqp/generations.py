"""Subscription generations as the dispatcher serves them, and their delivery state.

A generation (a subscription's table, named by it) has its :class:`GenerationTables` (where its
rows and settlements go) and, while the dispatcher serves it, a :class:`Generation` (its pure
dispatch state, sharedsub.core.delivery.dispatch). Its delivery state (acknowledged seqs, failed
deliveries per seq) is kept apart in :class:`DeliveryState`: it outlives the generation's idle
periods and goes only when the generation ends.

The dispatcher (connectors/amqp/dispatcher.py) is the one owner of all of it: it keeps one
:class:`DeliveryState` and its :class:`Generation` values, and only the front end's thread writes
them (its module docstring says who reads what from other threads).
"""

from __future__ import annotations

import dataclasses

import proton

from sharedsub.core import layout
from sharedsub.core.delivery import dispatch as rules
from sharedsub.core.delivery.acked_seqs import AckedSeqs
from sharedsub.core.model import SubscriptionRecord
from sharedsub.runtime.tailer import Row


@dataclasses.dataclass(frozen=True, slots=True)
class GenerationTables:
    """Where a subscription generation's rows and settlements are, relative to the data dir."""

    table: str  # the generation's table; also the name its delivery state is kept under
    ack_table: str | None  # its ack log; None: not durable (acknowledgements kept in memory only)
    dead_letter_table: str

    @classmethod
    def of(cls, rec: SubscriptionRecord, *, shared: bool = False) -> GenerationTables:
        """The tables of ``rec``'s generation; ``shared``: several members may dispatch it (its
        partitions move between them), so a non-durable one's settlements are recorded too."""
        return cls(
            rec.table,
            layout.ack_table_rel(rec.key, rec.generation) if rec.identity.durable or shared else None,
            layout.dead_letter_table_rel(rec.key, rec.generation),
        )


@dataclasses.dataclass(slots=True)
class Generation:
    """A subscription generation the dispatcher serves: its rules and where it records."""

    key: str
    tables: GenerationTables
    state: rules.SubscriptionDispatch[Row, proton.Condition]  # the pure dispatch state (sharedsub.core.delivery.dispatch)
    ended: bool = False  # the dispatcher's end_generation was called: nothing more is recorded


class DeliveryState:
    """The acknowledged seqs (:class:`~sharedsub.core.delivery.acked_seqs.AckedSeqs`) and the
    failed deliveries per seq (the AMQP delivery-count) of each generation, by its table.

    Written on the front end's thread only; :meth:`first_open_in_memory` and :meth:`sizes` may
    be called from any thread (each says what it reads)."""

    __slots__ = ("_acked", "_failures")

    def __init__(self) -> None:
        self._acked: dict[str, AckedSeqs] = {}
        self._failures: dict[str, dict[int, int]] = {}  # table -> seq -> failed deliveries

    def acked(self, table: str) -> AckedSeqs:
        """Generation ``table``'s acknowledged seqs (none yet, the first time)."""
        acked = self._acked.get(table)
        if acked is None:
            acked = self._acked[table] = AckedSeqs()
        return acked

    def failures(self, table: str) -> dict[int, int]:
        """Generation ``table``'s failed deliveries per seq (none yet, the first time)."""
        return self._failures.setdefault(table, {})

    def forget(self, table: str) -> None:
        """Generation ``table`` ended: drop its delivery state."""
        self._acked.pop(table, None)
        self._failures.pop(table, None)

    def reopen(self, table: str, seqs: frozenset[int]) -> None:
        """A replay opened ``seqs`` of generation ``table`` again: they are no longer
        acknowledged, and their failed-delivery count is one more."""
        acked = self._acked.get(table)
        if acked is not None:
            acked.reopen(seqs)
        counts = self._failures.setdefault(table, {})
        for seq in seqs:
            counts[seq] = counts.get(seq, 0) + 1

    def first_open_in_memory(self, rec: SubscriptionRecord) -> int | None:
        """For a non-durable subscription generation consumed here, the lowest seq that may still
        be open: every row below it is settled (its acknowledgements live only in this memory,
        sharedsub.core.delivery.acked_seqs). None for a durable one (its ack log says) or one this
        front end has not consumed. Any thread (maintenance): reads one consistent state."""
        acked = self._acked.get(rec.table)
        if acked is None or rec.identity.durable:
            return None
        return acked.lowest_unsettled()

    def sizes(self) -> dict[str, int]:
        """Seqs held in memory per generation table (acknowledged ones above the floor, reopened
        ones, failure counts): bounded by the open window, not by history
        (sharedsub.core.delivery.acked_seqs). Any thread: the dicts are copied in one C call each."""
        acked, failures = self._acked.copy(), self._failures.copy()
        return {table: a.held() + len(failures.get(table, ())) for table, a in acked.items()}
