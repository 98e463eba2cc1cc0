"""JMS 2.0 subscription semantics against a real ``sharedsub serve``, with python-qpid-proton
clients setting capabilities, durability, expiry and link names exactly as Qpid JMS does
(docs/wire.md §1.3-§1.9). Test names cite the docs/wire.md §5 scenario or docs/peers.md group they pin."""

from __future__ import annotations

import pytest
from proton import Message

from sharedsub.storage.catalog import load_catalog
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


def _bodies(sub: Subscriber) -> list:
    return [r.message.body for r in sub.received]


def _drain_marker(service: ServeProcess, topic: str, subs: list[Subscriber], marker: str = "END") -> None:
    """Publish a marker and wait until one of ``subs`` got it: everything before it is routed."""
    publish(service.url, topic, [Message(body=marker)])
    wait_for(lambda: any(marker in _bodies(s) for s in subs), 60, "the marker")


def test_s7_shared_durable_two_consumers_split_each_message_once(service: ServeProcess, topic: str) -> None:
    name, cid = uid("sd"), uid("client")
    a = Subscriber(service.url, topic, container_id=cid, **jms_shared_durable(name))
    b = Subscriber(service.url, topic, container_id=cid, **jms_shared_durable(name, ordinal=2))
    with a, b:
        a.wait_attached()
        b.wait_attached()
        assert a.remote_source["capabilities"] == ["shared", "topic"]
        publish(service.url, topic, [Message(body=i) for i in range(40)])
        wait_for(lambda: len(a.received) + len(b.received) >= 40, 60, "40 messages over both consumers")
        got = _bodies(a) + _bodies(b)
        assert sorted(got) == list(range(40))  # each exactly once
        assert a.received and b.received  # load-balanced
        assert _bodies(a) == sorted(_bodies(a)) and _bodies(b) == sorted(_bodies(b))


def test_s8_global_shared_durable_across_containers(service: ServeProcess, topic: str) -> None:
    name = uid("gsd")
    a = Subscriber(service.url, topic, container_id=uid("A"), **jms_shared_durable(name, is_global=True))
    b = Subscriber(service.url, topic, container_id=uid("B"), **jms_shared_durable(name, is_global=True))
    with a, b:
        a.wait_attached()
        b.wait_attached()
        assert a.remote_source["capabilities"] == ["global", "shared", "topic"]
        publish(service.url, topic, [Message(body=i) for i in range(30)])
        wait_for(lambda: len(a.received) + len(b.received) >= 30, 60, "30 messages")
        assert sorted(_bodies(a) + _bodies(b)) == list(range(30))
        assert a.received and b.received


def test_s12_s13_namespaces_are_independent(service: ServeProcess, topic: str) -> None:
    name, cid = uid("ns"), uid("client")
    subs = [
        Subscriber(service.url, topic, container_id=cid, **jms_shared_durable(name)),
        Subscriber(service.url, topic, container_id=cid, **jms_shared_volatile(name)),
        Subscriber(service.url, topic, container_id=uid("other"), **jms_shared_durable(name, is_global=True)),
    ]
    for s in subs:
        s.start()
    try:
        for s in subs:
            s.wait_attached()
        publish(service.url, topic, [Message(body="one")])
        for s in subs:
            s.wait_count(1)
            assert _bodies(s) == ["one"]
    finally:
        for s in subs:
            s.stop()


def test_s15_exclusivity_mismatch_is_resource_locked(service: ServeProcess, topic: str) -> None:
    name, cid = uid("ex"), uid("client")
    with Subscriber(service.url, topic, container_id=cid, **jms_durable(name)) as d:
        d.wait_attached()
        assert d.detach(closed=False) == (None, None)
    with Subscriber(service.url, topic, container_id=cid, **jms_shared_durable(name)) as s:
        cond, desc = s.wait_refused()
        assert cond == "amqp:resource-locked"
        assert name in desc
        assert s.remote_source.get("is_null", True)
    assert unsubscribe(service.url, name, container_id=cid) == (None, None)


def test_s16_s17_join_active_shared_with_other_selector_or_topic_refused(service: ServeProcess, topic: str) -> None:
    other = uid("t2")
    from sharedsub.storage.topics import create_topic

    create_topic(str(service.data_dir), other)
    name, cid = uid("chg"), uid("client")
    with Subscriber(service.url, topic, container_id=cid, **jms_shared_durable(name)) as a:
        a.wait_attached()
        with Subscriber(service.url, other, container_id=cid, **jms_shared_durable(name, ordinal=2)) as b:
            assert b.wait_refused()[0] == "amqp:resource-locked"
        a.detach()
    assert unsubscribe(service.url, name, container_id=cid) == (None, None)


