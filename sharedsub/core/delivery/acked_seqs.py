"""The acknowledged seqs of one subscription generation, held in memory in bounded space.

The front end must never send a row that was settled for good (accepted, rejected, expired,
dead-lettered) again, so it remembers which seqs of a subscription generation are settled
while their ack rows are on their way to the ack log and after. A plain set of every settled
seq grows with every message the subscription ever took; this one does not:

* ``floor``, one per topic partition: every row of the generation numbered in that partition
  (sharedsub.core.layout, "Partitions") with a seq at or below it is settled, as far as this
  process knows. It is raised by :meth:`AckedSeqs.advance` to just below the lowest seq of the
  partition that may still be open (the caller knows those: rows queued, sent and unsettled,
  parked, held by a transaction, and any row not read yet, which comes with a higher seq
  *within its partition* because the fan-out appends each partition's rows to a subscription
  table in seq order; rows of different partitions interleave, so one floor for all would pass
  a lower partition's rows not read yet). A partition without a floor yet has every seq open.
* ``above``: settled seqs above the floor (shared consumers settle out of order).
* ``holes``: seqs a replay opened again (:meth:`reopen`); they are not settled whatever the
  floor says, until they are settled again.

Its size is the settled seqs above the lowest open one plus the seqs a replay reopened and
that are not settled yet: bounded by the open window, not by the subscription's history.

Thread safety: one thread (the reactor) changes it; others (the tailer) may test membership.
Every change replaces the whole state tuple at once, so a reader sees one consistent state
(possibly a slightly old one: the reactor tests membership again before it sends).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from sharedsub.core import layout

_BITS = layout.PARTITION_BITS  # a seq's topic partition is in its high bits


def _floor_of(floors: Mapping[int, int], partition: int) -> int:
    return floors.get(partition, (partition << _BITS) - 1)


class AckedSeqs:
    """Settled seqs of one subscription generation (see module docstring)."""

    __slots__ = ("_state",)

    def __init__(self, seqs: Iterable[int] = (), *, floor: int = -1) -> None:
        """``floor``: partition 0's (the others start with none)."""
        self._state: tuple[dict[int, int], set[int], frozenset[int]] = (
            {0: floor}, {s for s in seqs if s > _floor_of({0: floor}, s >> _BITS)}, frozenset()
        )

    @property
    def floor(self) -> int:
        """Partition 0's floor: every seq of it at or below the floor that is not a hole is settled."""
        return _floor_of(self._state[0], 0)

    def floor_of(self, partition: int) -> int:
        """Partition ``partition``'s floor (the seq before its first when it has none yet)."""
        return _floor_of(self._state[0], partition)

    @property
    def holes(self) -> frozenset[int]:
        """Seqs reopened by a replay and not settled again."""
        return self._state[2]

    def held(self) -> int:
        """How many seqs this holds explicitly (the memory it takes grows with this)."""
        _floors, above, holes = self._state
        return len(above) + len(holes)

    def lowest_unsettled(self, partition: int = 0) -> int:
        """A seq of ``partition`` such that every row of it below that seq is settled as far as
        this knows: its floor + 1, or a lower hole of it."""
        floors, _above, holes = self._state
        floor = _floor_of(floors, partition)
        return min(floor + 1, min((h for h in holes if h >> _BITS == partition), default=floor + 1))

    def __contains__(self, seq: object) -> bool:
        floors, above, holes = self._state
        if not isinstance(seq, int) or seq in holes:
            return False
        return seq <= _floor_of(floors, seq >> _BITS) or seq in above

    def __iter__(self) -> Iterator[int]:
        """The explicit settled seqs above the floor (not those the floor covers)."""
        return iter(tuple(self._state[1]))

    def add(self, seq: int) -> None:
        """``seq`` is settled for good."""
        floors, above, holes = self._state
        if seq in holes:
            holes = holes - {seq}
            self._state = (floors, above, holes)
        if seq > _floor_of(floors, seq >> _BITS):
            above.add(seq)

    def update(self, seqs: Iterable[int]) -> None:
        """Each of ``seqs`` is settled for good."""
        for seq in seqs:
            self.add(seq)

    def reopen(self, seqs: Iterable[int]) -> None:
        """A replay opened ``seqs`` again: none of them counts as settled until settled again."""
        floors, above, holes = self._state
        seqs = frozenset(seqs)
        self._state = (floors, set(above) - seqs, holes | seqs)

    def advance(self, lowest_open: int | Mapping[int, int]) -> None:
        """No row below ``lowest_open`` (a seq, for its partition; or ``{partition: seq}``) that
        is not a hole can still be open: raise each partition's floor to just below it and forget
        the explicit seqs it now covers. Never lowers a floor."""
        floors, above, holes = self._state
        wanted = {lowest_open >> _BITS: lowest_open} if isinstance(lowest_open, int) else lowest_open
        raised = dict(floors)
        for partition, low in wanted.items():
            if low - 1 > _floor_of(floors, partition):
                raised[partition] = low - 1
        if raised == floors:
            return
        self._state = (raised, {s for s in above if s > _floor_of(raised, s >> _BITS)}, holes)
