"""The member-slot table of sharedsub.core.ownership.members, row by row."""

from __future__ import annotations

import dataclasses

import pytest

from sharedsub.core.ownership.lease import Create, LeaseRecord, Seen, TakeOver
from sharedsub.core.ownership.members import (
    Full,
    SlotDecision,
    TakeSlot,
    WatchSlots,
    decide_slot,
    failover_peers,
    fence_token,
    member_state,
    supersedes,
    token_epoch,
)

A = LeaseRecord("host-a:41:ab12", epoch=4, host="host-a", pid=41, ttl_s=15.0, renew_s=3.0, amqp="amqp://a:5672")
B = dataclasses.replace(A, holder="host-b:7:cd34", host="host-b", pid=7, epoch=2, amqp="amqp://b:5672")


def live(rec: LeaseRecord) -> Seen:
    """Seen renewing while watched."""
    return Seen(rec, '"t"', 2.0, True, None)


def unsure(rec: LeaseRecord, watched: float = 0.0) -> Seen:
    """Not seen renewing yet (another host's)."""
    return Seen(rec, '"t"', watched, False, None)


def gone(rec: LeaseRecord) -> Seen:
    """Its holder, a process of this host, is gone."""
    return Seen(rec, '"t"', 0.0, False, False)


def released(rec: LeaseRecord) -> Seen:
    return Seen(dataclasses.replace(rec, released=True), '"t"', 0.0, False, None)


TAKE_B = TakeOver(3, '"t"', "released by its holder")

ROWS: list[tuple[str, list[Seen | None], SlotDecision]] = [
    ("2 an empty data dir: slot 0", [None, None, None], TakeSlot(0, Create(1))),
    ("2 the lowest free slot", [live(A), None, None], TakeSlot(1, Create(1))),
    ("2 a gap is filled first", [live(A), None, live(B)], TakeSlot(1, Create(1))),
    ("1 a released slot before a free one", [live(A), released(B), None], TakeSlot(1, TAKE_B)),
    (
        "1 a dead holder's slot before a free one",
        [None, gone(A)],
        TakeSlot(1, TakeOver(5, '"t"', "its holder, process 41 of this host, is gone")),
    ),
    ("1 an expired slot", [unsure(A, watched=15.0), None], TakeSlot(0, TakeOver(5, '"t"', "not renewed for 15 s (ttl 15 s)"))),
    ("2 a free slot rather than waiting on an unsure one", [unsure(A), None], TakeSlot(1, Create(1))),
    ("3 all held, one unsure: watch", [live(A), unsure(B, watched=13.5)], WatchSlots(1.5)),
    ("3 the shortest wait", [unsure(A, watched=1.0), unsure(B, watched=14.0)], WatchSlots(1.0)),
    ("4 all held and renewing: full", [live(A), live(B)], Full(((0, A), (1, B)))),
]


@pytest.mark.parametrize(("row", "slots", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_choosing_a_slot(row: str, slots: list[Seen | None], expected: SlotDecision) -> None:
    assert decide_slot(slots) == expected, row


@pytest.mark.parametrize(
    ("row", "record", "age", "alive", "state"),
    [
        ("released", dataclasses.replace(A, released=True), 0.0, False, "released"),
        ("its process of this host is dead", A, 1.0, False, "gone"),
        ("not written for longer than its ttl", A, 15.5, None, "stale"),
        ("renewed within its ttl", A, 2.0, None, "live"),
        ("renewed, its process of this host alive", A, 2.0, True, "live"),
    ],
)
def test_how_a_slot_looks_from_one_reading(row: str, record: LeaseRecord, age: float, alive: bool | None, state: str) -> None:
    assert member_state(record, age_s=age, holder_alive=alive) == state, row


@pytest.mark.parametrize(
    ("theirs", "mine", "fenced"),
    [
        ((0, 5), (0, 4), True),  # slot 0 taken over: its old holder is fenced
        ((0, 4), (0, 4), False),  # its own commits
        ((0, 3), (0, 4), False),  # an older holder's commits
        ((1, 1), (0, 4), False),  # another member's commits to a shared table
        ((0, 9), (1, 1), False),
        ((1, 2), (1, 1), True),  # slot 1 taken over
    ],
)
def test_only_a_later_epoch_of_the_same_slot_fences(theirs: tuple[int, int], mine: tuple[int, int], fenced: bool) -> None:
    assert supersedes(fence_token(*theirs), fence_token(*mine)) is fenced
    assert token_epoch(fence_token(*mine)) == mine


def test_slot_0s_token_is_its_epoch() -> None:
    assert fence_token(0, 7) == 7


@pytest.mark.parametrize(
    ("addresses", "own", "peers"),
    [
        (["amqp://a:5672", "amqp://b:5673"], "amqp://a:5672", [("b", 5673)]),
        (["amqp://a:5672"], "amqp://a:5672", []),
        ([None, "amqp://b:1", "amqp://b:1", "amqp://c:2"], None, [("b", 1), ("c", 2)]),
        (["amqp://[::1]:5672", "amqps://d:5671", "amqp://e", "amqp://:5"], None, [("::1", 5672)]),
    ],
)
def test_the_failover_list_names_every_other_member(
    addresses: list[str | None], own: str | None, peers: list[tuple[str, int]]
) -> None:
    assert failover_peers(addresses, own) == peers