def test_s18_s21_durable_backlog_kept_while_detached_then_new_generation_on_change(
    service: ServeProcess, topic: str
) -> None:
    name, cid = uid("gen"), uid("client")
    with Subscriber(service.url, topic, container_id=cid, **jms_durable(name)) as s:
        s.wait_attached()
        publish(service.url, topic, [Message(body="seen")])
        s.wait_count(1)
        assert s.detach() == (None, None)
    # Published while the durable subscriber is away: kept (scenario 21).
    publish(service.url, topic, [Message(body=f"kept{i}") for i in range(5)])
    witness = Subscriber(service.url, topic)
    with witness:
        witness.wait_attached()
        _drain_marker(service, topic, [witness])
    with Subscriber(service.url, topic, container_id=cid, **jms_durable(name)) as s:
        s.wait_attached()
        s.wait_count(6)
        assert _bodies(s)[:5] == [f"kept{i}" for i in range(5)]
        assert "seen" not in _bodies(s)
        s.detach()
    # Same name, different selector-free binding (topic pattern) while inactive → a new, empty generation.
    publish(service.url, topic, [Message(body="old-backlog")])
    with Subscriber(service.url, f"{topic}/x.*", container_id=cid, **jms_durable(name)) as s:
        s.wait_attached()
        publish(service.url, f"{topic}/x.y", [Message(body="new")])
        s.wait_count(1)
        _drain_marker(service, f"{topic}/x.z", [s])
        assert "old-backlog" not in _bodies(s)
        assert _bodies(s)[0] == "new"
        s.detach()
    recs = [r for r in load_catalog(str(service.data_dir)).values() if r.identity.name == name]
    assert len(recs) == 1 and recs[0].generation == 2
    assert unsubscribe(service.url, name, container_id=cid) == (None, None)


def test_a4_54_second_consumer_on_unshared_durable_refused(service: ServeProcess, topic: str) -> None:
    name, cid = uid("one"), uid("client")
    with Subscriber(service.url, topic, container_id=cid, **jms_durable(name)) as a:
        a.wait_attached()
        with Subscriber(service.url, topic, container_id=cid, **jms_durable(name)) as b:
            cond, _ = b.wait_refused()
            assert cond == "amqp:resource-locked"
        a.detach()
    assert unsubscribe(service.url, name, container_id=cid) == (None, None)


def test_s34_shared_volatile_deleted_with_last_consumer(service: ServeProcess, topic: str) -> None:
    name, cid = uid("vol"), uid("client")
    a = Subscriber(service.url, topic, container_id=cid, **jms_shared_volatile(name))
    b = Subscriber(service.url, topic, container_id=cid, **jms_shared_volatile(name, ordinal=2))
    with a, b:
        a.wait_attached()
        b.wait_attached()
        assert a.detach(closed=True) == (None, None)
        publish(service.url, topic, [Message(body="after-a")])
        b.wait_count(1)
        assert b.detach(closed=True) == (None, None)
    recs = [r for r in load_catalog(str(service.data_dir)).values() if r.identity.name == name]
    assert recs and all(not r.active for r in recs)
    # Gone: a new consumer with the same name starts empty (scenario 22, A3.38).
    publish(service.url, topic, [Message(body="while-gone")])
    with Subscriber(service.url, topic, container_id=cid, **jms_shared_volatile(name)) as c:
        c.wait_attached()
        publish(service.url, topic, [Message(body="fresh")])
        c.wait_count(1)
        assert _bodies(c) == ["fresh"]


def test_s37_s44_unsubscribe_with_active_consumer_is_resource_locked(service: ServeProcess, topic: str) -> None:
    name = uid("gl")
    with Subscriber(service.url, topic, container_id=uid("A"), **jms_shared_durable(name, is_global=True)) as a:
        a.wait_attached()
        cond, desc = unsubscribe(service.url, name, container_id=uid("B"), is_global=True)
        assert cond == "amqp:resource-locked"
        assert name in desc
        publish(service.url, topic, [Message(body="still")])
        a.wait_count(1)  # the subscription stayed
        a.detach()
    # s42: global unsubscribe from a new connection with no ClientID
    assert unsubscribe(service.url, name, container_id=uid("C"), is_global=True) == (None, None)
    recs = [r for r in load_catalog(str(service.data_dir)).values() if r.identity.name == name]
    assert recs and not recs[0].active


