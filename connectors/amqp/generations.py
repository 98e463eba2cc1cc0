"""Subscription generations as the dispatcher serves them, and their delivery state.

A generation (a subscription's table, named by it) has its :class:`GenerationTables` (where its
rows and settlements go) and, while the dispatcher serves it, a :class:`Generation` (its pure
dispatch state, sharedsub.core.delivery.dispatch). Its delivery state (acknowledged seqs, failed
deliveries per seq) is kept apart in :class:`DeliveryState`: it outlives the generation's idle
periods and goes only when the generation ends. :class:`Generations` holds both for the
dispatcher.

The dispatcher (connectors/amqp/dispatcher.py) is the one owner of all of it: it keeps one
:class:`Generations`, and only the front end's thread writes it (the dispatcher's module
docstring says who reads what from other threads).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import proton

from sharedsub.core import layout
from sharedsub.core.delivery import dispatch as rules
from sharedsub.core.delivery.acked_seqs import AckedSeqs
from sharedsub.core.delivery.outcomes import Limits
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


class Generations:
    """The generations the dispatcher serves, and the delivery state of every generation.

    By subscription key: :attr:`served`, those with consumers here (the dispatcher's events go
    to them), and the dropped ones, whose consumers are gone but whose rows an open transaction
    still holds (until its discharge: :meth:`discharged`). :attr:`delivery` is kept by table.
    A dropped generation served again is the same :class:`Generation`, rules and all; another
    generation of the key starts afresh."""

    __slots__ = ("served", "delivery", "_dropped", "_limits", "_clock", "_stopped")

    def __init__(self, limits: Limits, clock: Callable[[], int]) -> None:
        """``limits``: each generation's rules'; ``clock``: the time they are handed (ms)."""
        self.served: dict[str, Generation] = {}  # read as is on each dispatcher event
        self.delivery = DeliveryState()
        self._dropped: dict[str, Generation] = {}
        self._limits = limits
        self._clock = clock
        self._stopped = False

    def serve(self, key: str, tables: GenerationTables) -> AckedSeqs:
        """Serve ``key`` as the generation ``tables`` (idempotent); return its acknowledged seqs.
        After :meth:`stop`, a generation started afresh starts stopped."""
        acked = self.delivery.acked(tables.table)
        if key in self.served:
            return acked
        gen = self._dropped.pop(key, None)
        if gen is None or gen.tables.table != tables.table:  # another generation: start afresh
            sub: rules.SubscriptionDispatch[Row, proton.Condition]
            sub = rules.SubscriptionDispatch(acked, self.delivery.failures(tables.table), self._limits)
            if self._stopped:
                sub.handle(rules.Shutdown(), self._clock())
            gen = Generation(key, tables, sub)
        self.served[key] = gen
        return acked

    def find(self, key: str) -> Generation | None:
        """``key``'s generation, served or dropped."""
        return self.served.get(key) or self._dropped.get(key)

    def drop(self, key: str) -> None:
        """No consumer of ``key`` is left: it is no longer served; its rules forget its consumers
        and queued rows, and it is kept while an open transaction holds rows of it."""
        gen = self.served.pop(key, None)
        if gen is not None and gen.state.holds_transactions():
            gen.state.handle(rules.Drop(), self._clock())
            self._dropped[key] = gen

    def end(self, key: str, table: str) -> None:
        """Generation ``table`` of ``key`` ended (dropped before when served): a dropped one
        records nothing more, and its delivery state goes."""
        held = self._dropped.get(key)
        if held is not None and held.tables.table == table:
            held.ended = True
        self.delivery.forget(table)

    def discharged(self, gen: Generation) -> None:
        """A transaction holding rows of ``gen`` was discharged: a dropped ``gen`` holding none
        any more goes."""
        if not gen.state.holds_transactions() and self._dropped.get(gen.key) is gen:
            del self._dropped[gen.key]

    def stop(self) -> list[Generation]:
        """Shutting down: every generation, served or dropped; the dropped ones are forgotten
        (the caller fails what they hold), and any generation served from now on starts stopped."""
        self._stopped = True
        gens = [*self.served.values(), *self._dropped.values()]
        self._dropped.clear()
        return gens
