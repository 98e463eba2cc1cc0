"""The local-transaction rules (sharedsub.core.delivery.transactions), one row per rule of its table."""

from __future__ import annotations

import pytest

from sharedsub.core.conditions import AmqpCondition
from sharedsub.core.delivery.transactions import Commit, Limits, Rollback, Transactions
from sharedsub.core.errors import TransactionTooLarge, UnknownTransaction

CONN_A, CONN_B = "conn-a", "conn-b"
COORD_A, COORD_A2, COORD_B = "coord-a", "coord-a2", "coord-b"


def _registry(**limits: int) -> Transactions:
    return Transactions(Limits(**limits))


def test_declare_gives_distinct_ids() -> None:
    txns = _registry()
    ids = {txns.declare(CONN_A, COORD_A) for _ in range(50)}
    assert len(ids) == 50 and all(isinstance(i, bytes) and i for i in ids)


def test_commit_returns_every_held_publish_in_order() -> None:
    txns = _registry()
    t = txns.declare(CONN_A, COORD_A)
    for i in range(3):
        txns.enlist(t, CONN_A, f"m{i}", 10)
    assert txns.discharge(t, CONN_A, fail=False) == Commit(t, ("m0", "m1", "m2"))
    assert len(txns) == 0


def test_commit_of_an_empty_transaction() -> None:
    txns = _registry()
    t = txns.declare(CONN_A, COORD_A)
    assert txns.discharge(t, CONN_A, fail=False) == Commit(t, ())


def test_fail_true_rolls_back_without_reason() -> None:
    txns = _registry()
    t = txns.declare(CONN_A, COORD_A)
    txns.enlist(t, CONN_A, "m", 1)
    assert txns.discharge(t, CONN_A, fail=True) == Rollback(t)


@pytest.mark.parametrize(
    "action",
    ["enlist", "check", "discharge"],
)
def test_another_connections_transaction_is_unknown(action: str) -> None:
    txns = _registry()
    t = txns.declare(CONN_A, COORD_A)
    calls = {
        "enlist": lambda: txns.enlist(t, CONN_B, "m", 1),
        "check": lambda: txns.check(t, CONN_B),
        "discharge": lambda: txns.discharge(t, CONN_B, fail=False),
    }
    with pytest.raises(UnknownTransaction) as info:
        calls[action]()
    assert info.value.condition == AmqpCondition.TRANSACTION_UNKNOWN_ID
    assert t.hex() in info.value.description
    # ... and A's transaction is untouched by the attempt
    assert txns.discharge(t, CONN_A, fail=False) == Commit(t, ())


def test_discharged_transaction_is_unknown_afterwards() -> None:
    txns = _registry()
    t = txns.declare(CONN_A, COORD_A)
    txns.discharge(t, CONN_A, fail=False)
    with pytest.raises(UnknownTransaction):
        txns.discharge(t, CONN_A, fail=False)
    with pytest.raises(UnknownTransaction):
        txns.enlist(t, CONN_A, "late", 1)


@pytest.mark.parametrize(
    ("limits", "sizes", "limit_text"),
    [({"max_messages": 2}, [1, 1, 1], "2 messages"), ({"max_bytes": 100}, [60, 60], "100 bytes")],
    ids=["message-limit", "byte-limit"],
)
def test_past_the_limits_the_publish_is_refused_and_the_transaction_rolls_back(
    limits: dict[str, int], sizes: list[int], limit_text: str
) -> None:
    txns = _registry(**limits)
    t = txns.declare(CONN_A, COORD_A)
    for size in sizes[:-1]:
        txns.enlist(t, CONN_A, "ok", size)
    with pytest.raises(TransactionTooLarge) as info:
        txns.enlist(t, CONN_A, "too much", sizes[-1])
    assert info.value.condition == AmqpCondition.RESOURCE_LIMIT_EXCEEDED
    assert limit_text in info.value.description
    decision = txns.discharge(t, CONN_A, fail=False)
    assert isinstance(decision, Rollback) and decision.reason is not None and limit_text in decision.reason


def test_zero_limits_mean_unlimited() -> None:
    txns = _registry(max_messages=0, max_bytes=0)
    t = txns.declare(CONN_A, COORD_A)
    for _ in range(1000):
        txns.enlist(t, CONN_A, "m", 1 << 20)
    decision = txns.discharge(t, CONN_A, fail=False)
    assert isinstance(decision, Commit) and len(decision.publishes) == 1000


def test_controller_gone_rolls_back_only_its_transactions() -> None:
    txns = _registry()
    a1 = txns.declare(CONN_A, COORD_A)
    a2 = txns.declare(CONN_A, COORD_A2)
    b = txns.declare(CONN_B, COORD_B)
    assert txns.controller_gone(COORD_A) == [Rollback(a1)]
    assert txns.discharge(a2, CONN_A, fail=False) == Commit(a2, ())
    assert txns.discharge(b, CONN_B, fail=False) == Commit(b, ())


def test_connection_gone_rolls_back_its_transactions_only() -> None:
    txns = _registry()
    a1 = txns.declare(CONN_A, COORD_A)
    a2 = txns.declare(CONN_A, COORD_A2)
    b = txns.declare(CONN_B, COORD_B)
    assert sorted(r.txn_id for r in txns.owner_gone(CONN_A)) == sorted([a1, a2])
    assert txns.owner_gone(CONN_A) == []
    assert txns.discharge(b, CONN_B, fail=True) == Rollback(b)


def test_a_transaction_being_committed_is_not_rolled_back_by_its_connection_going() -> None:
    txns = _registry()
    t = txns.declare(CONN_A, COORD_A)
    txns.enlist(t, CONN_A, "m", 1)
    assert isinstance(txns.discharge(t, CONN_A, fail=False), Commit)
    assert txns.owner_gone(CONN_A) == []