def test_s40_s41_lookup_returns_stored_source_and_unknown_is_not_found(service: ServeProcess, topic: str) -> None:
    name, cid = uid("lk"), uid("client")
    with Subscriber(service.url, f"{topic}/a.#", container_id=cid, no_local=True, **jms_durable(name)) as s:
        s.wait_attached()
        s.detach()
    with Subscriber(service.url, None, name=name, container_id=cid) as look:
        look.wait_attached()
        assert look.remote_source["address"] == f"{topic}/a.#"
        assert "topic" in look.remote_source["capabilities"]
        assert look.remote_source["expiry"] == 3  # never
        assert look.detach(closed=True) == (None, None)  # unsubscribe
    cond, _ = unsubscribe(service.url, name, container_id=cid)  # twice → not found (A5.67)
    assert cond == "amqp:not-found"
    cond, _ = unsubscribe(service.url, uid("never-existed"), container_id=cid, is_global=True)
    assert cond == "amqp:not-found"


def test_s36_detach_closed_on_durable_deletes_it(service: ServeProcess, topic: str) -> None:
    name, cid = uid("del"), uid("client")
    with Subscriber(service.url, topic, container_id=cid, **jms_durable(name)) as s:
        s.wait_attached()
        assert s.detach(closed=True) == (None, None)
    assert unsubscribe(service.url, name, container_id=cid)[0] == "amqp:not-found"


def test_s2_second_connection_with_same_container_id_refused_when_sole_connection_desired(
    service: ServeProcess,
) -> None:
    from proton import symbol
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    cid = uid("sole")
    result: dict[str, object] = {}

    class Two(MessagingHandler):
        def on_start(self, event):  # noqa: ANN001, ANN202
            event.container.container_id = cid
            self.a = event.container.connect(service.url, desired_capabilities=[symbol("sole-connection-for-container")])

        def on_connection_opened(self, event):  # noqa: ANN001, ANN202
            if event.connection == self.a:
                self.b = event.container.connect(service.url, desired_capabilities=[symbol("sole-connection-for-container")])

        def on_connection_error(self, event):  # noqa: ANN001, ANN202
            cond = event.connection.remote_condition
            result["condition"] = cond.name
            result["info"] = cond.info
            result["props"] = event.connection.remote_properties
            self.a.close()
            event.connection.close()

    c = Container(Two())
    c.container_id = cid
    c.run()
    assert result["condition"] == "amqp:invalid-field"
    assert str(dict(result["info"])[symbol("invalid-field")]) == "container-id"  # type: ignore[arg-type]


def test_shared_consumer_limit_is_resource_limit_exceeded(tmp_path) -> None:  # noqa: ANN001
    from sharedsub.storage.topics import create_topic

    create_topic(str(tmp_path), "t")
    fe = ServeProcess(tmp_path, command="frontend", env={"SHAREDSUB_SERVER_SHARED_CONSUMER_LIMIT": "2"}).start()
    try:
        subs = [Subscriber(fe.url, "t", container_id="c", **jms_shared_durable("lim", ordinal=i)) for i in (1, 2, 3)]
        with subs[0], subs[1]:
            subs[0].wait_attached()
            subs[1].wait_attached()
            with subs[2]:
                cond, desc = subs[2].wait_refused()
                assert cond == "amqp:resource-limit-exceeded"
                assert "lim" in desc
    finally:
        assert fe.stop() == 0


@pytest.mark.parametrize(
    ("expiry", "ends_with"),
    [("session-end", "the connection"), ("connection-close", "the connection"), ("link-detach", "the detach")],
)
def test_lifetime_from_expiry_policy(service: ServeProcess, topic: str, expiry: str, ends_with: str) -> None:
    """docs/design.md §4.2: a durable-terminus subscription whose expiry is not 'never' lives as long as
    its expiry policy says (docs/seeds.md seed 000: lifetime policy from the source expiry policy)."""
    name, cid = uid(f"life-{expiry}"), uid("client")

    def active() -> bool:
        recs = [r for r in load_catalog(str(service.data_dir)).values() if r.identity.name == name]
        return bool(recs) and recs[0].active

    sub = Subscriber(service.url, topic, container_id=cid, name=name, capabilities=["topic"], durable=1, expiry=expiry)
    with sub:
        sub.wait_attached()
        closed = sub.detach(closed=False)
        assert closed == (None, None)
        if expiry == "link-detach":
            wait_for(lambda: not active(), 30, "deletion at detach")
            return
        assert active()  # kept while its session / connection goes on
    wait_for(lambda: not active(), 30, f"deletion with {ends_with}")


