"""The admin rules (sharedsub/core/ops/admin_rules.py) as tables, and the one error → exit code mapping."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from sharedsub.core.errors import (
    AmbiguousSubscription,
    ConfigError,
    DataDirInUse,
    SharedSubError,
    StorageUnavailable,
    SubscriptionInUse,
    SubscriptionNotFound,
    TopicExists,
    TopicInUse,
    TopicNotFound,
)
from sharedsub.core.model import ExpiryPolicy, SubscriptionKey, SubscriptionRecord, SubscriptionState
from sharedsub.core.ops.admin_rules import (
    DropTopic,
    Unsubscribe,
    decide_drop_topic,
    decide_unsubscribe,
    error_body,
    error_from_body,
    exit_code,
    http_status,
)

NOW = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)


def record(name: str, topic: str = "orders", *, active: bool = True) -> SubscriptionRecord:
    return SubscriptionRecord(
        identity=SubscriptionKey("app", name, True, True),
        generation=1,
        state=SubscriptionState.ACTIVE if active else SubscriptionState.DELETED,
        topic=topic,
        binding="#",
        selector=None,
        no_local=False,
        expiry_policy=ExpiryPolicy.NEVER,
        start_seq=0,
        source="{}",
        created_at=NOW,
        updated_at=NOW,
    )


A, B, OTHER, GONE = record("a"), record("b"), record("c", "other"), record("d", active=False)


@pytest.mark.parametrize(
    ("rec", "consumers", "expected"),
    [
        (None, 0, SubscriptionNotFound),  # 1
        (GONE, 0, SubscriptionNotFound),  # 1: deleted
        (A, 1, SubscriptionInUse),  # 2
        (A, 3, SubscriptionInUse),
        (A, 0, Unsubscribe(A)),  # 3
    ],
)
def test_unsubscribe_table(rec: SubscriptionRecord | None, consumers: int, expected: object) -> None:
    if isinstance(expected, type):
        with pytest.raises(expected):
            decide_unsubscribe(rec, "a", consumers)
    else:
        assert decide_unsubscribe(rec, "a", consumers) == expected


ALL = [B, A, OTHER, GONE, dataclasses.replace(GONE, topic="orders")]


@pytest.mark.parametrize(
    ("exists", "consumers", "publishers", "force", "expected"),
    [
        (False, {}, 0, True, TopicNotFound),  # 1
        (True, {}, 1, True, TopicInUse),  # 2: publishers, even forced
        (True, {A.key: 1}, 0, True, TopicInUse),  # 3: consumers, even forced
        (True, {}, 0, False, TopicInUse),  # 4: subscriptions, not forced
        (True, {OTHER.key: 2}, 0, True, DropTopic("orders", (A, B))),  # 5: other topics' consumers do not count
    ],
)
def test_drop_topic_table(exists: bool, consumers: dict, publishers: int, force: bool, expected: object) -> None:
    call = dict(exists=exists, subscriptions=ALL, consumers=consumers, publishers=publishers, force=force)
    if isinstance(expected, type):
        with pytest.raises(expected):
            decide_drop_topic("orders", **call)
    else:
        assert decide_drop_topic("orders", **call) == expected


def test_drop_topic_without_subscriptions_needs_no_force() -> None:
    assert decide_drop_topic("empty", exists=True, subscriptions=ALL, consumers={}, publishers=0, force=False) == DropTopic(
        "empty", ()
    )


def test_refusal_names_what_is_in_the_way() -> None:
    with pytest.raises(TopicInUse) as info:
        decide_drop_topic("orders", exists=True, subscriptions=ALL, consumers={}, publishers=0, force=False)
    assert A.key in info.value.description and "--force" in info.value.description


@pytest.mark.parametrize(
    ("error", "code", "exit_status", "http"),
    [
        (SubscriptionInUse("a", 1), "in-use", 5, 409),
        (TopicInUse("t", "x"), "in-use", 5, 409),
        (DataDirInUse("/d", 42, "amqp://127.0.0.1:5672"), "in-use", 5, 409),
        (SubscriptionNotFound("a"), "not-found", 3, 404),
        (TopicNotFound("t"), "not-found", 3, 404),
        (TopicExists("t"), "exists", 4, 409),
        (AmbiguousSubscription("a", ["k1", "k2"]), "usage", 2, 400),
        (ConfigError("k", "bad"), "usage", 2, 400),
        (StorageUnavailable("/d", 28, "No space left on device"), "storage", 6, 503),
        (SharedSubError("boom"), "error", 1, 500),
        (RuntimeError("boom"), "error", 1, 500),
    ],
)
def test_error_mapping(error: BaseException, code: str, exit_status: int, http: int) -> None:
    body = error_body(error)
    assert (body["ok"], body["error"], body["exit_code"]) == (False, code, exit_status)
    assert exit_code(error) == exit_status
    assert http_status(code) == http
    assert error_from_body(body) == (exit_status, body["message"])


def test_ambiguous_reply_lists_candidates() -> None:
    assert error_body(AmbiguousSubscription("a", ["k1", "k2"]))["candidates"] == ["k1", "k2"]
