"""sharedsub.core.delivery.acked_seqs as a table, and the dispatch rules keeping it bounded."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from sharedsub.core.delivery.acked_seqs import AckedSeqs
from sharedsub.core.delivery.dispatch import (
    AddConsumer,
    Discharge,
    Drop,
    Offer,
    RemoveConsumer,
    Send,
    Settle,
    SettleTransactional,
    SubscriptionDispatch,
)
from sharedsub.core.delivery.outcomes import Limits, Settlement


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    steps: tuple[tuple[str, Any], ...]
    inside: frozenset[int]  # seqs that must test as acknowledged (checked over 0..20)
    floor: int
    held: int


def _case(id: str, steps: tuple[tuple[str, Any], ...], inside: set[int], floor: int, held: int) -> Case:
    return Case(id, steps, frozenset(inside), floor, held)


CASES = [
    _case("empty", (), set(), -1, 0),
    _case("add", (("add", 3), ("add", 5)), {3, 5}, -1, 2),
    _case("advance covers", (("add", 0), ("add", 1), ("add", 4), ("advance", 3)), {0, 1, 2, 4}, 2, 1),
    _case("advance never lowers", (("advance", 5), ("advance", 2)), {0, 1, 2, 3, 4}, 4, 0),
    _case("add below floor is a no-op", (("advance", 5), ("add", 2)), {0, 1, 2, 3, 4}, 4, 0),
    _case("reopen above floor", (("add", 7), ("add", 8), ("reopen", {7})), {8}, -1, 2),
    _case("reopen below floor", (("advance", 5), ("reopen", {1, 3})), {0, 2, 4}, 4, 2),
    _case("hole survives advance", (("reopen", {2}), ("advance", 6)), {0, 1, 3, 4, 5}, 5, 1),
    _case("hole settled again", (("advance", 5), ("reopen", {1}), ("add", 1)), {0, 1, 2, 3, 4}, 4, 0),
    _case("initial seqs", (("init", {1, 2}),), {1, 2}, -1, 2),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_acked_seqs_table(case: Case) -> None:
    acked = AckedSeqs()
    for op, arg in case.steps:
        match op:
            case "init":
                acked = AckedSeqs(arg)
            case "add":
                acked.add(arg)
            case "advance":
                acked.advance(arg)
            case "reopen":
                acked.reopen(arg)
    assert {s for s in range(21) if s in acked} == case.inside
    assert acked.floor == case.floor
    assert acked.held() == case.held


def test_non_int_is_never_inside() -> None:
    assert "1" not in AckedSeqs([1])


# ------------------------------------------------------------------ bounded by the open window


@dataclasses.dataclass(frozen=True)
class _R:
    seq: int
    expires_at: int | None = None
    failures: int = 0
    maybe_delivered: bool = False


def _sent(effects: list[Any]) -> list[Send]:
    return [e for e in effects if isinstance(e, Send)]


def test_a_long_run_holds_only_the_open_window_and_forgets_nothing_open() -> None:
    """100,000 rows through three shared consumers settling out of order (accept, release,
    fail, transactions), with drops and returns: the explicit seqs stay within a small bound,
    and no row that is open ever tests as acknowledged."""
    rng = random.Random(11)
    acked = AckedSeqs()
    sub = SubscriptionDispatch(acked, {}, Limits(0))
    outstanding: dict[int, int] = {}  # seq -> consumer (the wire's view)
    accepted: set[int] = set()
    most_held = 0
    consumers = [1, 2, 3]
    for c in consumers:
        sub.handle(AddConsumer(c, 50), 0)
    txn_rows: list[tuple[int, int]] = []
    next_seq = 0
    unread: list[int] = []  # rows forgotten by a drop: the table gives them again
    while next_seq < 100_000 or outstanding or unread:
        if unread:
            batch, unread = sorted(unread), []
        else:
            batch = list(range(next_seq, min(next_seq + 100, 100_000)))
            next_seq += len(batch)
        effects = sub.handle(Offer(tuple(_R(s) for s in batch)), 0)
        for send in _sent(effects):
            outstanding[send.row.seq] = send.consumer
        # Settle most of what is out, in random order, leaving some open for a while.
        for seq in rng.sample(sorted(outstanding), k=(len(outstanding) * 3 + 3) // 4):
            consumer = outstanding.pop(seq)
            roll = rng.random()
            if roll < 0.02:
                sub.handle(SettleTransactional(b"T", Settle(consumer, seq, Settlement.ACCEPTED)), 0)
                txn_rows.append((consumer, seq))
                continue
            settlement = Settlement.RELEASED if roll < 0.05 else Settlement.ACCEPTED
            effects = sub.handle(Settle(consumer, seq, settlement), 0)
            if settlement == Settlement.ACCEPTED:
                accepted.add(seq)
            for send in _sent(effects):
                outstanding[send.row.seq] = send.consumer
        if txn_rows and rng.random() < 0.1:
            commit = rng.random() < 0.5
            effects = sub.handle(Discharge(b"T", commit), 0)
            if commit:
                accepted.update(seq for _c, seq in txn_rows)
            txn_rows = []
            for send in _sent(effects):
                outstanding[send.row.seq] = send.consumer
        if rng.random() < 0.01:  # every consumer goes; the rows not acknowledged are read again
            for c in consumers:
                sub.handle(RemoveConsumer(c), 0)
            pending = set(sub.pending) | set(sub.parked)
            sub.handle(Drop(), 0)
            unread = sorted(pending)
            outstanding.clear()
            for c in consumers:
                sub.handle(AddConsumer(c, 50), 0)
        for c in consumers:  # credit back to 50 each
            sub.set_credit(c, 50)
        effects = sub.handle(AddConsumer(1, 50), 0)
        for send in _sent(effects):
            outstanding[send.row.seq] = send.consumer
        most_held = max(most_held, acked.held())
        open_now = set(outstanding) | set(sub.pending) | set(unread)
        open_now |= {s for seqs in sub.held.values() for s in seqs}
        assert not any(s in acked for s in open_now)
        if len(accepted) > 1000 and rng.random() < 0.05:
            assert all(s in acked for s in rng.sample(sorted(accepted), 100))
    assert all(s in acked for s in accepted)
    assert acked.floor > 50_000  # raised as it went (it is raised when the explicit seqs double)
    assert most_held < 10_000, most_held  # about twice the open window, whatever the count of rows


# ------------------------------------------------------------------ topic partitions

P1 = 1 << 40  # partition 1's first seq (sharedsub.core.layout)


def test_each_partition_has_its_own_floor() -> None:
    acked = AckedSeqs()
    acked.update([P1, P1 + 1, P1 + 3, 0])
    acked.advance({1: P1 + 3})  # partition 1 open from P1 + 3: its floor is P1 + 2
    assert (acked.floor, acked.floor_of(1), acked.floor_of(2)) == (-1, P1 + 2, 2 * P1 - 1)
    assert [s in acked for s in (0, 1, P1, P1 + 2, P1 + 3, P1 + 4)] == [True, False, True, True, True, False]
    acked.advance(5)  # a seq: its own partition's
    assert (acked.floor, acked.floor_of(1)) == (4, P1 + 2) and acked.held() == 1  # P1 + 3 above its floor
    acked.reopen([P1 + 1])
    assert P1 + 1 not in acked and acked.lowest_unsettled(1) == P1 + 1 and acked.lowest_unsettled() == 5


def test_a_partition_not_read_yet_is_not_covered_by_another_partitions_floor() -> None:
    """Rows of partition 1 committed (and read) before rows of partition 0: settling them raises
    partition 1's floor only, so partition 0's rows still go out when they come."""
    acked = AckedSeqs()
    sub = SubscriptionDispatch(acked, {}, Limits(0))
    sub.handle(AddConsumer(1, 10_000), 0)
    effects = sub.handle(Offer(tuple(_R(P1 + i) for i in range(3000))), 0)
    for send in _sent(effects):
        sub.handle(Settle(1, send.row.seq, Settlement.ACCEPTED), 0)
    assert acked.floor_of(1) >= P1 + 1000 and acked.held() < 3000  # raised as it went
    assert acked.floor == -1 and not any(s in acked for s in range(100))
    effects = sub.handle(Offer(tuple(_R(i) for i in range(100))), 0)
    assert sorted(s.row.seq for s in _sent(effects)) == list(range(100))