def test_seed003_consumers_join_and_leave_mid_stream_lose_and_duplicate_nothing(
    service: ServeProcess, topic: str
) -> None:
    import threading

    name, cid = uid("churn"), uid("client")
    first = Subscriber(service.url, topic, container_id=cid, credit=20, refill=True, **jms_shared_durable(name))
    second = Subscriber(
        service.url, topic, container_id=cid, credit=20, refill=True, **jms_shared_durable(name, ordinal=2)
    )
    third = Subscriber(
        service.url, topic, container_id=cid, credit=20, refill=True, **jms_shared_durable(name, ordinal=3)
    )
    total = 300
    first.start()
    second.start()
    first.wait_attached()
    second.wait_attached()
    sender = threading.Thread(
        target=lambda: [publish(service.url, topic, [Message(body=i) for i in range(k, k + 50)]) for k in range(0, total, 50)]
    )
    sender.start()
    try:
        wait_for(lambda: len(first.received) + len(second.received) >= 60, 60, "some deliveries")
        first.detach()  # leaves mid-stream (its unsettled messages return to the subscription)
        third.start()
        third.wait_attached()
        sender.join(120)
        everyone = [first, second, third]
        wait_for(lambda: len({r.message.body for s in everyone for r in s.received}) >= total, 90, "all messages")
        bodies = [r.message.body for s in everyone for r in s.received]
        assert sorted(set(bodies)) == list(range(total))
        assert len(bodies) == total, "a message was delivered twice"
    finally:
        for s in (first, second, third):
            s.stop()
    assert unsubscribe(service.url, name, container_id=cid) == (None, None)


def test_links_attached_to_a_subscription_are_in_the_catalog(service: ServeProcess, topic: str) -> None:
    from sharedsub.storage.catalog import attached_links

    name, cid = uid("links"), uid("client")
    a = Subscriber(service.url, topic, container_id=cid, **jms_shared_durable(name))
    b = Subscriber(service.url, topic, container_id=cid, **jms_shared_durable(name, ordinal=2))
    with a, b:
        a.wait_attached()
        b.wait_attached()

        def names() -> set[str]:
            return {k[1] for k in attached_links(str(service.data_dir)) if name in k[0]}

        wait_for(lambda: names() == {name, f"{name}|2"}, 30, "both links in catalog/links")
        a.detach()
        wait_for(lambda: names() == {f"{name}|2"}, 30, "the detach in catalog/links")
        b.detach()
    assert unsubscribe(service.url, name, container_id=cid) == (None, None)


def test_redelivery_markers(service: ServeProcess, topic: str) -> None:
    """Unsettled deliveries of a link that goes away come back with delivery-count + 1 and
    first-acquirer false (docs/design.md §5, Pulsar #5895); a released one comes back unchanged."""
    name, cid = uid("redeliver"), uid("client")
    holder = Subscriber(service.url, topic, container_id=cid, credit=1, settle="none", **jms_shared_durable(name))
    with holder:
        holder.wait_attached()
        publish(service.url, topic, [Message(body="once")])
        got = holder.wait_count(1)
        assert got[0].delivery_count == 0
        holder.detach()  # leaves it unsettled
    with Subscriber(service.url, topic, container_id=cid, credit=1, settle="release", **jms_shared_durable(name)) as r:
        r.wait_attached()
        got = r.wait_count(1)
        assert got[0].message.body == "once" and got[0].delivery_count == 1
        assert got[0].message.first_acquirer is False
        r.detach()
    with Subscriber(service.url, topic, container_id=cid, **jms_shared_durable(name)) as last:
        last.wait_attached()
        got = last.wait_count(1)
        assert got[0].message.body == "once" and got[0].delivery_count == 1  # released: unchanged
        last.detach()
    assert unsubscribe(service.url, name, container_id=cid) == (None, None)
