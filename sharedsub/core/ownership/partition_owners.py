"""Who dispatches each topic partition of a subscription generation; pure.

With several members, one subscription's consumers may sit on several front ends. Each row of a
subscription table belongs to the topic partition its seq was numbered in
(sharedsub.core.layout, "Partitions"), and each partition of a generation has at most one
**dispatch owner**: the member that tails those rows, sends them round-robin to its own consumer
links and records their settlements. One owner per partition is what keeps each message to one
consumer while members are healthy; a partition moves between members, never a message.

**Desired owners** (:func:`desired_owners`), from the members that have consumers of the
generation now (every member computes the same from the same reading, so they converge without
talking to each other):

* no member has consumers: nobody owns anything (rows wait in the table);
* partition ``p`` goes to member ``p`` (its writer) when that member has consumers: its payload
  cache holds the messages it wrote;
* every other partition goes to the member with consumers that has the fewest partitions so far
  (ties: the lowest slot), partitions taken in ascending order.

A member with consumers may get no partition (more members with consumers than partitions): its
consumers wait, and its /health says so.

**What a member does** (:func:`decide`) per partition, given the current owner record (its slot,
and whether that slot's epoch is still the one that wrote it: a record of a dead epoch is void):

====  =====================  ===============================  ================================
 #    desired owner          current owner                    action
====  =====================  ===============================  ================================
 1    me                     me                               ``keep``
 2    me                     none, or a void record           ``take`` (a conditional put: one
                                                              taker wins)
 3    me                     another live member              ``wait`` (it drains and releases)
 4    another, or nobody     me                               ``release``: stop sending its
                                                              rows, wait a bounded time for
                                                              the outstanding ones to settle,
                                                              then delete the record
 5    another, or nobody     another, or none                 nothing
====  =====================  ===============================  ================================

A taken-over partition (row 2 after its owner died) is read again from its backlog: rows not in
the ack log go out again marked possibly delivered, as after a restart (docs/design.md §5).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence


class Action(enum.Enum):
    """What a member does about one partition (module docstring, rows 1-5)."""

    KEEP = "keep"
    TAKE = "take"
    WAIT = "wait"
    RELEASE = "release"
    NOTHING = "nothing"


@dataclasses.dataclass(frozen=True, slots=True)
class Owner:
    """A partition's owner record as read: the owning member's slot, and whether the epoch it
    was written under is still that slot's (False: the member died or lost its slot since)."""

    slot: int
    live: bool


def desired_owners(partitions: Sequence[int], with_consumers: Sequence[int]) -> dict[int, int | None]:
    """Partition -> the member slot that should dispatch it (None: nobody); module docstring."""
    members = sorted(set(with_consumers))
    owners: dict[int, int | None] = {p: None for p in partitions}
    if not members:
        return owners
    load = {m: 0 for m in members}
    for p in sorted(partitions):
        if p in load:
            owners[p] = p
            load[p] += 1
    for p in sorted(partitions):
        if owners[p] is None:
            chosen = min(members, key=lambda m: (load[m], m))
            owners[p] = chosen
            load[chosen] += 1
    return owners


def decide(
    me: int, partitions: Sequence[int], with_consumers: Sequence[int], owners: Mapping[int, Owner | None]
) -> dict[int, Action]:
    """Partition -> what member ``me`` does about it (rows 1-5 of the module docstring);
    ``owners``: each partition's current record (missing or None: no record)."""
    desired = desired_owners(partitions, with_consumers)
    actions: dict[int, Action] = {}
    for p in partitions:
        current = owners.get(p)
        mine = current is not None and current.slot == me
        if desired[p] == me:
            if mine:
                actions[p] = Action.KEEP
            elif current is None or not current.live:
                actions[p] = Action.TAKE
            else:
                actions[p] = Action.WAIT
        else:
            actions[p] = Action.RELEASE if mine else Action.NOTHING
    return actions


def idle_members(partitions: Sequence[int], with_consumers: Sequence[int]) -> list[int]:
    """The members with consumers that get no partition (their consumers wait)."""
    owning = {o for o in desired_owners(partitions, with_consumers).values() if o is not None}
    return sorted(set(with_consumers) - owning)
