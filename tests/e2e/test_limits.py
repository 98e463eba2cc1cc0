"""Delivery limits end to end: max_delivery_count to the dead-letter table, message expiry
(ttl and absolute-expiry-time), the message size limit, and publish order for one consumer.
Real ``sharedsub serve`` with its default configuration (max_delivery_count 10,
max_message_size 1 MiB, sharedsub/core/defaults.toml)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from proton import Message

from sharedsub.core import layout
from sharedsub.storage.delta.table_reads import iter_rows, read_table
from tests.amqp_peer import Received, Subscriber, jms_durable, jms_shared_durable, publish, uid, unsubscribe, wait_for
from tests.e2e.test_outcomes import ack_log, assert_only_new_messages_then_unsubscribe, bodies, dead_letters, record
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e

MAX_DELIVERY_COUNT = 10  # sharedsub/core/defaults.toml [delivery]
MAX_MESSAGE_SIZE = 1024 * 1024  # sharedsub/core/defaults.toml [server]


def test_max_delivery_count_sends_to_the_dead_letter_table(service: ServeProcess, topic: str) -> None:
    name, cid = uid("maxdc"), uid("client")

    def settle(got: Received) -> str:
        return "modified-failed" if got.message.body == "poison" else "accept"

    with Subscriber(service.url, topic, container_id=cid, settle=settle, **jms_shared_durable(name)) as s:
        s.wait_attached()
        publish(service.url, topic, [Message(body="poison", id="p-1")])
        s.wait_count(MAX_DELIVERY_COUNT)
        wait_for(lambda: len(dead_letters(service.data_dir, name)) == 1, 60, "the dead-letter row")
        publish(service.url, topic, [Message(body="END")])
        s.wait_count(MAX_DELIVERY_COUNT + 1)
        assert bodies(s) == ["poison"] * MAX_DELIVERY_COUNT + ["END"]
        assert [r.delivery_count for r in s.received[:-1]] == list(range(MAX_DELIVERY_COUNT))
        s.detach()
    (row,) = dead_letters(service.data_dir, name)
    assert row["reason"] == "max-delivery-count"
    assert row["delivery_count"] == MAX_DELIVERY_COUNT
    assert row["message_id"] == "p-1" and row["error_condition"] is None
    log = ack_log(service.data_dir, name)
    assert [o for s, o in log if s == row["seq"]].count("failed") == MAX_DELIVERY_COUNT - 1
    assert "dead-lettered" in [o for s, o in log if s == row["seq"]]
    assert unsubscribe(service.url, name, container_id=cid) == (None, None)


def test_lost_links_count_towards_max_delivery_count(service: ServeProcess, topic: str) -> None:
    """Each consumer that takes the message and goes away without settling is a failed delivery."""
    name, cid = uid("lost"), uid("client")
    publish_done = False
    for attempt in range(MAX_DELIVERY_COUNT):
        with Subscriber(service.url, topic, container_id=cid, credit=1, settle="none", **jms_durable(name)) as s:
            s.wait_attached()
            if not publish_done:
                publish(service.url, topic, [Message(body="held")])
                publish_done = True
            got = s.wait_count(1)
            assert got[0].message.body == "held" and got[0].delivery_count == attempt
            s.detach()
    wait_for(lambda: len(dead_letters(service.data_dir, name)) == 1, 60, "the dead-letter row")
    (row,) = dead_letters(service.data_dir, name)
    assert row["reason"] == "max-delivery-count" and row["delivery_count"] == MAX_DELIVERY_COUNT
    assert_only_new_messages_then_unsubscribe(service, topic, name, cid, jms_durable(name))


def _published_at_ms(service: ServeProcess, topic: str) -> dict[str, int]:
    data = read_table(layout.topic_table(str(service.data_dir), topic), ["message_id", "published_at"])
    return {r["message_id"]: int(r["published_at"].timestamp() * 1000) for r in iter_rows(data)}


def test_expired_messages_are_not_delivered_and_are_counted(service: ServeProcess, topic: str) -> None:
    name, cid = uid("expiry"), uid("client")
    with Subscriber(service.url, topic, container_id=cid, **jms_durable(name)) as s:  # create, then go offline
        s.wait_attached()
        s.detach()
    now = time.time()
    messages = [
        Message(body="ttl", id="ttl", ttl=0.5),  # header ttl: relative to when the broker got it
        Message(body="absolute", id="absolute", expiry_time=now + 0.5),
        Message(body="both-future", id="both-future", ttl=3600, expiry_time=now + 3600),
        Message(body="ttl-short-absolute-long", id="short", ttl=0.5, expiry_time=now + 3600),
        Message(body="plain", id="plain"),
    ]
    assert {o.state for o in publish(service.url, topic, messages)} == {"accepted"}
    published = _published_at_ms(service, topic)
    deadline = max(published["ttl"] + 500, int((now + 0.5) * 1000), published["short"] + 500)
    wait_for(lambda: time.time() * 1000 > deadline + 50, 30, "the short expiries to pass")
    with Subscriber(service.url, topic, container_id=cid, **jms_durable(name)) as s:
        s.wait_attached()
        publish(service.url, topic, [Message(body="END")])
        s.wait_count(3)
        assert bodies(s) == ["both-future", "plain", "END"]
        s.detach()
    topic_rows = read_table(layout.topic_table(str(service.data_dir), topic), ["seq", "message_id"])
    seqs = {r["message_id"]: r["seq"] for r in iter_rows(topic_rows)}
    wait_for(lambda: sum(o == "expired" for _, o in ack_log(service.data_dir, name)) == 3, 60, "three expired rows")
    expired = {s for s, o in ack_log(service.data_dir, name) if o == "expired"}
    assert expired == {seqs["ttl"], seqs["absolute"], seqs["short"]}
    assert unsubscribe(service.url, name, container_id=cid) == (None, None)


def test_oversized_message_is_refused_with_message_size_exceeded(service: ServeProcess, topic: str) -> None:
    info: dict[str, Any] = {}
    big = Message(body=b"x" * (MAX_MESSAGE_SIZE + 1))
    huge = Message(body=b"y" * (3 * MAX_MESSAGE_SIZE))
    at_limit_body = b"z" * (MAX_MESSAGE_SIZE - 200)
    with Subscriber(service.url, topic) as s:
        s.wait_attached()
        outcomes = publish(
            service.url,
            topic,
            [Message(body="before"), big, huge, Message(body=at_limit_body), Message(body="after")],
            link_info=info,
        )
        assert info["max_message_size"] == MAX_MESSAGE_SIZE  # advertised on the publisher link's attach
        assert [o.state for o in outcomes] == ["accepted", "rejected", "rejected", "accepted", "accepted"]
        assert outcomes[1].condition == outcomes[2].condition == "amqp:link:message-size-exceeded"
        assert str(MAX_MESSAGE_SIZE) in (outcomes[1].description or "")
        s.wait_count(3)
        assert [r.message.body for r in s.received] == ["before", at_limit_body, "after"]
    sizes = read_table(layout.topic_table(str(service.data_dir), topic), ["size"])
    assert max(sizes.column("size").to_pylist()) <= MAX_MESSAGE_SIZE  # nothing oversized was stored


def test_single_consumer_receives_each_publisher_in_publish_order(service: ServeProcess, topic: str) -> None:
    per_publisher = 400
    with Subscriber(service.url, topic, credit=100, refill=True) as s:
        s.wait_attached()
        errors: list[BaseException] = []

        def send(who: str) -> None:
            try:
                # Several links in a row, so the order spans group commits and fan-out batches.
                for chunk in range(4):
                    step = per_publisher // 4
                    msgs = [
                        Message(body=f"{who}:{i}", properties={"who": who, "i": i})
                        for i in range(chunk * step, (chunk + 1) * step)
                    ]
                    assert {o.state for o in publish(service.url, topic, msgs)} == {"accepted"}
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=send, args=(w,)) for w in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
        assert not errors, errors
        got = s.wait_count(2 * per_publisher, timeout=180)
        assert all(r.delivery_count == 0 for r in got)
        for who in ("a", "b"):
            seen = [r.message.properties["i"] for r in got if r.message.properties["who"] == who]
            assert seen == list(range(per_publisher)), who


def test_ordering_and_limits_leave_no_backlog(service: ServeProcess, topic: str) -> None:
    """The backlog function agrees with what the consumer saw: accepted, dead-lettered and expired
    messages are all out of it; an offline durable subscription keeps what came after."""
    from sharedsub.storage.backlog import subscription_backlog

    name, cid = uid("backlog"), uid("client")

    def settle(got: Received) -> str:
        return "reject" if got.message.body == "bad" else "accept"

    with Subscriber(service.url, topic, container_id=cid, settle=settle, **jms_durable(name)) as s:
        s.wait_attached()
        publish(service.url, topic, [Message(body="ok"), Message(body="bad"), Message(body="old", id="old", expiry_time=1.0)])
        s.wait_count(2)
        assert bodies(s) == ["ok", "bad"]
        wait_for(lambda: len(ack_log(service.data_dir, name)) == 3, 60, "three final ack-log rows")
        s.detach()
    rec = record(service.data_dir, name)
    assert [(p.messages, p.routed) for p in subscription_backlog(str(service.data_dir), rec.key, rec.generation)] == [(0, 3)]
    publish(service.url, topic, [Message(body="later", id="later")])
    later_size = len(Message(body="later", id="later").encode())

    def backlog() -> list[tuple[int, int, int]]:
        return [(p.messages, p.bytes, p.routed) for p in subscription_backlog(str(service.data_dir), rec.key, rec.generation)]

    wait_for(lambda: backlog() == [(1, later_size, 4)], 60, f"the offline message in the backlog (have {backlog()})")
    assert unsubscribe(service.url, name, container_id=cid) == (None, None)
