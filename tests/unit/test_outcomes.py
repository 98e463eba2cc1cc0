"""The delivery-outcome rule (sharedsub/core/delivery/outcomes.py) as a table."""

from __future__ import annotations

import pytest

from sharedsub.core.delivery.outcomes import (
    Ack,
    AckOutcome,
    DeadLetter,
    DeadLetterReason,
    Limits,
    Requeue,
    Settlement,
    decide,
    expires_at,
    is_expired,
    is_final,
)

S = Settlement
TEN = Limits(max_delivery_count=10)
UNLIMITED = Limits(max_delivery_count=0)


@pytest.mark.parametrize(
    ("settlement", "count", "limits", "failed", "here", "expected"),
    [
        (S.ACCEPTED, 0, TEN, False, False, Ack(AckOutcome.ACCEPTED)),
        (S.ACCEPTED, 9, TEN, False, False, Ack(AckOutcome.ACCEPTED)),
        (S.RELEASED, 0, TEN, False, False, Requeue(0)),
        (S.RELEASED, 3, TEN, False, False, Requeue(3)),
        # released never counts, even at the limit
        (S.RELEASED, 9, TEN, False, False, Requeue(9)),
        (S.MODIFIED, 0, TEN, True, False, Requeue(1, failed=True)),
        (S.MODIFIED, 4, TEN, True, False, Requeue(5, failed=True)),
        (S.MODIFIED, 0, TEN, False, True, Requeue(0, exclude_link=True)),
        (S.MODIFIED, 2, TEN, True, True, Requeue(3, exclude_link=True, failed=True)),
        # modified with neither flag: like released
        (S.MODIFIED, 2, TEN, False, False, Requeue(2)),
        (S.REJECTED, 0, TEN, False, False, DeadLetter(DeadLetterReason.REJECTED, 0)),
        (S.REJECTED, 5, TEN, False, False, DeadLetter(DeadLetterReason.REJECTED, 5)),
        # the flags of a modified outcome mean nothing for other settlements
        (S.REJECTED, 1, TEN, True, True, DeadLetter(DeadLetterReason.REJECTED, 1)),
        (S.RELEASED, 1, TEN, True, True, Requeue(1)),
        (S.LINK_LOST, 0, TEN, False, False, Requeue(1, failed=True)),
        (S.LINK_LOST, 8, TEN, False, False, Requeue(9, failed=True)),
        # the failure that brings the count to the limit dead-letters
        (S.LINK_LOST, 9, TEN, False, False, DeadLetter(DeadLetterReason.MAX_DELIVERY_COUNT, 10)),
        (S.MODIFIED, 9, TEN, True, False, DeadLetter(DeadLetterReason.MAX_DELIVERY_COUNT, 10)),
        (S.MODIFIED, 9, TEN, True, True, DeadLetter(DeadLetterReason.MAX_DELIVERY_COUNT, 10)),
        (S.MODIFIED, 0, Limits(1), True, False, DeadLetter(DeadLetterReason.MAX_DELIVERY_COUNT, 1)),
        (S.LINK_LOST, 0, Limits(1), False, False, DeadLetter(DeadLetterReason.MAX_DELIVERY_COUNT, 1)),
        # a count already past a lowered limit dead-letters on the next failure
        (S.MODIFIED, 20, TEN, True, False, DeadLetter(DeadLetterReason.MAX_DELIVERY_COUNT, 21)),
        # undeliverable-here alone is not a failure: no limit applies
        (S.MODIFIED, 9, TEN, False, True, Requeue(9, exclude_link=True)),
        # 0 = unlimited
        (S.MODIFIED, 1000, UNLIMITED, True, False, Requeue(1001, failed=True)),
        (S.LINK_LOST, 1000, UNLIMITED, False, False, Requeue(1001, failed=True)),
    ],
)
def test_decide(settlement: Settlement, count: int, limits: Limits, failed: bool, here: bool, expected: object) -> None:
    assert decide(settlement, count, limits, delivery_failed=failed, undeliverable_here=here) == expected


@pytest.mark.parametrize(
    ("ttl", "absolute", "published", "expected"),
    [
        (None, None, 1000, None),
        (0, 0, 1000, None),  # JMS: 0 = never expires
        (500, None, 1000, 1500),
        (None, 1200, 1000, 1200),
        (500, 1200, 1000, 1200),  # the earlier wins
        (100, 1200, 1000, 1100),
        (500, 0, 1000, 1500),
        (0, 1200, 1000, 1200),
        (-5, None, 1000, None),  # nonsense ttl: ignored
        (500, None, None, None),  # no receipt time: a ttl cannot be applied
    ],
)
def test_expires_at(ttl: int | None, absolute: int | None, published: int | None, expected: int | None) -> None:
    assert expires_at(ttl, absolute, published) == expected


@pytest.mark.parametrize(
    ("expiry", "now", "expected"),
    [(None, 10**15, False), (1500, 1499, False), (1500, 1500, True), (1500, 1501, True)],
)
def test_is_expired(expiry: int | None, now: int, expected: bool) -> None:
    assert is_expired(expiry, now) is expected


@pytest.mark.parametrize(
    ("outcome", "final"),
    [("accepted", True), ("dead-lettered", True), ("expired", True), ("rejected", True), ("failed", False)],
)
def test_final_ack_outcomes(outcome: str, final: bool) -> None:
    assert is_final(outcome) is final
