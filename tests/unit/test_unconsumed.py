"""sharedsub.core.ownership.unconsumed as a table: which non-durable subscriptions a member ends
when no live member consumes them."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from sharedsub.core.model import ExpiryPolicy, SubscriptionKey, SubscriptionRecord, SubscriptionState
from sharedsub.core.ownership.unconsumed import Verdict, looked_at, verdict

NOW = dt.datetime(2026, 11, 28, tzinfo=dt.UTC)


def _record(
    *, shared: bool, durable: bool, expiry: ExpiryPolicy, state: SubscriptionState = SubscriptionState.ACTIVE
) -> SubscriptionRecord:
    return SubscriptionRecord(
        identity=SubscriptionKey("global", "s", shared, durable),
        generation=3,
        state=state,
        topic="t",
        binding="#",
        selector=None,
        no_local=False,
        expiry_policy=expiry,
        start_seq=0,
        source="{}",
        created_at=NOW,
        updated_at=NOW,
    )


SHARED_VOLATILE = _record(shared=True, durable=False, expiry=ExpiryPolicy.LINK_DETACH)
PLAIN = _record(shared=False, durable=False, expiry=ExpiryPolicy.SESSION_END)


@pytest.mark.parametrize(
    ("record", "looked"),
    [
        (_record(shared=True, durable=True, expiry=ExpiryPolicy.NEVER), False),  # row 1
        (_record(shared=False, durable=True, expiry=ExpiryPolicy.NEVER), False),  # row 1
        (_record(shared=True, durable=False, expiry=ExpiryPolicy.SESSION_END), False),  # row 2
        (_record(shared=True, durable=False, expiry=ExpiryPolicy.CONNECTION_CLOSE), False),  # row 2
        (SHARED_VOLATILE, True),
        (PLAIN, True),  # a plain consumer's subscription is its one link's, whatever its expiry
        (dataclasses.replace(SHARED_VOLATILE, state=SubscriptionState.DELETED), False),
    ],
)
def test_which_subscriptions_a_look_may_end(record: SubscriptionRecord, looked: bool) -> None:
    assert looked_at(record) is looked


@pytest.mark.parametrize(
    ("record", "consumed", "since", "now", "expected"),
    [
        (_record(shared=True, durable=True, expiry=ExpiryPolicy.NEVER), False, 0.0, 100.0, (Verdict.KEEP, None)),  # 1
        (_record(shared=True, durable=False, expiry=ExpiryPolicy.SESSION_END), False, 0.0, 100.0, (Verdict.KEEP, None)),  # 2
        (SHARED_VOLATILE, True, 5.0, 100.0, (Verdict.KEEP, None)),  # 3: consumed again: the watch restarts
        (SHARED_VOLATILE, False, None, 100.0, (Verdict.WATCH, 100.0)),  # 4: first seen without
        (SHARED_VOLATILE, False, 95.0, 100.0, (Verdict.WATCH, 95.0)),  # 4: less than the grace
        (SHARED_VOLATILE, False, 90.0, 100.0, (Verdict.END, 90.0)),  # 5: the whole grace
        (PLAIN, False, 80.0, 100.0, (Verdict.END, 80.0)),  # 5
    ],
)
def test_a_subscription_no_live_member_consumes_ends_after_the_grace(
    record: SubscriptionRecord, consumed: bool, since: float | None, now: float, expected: tuple[Verdict, float | None]
) -> None:
    assert verdict(record, consumed=consumed, unconsumed_since=since, now=now, grace=10.0) == expected
