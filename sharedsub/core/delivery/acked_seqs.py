"""The acknowledged seqs of one subscription generation, held in memory in bounded space.

The front end must never send a row that was settled for good (accepted, rejected, expired,
dead-lettered) again, so it remembers which seqs of a subscription generation are settled
while their ack rows are on their way to the ack log and after. A plain set of every settled
seq grows with every message the subscription ever took; this one does not:

* ``floor``: every row of the generation with a seq at or below it is settled, as far as this
  process knows. It is raised by :meth:`AckedSeqs.advance` to just below the lowest seq that
  may still be open (the caller knows those: rows queued, sent and unsettled, parked, held by a
  transaction, and any row not read yet, which comes with a higher seq because the fan-out
  appends to a subscription table in seq order).
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

from collections.abc import Iterable, Iterator


class AckedSeqs:
    """Settled seqs of one subscription generation (see module docstring)."""

    __slots__ = ("_state",)

    def __init__(self, seqs: Iterable[int] = (), *, floor: int = -1) -> None:
        self._state: tuple[int, set[int], frozenset[int]] = (floor, {s for s in seqs if s > floor}, frozenset())

    @property
    def floor(self) -> int:
        """Every seq at or below it that is not a hole is settled."""
        return self._state[0]

    @property
    def holes(self) -> frozenset[int]:
        """Seqs reopened by a replay and not settled again."""
        return self._state[2]

    def held(self) -> int:
        """How many seqs this holds explicitly (the memory it takes grows with this)."""
        floor, above, holes = self._state
        return len(above) + len(holes)

    def lowest_unsettled(self) -> int:
        """A seq such that every row below it is settled as far as this knows: the floor + 1,
        or a lower hole."""
        floor, _above, holes = self._state
        return min(floor + 1, min(holes, default=floor + 1))

    def __contains__(self, seq: object) -> bool:
        floor, above, holes = self._state
        if not isinstance(seq, int) or seq in holes:
            return False
        return seq <= floor or seq in above

    def __iter__(self) -> Iterator[int]:
        """The explicit settled seqs above the floor (not those the floor covers)."""
        return iter(tuple(self._state[1]))

    def add(self, seq: int) -> None:
        """``seq`` is settled for good."""
        floor, above, holes = self._state
        if seq in holes:
            holes = holes - {seq}
            self._state = (floor, above, holes)
        if seq > floor:
            above.add(seq)

    def update(self, seqs: Iterable[int]) -> None:
        """Each of ``seqs`` is settled for good."""
        for seq in seqs:
            self.add(seq)

    def reopen(self, seqs: Iterable[int]) -> None:
        """A replay opened ``seqs`` again: none of them counts as settled until settled again."""
        floor, above, holes = self._state
        seqs = frozenset(seqs)
        self._state = (floor, set(above) - seqs, holes | seqs)

    def advance(self, lowest_open: int) -> None:
        """No row below ``lowest_open`` that is not a hole can still be open: raise the floor to
        just below it and forget the explicit seqs it now covers. Never lowers the floor."""
        floor, above, holes = self._state
        if lowest_open - 1 <= floor:
            return
        floor = lowest_open - 1
        self._state = (floor, {s for s in above if s > floor}, holes)
