"""Which member slot a starting front end takes; pure.

Several front ends share one data dir on object storage as **members**: each holds one slot
``k`` of ``[0, max_slots)``, a lease object ``_cluster/members/<k>`` with the same life as the
owner lease of one front end (sharedsub.core.ownership.lease: created with put-if-absent,
renewed with put-if-match, an epoch bumped on each taking). Slot ``k`` is also a writer: the
member in it is the only writer of partition ``k`` of every topic (sharedsub.core.layout,
"Partitions"), so a slot taken over continues that partition under a higher epoch, and the log
fences whoever held it before.

A starting front end reads every slot and asks :func:`decide_slot`, which applies
:func:`sharedsub.core.ownership.lease.decide_take` to each slot and then chooses, first match
wins:

====  ===========================================================  ===========================
 #    some slot's own decision is                                  decision
====  ===========================================================  ===========================
 1    ``TakeOver`` (released, its holder gone, or not renewed)     take over the lowest such
                                                                   slot: its partition lives on
 2    ``Create`` (no lease object)                                 create the lowest such slot
 3    ``Watch`` (a holder not yet seen renewing)                   watch again after the
                                                                   shortest wait
 4    otherwise: every slot's holder renews                        ``Full``: refuse to start,
                                                                   naming the members
====  ===========================================================  ===========================

Taking over before creating keeps the number of partitions (tables per topic) as low as the
number of members allows. A conditional put that fails lost a race with another starting front
end: the caller reads the slots again and asks again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from sharedsub.core.ownership.lease import Create, LeaseRecord, Refuse, Seen, TakeOver, Watch, decide_take

DEFAULT_MAX_SLOTS = 16  # members of one data dir at most (each one's partition is a table per topic)


@dataclasses.dataclass(frozen=True, slots=True)
class TakeSlot:
    """Rows 1-2: take slot ``slot`` as ``how`` says (put-if-absent or put-if-match)."""

    slot: int
    how: Create | TakeOver


@dataclasses.dataclass(frozen=True, slots=True)
class WatchSlots:
    """Row 3: read the slots again after ``wait_s``."""

    wait_s: float


@dataclasses.dataclass(frozen=True, slots=True)
class Full:
    """Row 4: every slot is held by a live member (their records, by slot)."""

    holders: tuple[tuple[int, LeaseRecord], ...]


SlotDecision = TakeSlot | WatchSlots | Full


def decide_slot(slots: Sequence[Seen | None]) -> SlotDecision:
    """Rows 1-4 of the module docstring; ``slots[k]``: slot k's lease as read and watched
    (None: no object), for every slot ``k`` of the data dir (``max_slots`` of them)."""
    decisions = [decide_take(seen) for seen in slots]
    for k, decision in enumerate(decisions):
        if isinstance(decision, TakeOver):
            return TakeSlot(k, decision)
    for k, decision in enumerate(decisions):
        if isinstance(decision, Create):
            return TakeSlot(k, decision)
    waits = [d.wait_s for d in decisions if isinstance(d, Watch)]
    if waits:
        return WatchSlots(min(waits))
    return Full(tuple((k, d.holder) for k, d in enumerate(decisions) if isinstance(d, Refuse)))


def member_state(record: LeaseRecord, *, age_s: float, holder_alive: bool | None) -> str:
    """How a slot's lease looks from one reading (``sharedsub cluster status``), first match wins:
    ``released`` (its holder stopped cleanly), ``gone`` (its holder, a process of the reading
    host, is dead: ``holder_alive`` False), ``stale`` (not written for longer than its TTL by the
    store's clock, ``age_s``: its holder is probably dead or paused; a taker still watches a whole
    TTL before taking it), else ``live``. One reading cannot prove a holder alive: ``live`` means
    renewed within the TTL."""
    if record.released:
        return "released"
    if holder_alive is False:
        return "gone"
    if age_s > record.ttl_s:
        return "stale"
    return "live"


SLOT_SHIFT = 32  # a fence token keeps the member slot above the epoch's 32 bits


def fence_token(slot: int, epoch: int) -> int:
    """The number a member's commits carry as their owner epoch (the fence of the log): its
    slot's epoch, with the slot in the high bits. Slot 0's token is its epoch itself, so logs
    written by a single front end (and by the fan-out job, which holds a lease of its own) read
    as before."""
    return slot << SLOT_SHIFT | epoch


def supersedes(theirs: int, mine: int) -> bool:
    """Whether a commit carrying fence token ``theirs`` means the writer holding ``mine`` lost
    its slot: a later epoch *of the same slot*. Members of other slots share tables (the
    catalog) without fencing each other."""
    return theirs >> SLOT_SHIFT == mine >> SLOT_SHIFT and theirs > mine


def token_epoch(token: int) -> tuple[int, int]:
    """(slot, epoch) of a fence token."""
    return token >> SLOT_SHIFT, token & ((1 << SLOT_SHIFT) - 1)


def failover_peers(addresses: Sequence[str | None], own: str | None) -> list[tuple[str, int]]:
    """(host, port) of each member address (``amqp://HOST:PORT`` as a slot's lease records it)
    other than ``own``, in slot order without repeats: what a front end advertises in its open
    frame's ``failover-server-list`` (docs/wire.md §1.1), so a client on a ``failover:`` URI learns
    the other members. Every recorded member counts, a stale or released one too: a client that
    finds one down tries the next, while one left out could not be reached at all once the
    client's list is replaced (Qpid JMS replaces all but the current server by default). An
    address that is not ``amqp://HOST:PORT`` is left out."""
    peers: list[tuple[str, int]] = []
    for address in addresses:
        if address is None or address == own or not address.startswith("amqp://"):
            continue
        host, _, port = address[len("amqp://") :].rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if host and port.isdigit() and (host, int(port)) not in peers:
            peers.append((host, int(port)))
    return peers
