"""The front end's bound on accepted-but-uncommitted bytes (docs/design.md §5: nothing accepted is lost,
and memory stays bounded while the committer is behind); pure.

Publishers get link credit and each committed (or refused) message returns one credit, so one
link can never hold more than its credit uncommitted; with many links the sum could still grow
without bound. This window counts the bytes queued for commit over all links: while they reach
the limit, credit a link has earned is owed instead of granted (the publisher slows to the pace
of the commits), and it is paid once commits bring the total below the limit. Credit is only
withheld while something is queued, and each commit lowers the total, so owed credit is always
paid eventually.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

LinkT = TypeVar("LinkT", bound=Hashable)


class PublishWindow(Generic[LinkT]):
    """Uncommitted bytes of all publishers and the credit owed while over ``limit`` (0 = no limit).

    ``LinkT`` is whatever identifies a publisher link (the front end's proton links)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.uncommitted = 0
        self._owed: dict[LinkT, int] = {}

    @property
    def full(self) -> bool:
        """True while the queued bytes reach the limit."""
        return bool(self.limit) and self.uncommitted >= self.limit

    def queued(self, size: int) -> None:
        """A message of ``size`` bytes was handed to the committer."""
        self.uncommitted += size

    def committed(self, size: int) -> None:
        """The commit of a message of ``size`` bytes is done (stored or failed)."""
        self.uncommitted = max(0, self.uncommitted - size)

    def grant(self, link: LinkT, credit: int) -> int:
        """Credit to give ``link`` now: ``credit``, or 0 while full (then it is owed)."""
        if credit <= 0:
            return 0
        if self.full:
            self._owed[link] = self._owed.get(link, 0) + credit
            return 0
        return credit

    def release(self) -> list[tuple[LinkT, int]]:
        """The owed credit to give now (everything, once below the limit; else nothing)."""
        if self.full or not self._owed:
            return []
        owed, self._owed = list(self._owed.items()), {}
        return owed

    def owed(self, link: LinkT) -> int:
        """Credit withheld from ``link`` so far."""
        return self._owed.get(link, 0)
