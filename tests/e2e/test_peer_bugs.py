"""Regression tests named after bugs other brokers had (docs/peers.md, "Bugs the peers had")."""

from __future__ import annotations

import threading

import pytest
from proton import Message

from sharedsub.storage.catalog import load_catalog
from sharedsub.storage.delta.table_reads import read_table
from sharedsub.storage.topics import topic_exists
from tests.amqp_peer import (
    Subscriber,
    jms_durable,
    jms_shared_durable,
    jms_shared_volatile,
    publish,
    uid,
    unsubscribe,
    wait_for,
)
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e


def test_ARTEMIS_177_recreated_durable_subscription_starts_empty(service: ServeProcess, topic: str) -> None:
    name, cid = uid("re"), uid("client")
    for round_ in range(3):
        with Subscriber(service.url, topic, container_id=cid, **jms_durable(name)) as s:
            s.wait_attached()
            publish(service.url, topic, [Message(body=f"fresh{round_}")])
            s.wait_count(1)
            assert [r.message.body for r in s.received] == [f"fresh{round_}"]
            s.detach()
        publish(service.url, topic, [Message(body=f"left-behind{round_}")])
        assert unsubscribe(service.url, name, container_id=cid) == (None, None)


def test_ARTEMIS_2140_concurrent_creation_of_one_shared_subscription(service: ServeProcess, topic: str) -> None:
    name = uid("race")
    subs = [
        Subscriber(service.url, topic, container_id=uid("c"), **jms_shared_durable(name, is_global=True))
        for _ in range(12)
    ]
    threads = [threading.Thread(target=s.start) for s in subs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        for s in subs:
            s.wait_attached()  # none fails
        recs = [r for r in load_catalog(str(service.data_dir)).values() if r.identity.name == name]
        assert len(recs) == 1 and recs[0].generation == 1  # one subscription, created once
        publish(service.url, topic, [Message(body=i) for i in range(24)])
        wait_for(lambda: sum(len(s.received) for s in subs) >= 24, 60, "24 messages")
        assert sorted(r.message.body for s in subs for r in s.received) == list(range(24))
    finally:
        for s in subs:
            s.stop()
    assert unsubscribe(service.url, name, container_id=uid("c"), is_global=True) == (None, None)


def test_ARTEMIS_2973_global_shared_unsubscribe_deletes_it(service: ServeProcess, topic: str) -> None:
    name = uid("g")
    with Subscriber(service.url, topic, container_id=uid("a"), **jms_shared_durable(name, is_global=True)) as s:
        s.wait_attached()
        s.detach()
    assert unsubscribe(service.url, name, container_id=uid("b"), is_global=True) == (None, None)
    recs = [r for r in load_catalog(str(service.data_dir)).values() if r.identity.name == name]
    assert recs and not recs[0].active


def test_ARTEMIS_3423_durable_recreated_with_changed_selector_binding_gets_new_generation(
    service: ServeProcess, topic: str
) -> None:
    name, cid = uid("sel"), uid("client")
    with Subscriber(service.url, f"{topic}/a", container_id=cid, **jms_durable(name)) as s:
        s.wait_attached()
        s.detach()
    with Subscriber(service.url, f"{topic}/b", container_id=cid, **jms_durable(name)) as s:
        s.wait_attached()
        publish(service.url, f"{topic}/a", [Message(body="a")])
        publish(service.url, f"{topic}/b", [Message(body="b")])
        s.wait_count(1)
        assert [r.message.body for r in s.received] == ["b"]
        s.detach()
    recs = [r for r in load_catalog(str(service.data_dir)).values() if r.identity.name == name]
    assert recs[0].binding == "b" and recs[0].generation == 2
    assert unsubscribe(service.url, name, container_id=cid) == (None, None)


def test_ARTEMIS_1034_volatile_subscription_removed_on_link_close(service: ServeProcess, topic: str) -> None:
    name, cid = uid("v"), uid("client")
    with Subscriber(service.url, topic, container_id=cid, **jms_shared_volatile(name)) as s:
        s.wait_attached()
        s.detach(closed=True)
    recs = [r for r in load_catalog(str(service.data_dir)).values() if r.identity.name == name]
    assert recs and not recs[0].active


def test_ARTEMIS_4125_last_subscriber_leaving_keeps_the_topic(service: ServeProcess, topic: str) -> None:
    with Subscriber(service.url, topic) as s:
        s.wait_attached()
    assert topic_exists(str(service.data_dir), topic)
    assert publish(service.url, topic, [Message(body="still here")])[0].state == "accepted"


def test_QPIDJMS_346_failed_unsubscribe_reports_its_error(service: ServeProcess, topic: str) -> None:
    name = uid("busy")
    with Subscriber(service.url, topic, container_id=uid("a"), **jms_shared_durable(name, is_global=True)) as s:
        s.wait_attached()
        cond, _ = unsubscribe(service.url, name, container_id=uid("b"), is_global=True)
        assert cond == "amqp:resource-locked"
        s.detach()
    assert unsubscribe(service.url, name, container_id=uid("b"), is_global=True) == (None, None)


def test_pulsar_3185_redelivered_message_never_on_two_consumers_at_once(service: ServeProcess, topic: str) -> None:
    """A released message goes back to the subscription and to exactly one consumer."""
    name, cid = uid("rel"), uid("client")
    releaser = Subscriber(service.url, topic, container_id=cid, credit=1, settle="release", **jms_shared_durable(name))
    with releaser:
        releaser.wait_attached()
        publish(service.url, topic, [Message(body="x")])
        releaser.wait_count(1)
        releaser.detach()
    with Subscriber(service.url, topic, container_id=cid, **jms_shared_durable(name)) as a:
        a.wait_attached()
        a.wait_count(1)
        assert [r.message.body for r in a.received] == ["x"]
        publish(service.url, topic, [Message(body="END")])
        a.wait_count(2)
        assert [r.message.body for r in a.received] == ["x", "END"]
        a.detach()
    assert unsubscribe(service.url, name, container_id=cid) == (None, None)


def test_wso2_cbm_467_offline_durable_with_selector_keeps_only_matching(service: ServeProcess, topic: str) -> None:
    """Non-matching messages must not pile up for an offline durable subscriber with a selector."""
    name, cid = uid("sel-off"), uid("client")
    with Subscriber(service.url, topic, container_id=cid, selector="kind = 'keep'", **jms_durable(name)) as s:
        s.wait_attached()
        s.detach()
    publish(service.url, topic, [Message(body=f"{k}{i}", properties={"kind": k}) for i in range(5) for k in ("keep", "drop")])
    with Subscriber(service.url, topic, container_id=cid, selector="kind = 'keep'", **jms_durable(name)) as s:
        s.wait_attached()
        s.wait_count(5)
        publish(service.url, topic, [Message(body="END", properties={"kind": "keep"})])
        s.wait_count(6)
        assert [r.message.body for r in s.received] == [f"keep{i}" for i in range(5)] + ["END"]
        s.detach()
    recs = [r for r in load_catalog(str(service.data_dir)).values() if r.identity.name == name]
    from sharedsub.core import layout

    rows = read_table(layout.join(str(service.data_dir), recs[0].table), ["seq"])
    assert rows is not None and rows.num_rows == 6  # only matching messages were routed to it
    assert unsubscribe(service.url, name, container_id=cid) == (None, None)


def test_QPID_7642_filter_validated_at_attach(service: ServeProcess, topic: str) -> None:
    name = uid("badsel")
    with Subscriber(service.url, topic, selector="price >", **jms_durable(name)) as s:
        cond, desc = s.wait_refused()
    assert cond == "amqp:invalid-field" and "price >" in desc
    assert not [r for r in load_catalog(str(service.data_dir)).values() if r.identity.name == name]


def test_activemq_2196_consumer_without_credit_holds_nothing_back(service: ServeProcess, topic: str) -> None:
    """A shared consumer with no credit gets nothing and starves nobody (docs/seeds.md seed 003, docs/design.md §5)."""
    name, cid = uid("starve"), uid("client")
    idle = Subscriber(service.url, topic, container_id=cid, credit=0, **jms_shared_durable(name))
    busy = Subscriber(service.url, topic, container_id=cid, credit=1000, **jms_shared_durable(name, ordinal=2))
    with idle, busy:
        idle.wait_attached()
        busy.wait_attached()
        publish(service.url, topic, [Message(body=i) for i in range(30)])
        busy.wait_count(30)
        assert sorted(r.message.body for r in busy.received) == list(range(30))
        assert idle.received == []
        idle.detach()
        busy.detach()
    assert unsubscribe(service.url, name, container_id=cid) == (None, None)
