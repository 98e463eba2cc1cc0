"""Stop ``sharedsub serve`` with SIGTERM and start it again on the same data dir."""

from __future__ import annotations

from pathlib import Path

import pytest
from proton import Message

from sharedsub.core import layout
from sharedsub.storage.delta.table_reads import read_table
from sharedsub.storage.topics import create_topic
from tests.amqp_peer import Subscriber, jms_durable, jms_shared_durable, jms_shared_volatile, publish, unsubscribe, wait_for
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e


def test_ack_state_delivery_counts_durable_subscriptions_and_backlogs_survive_a_restart(tmp_path: Path) -> None:
    """One restart (SIGTERM, then a new ``serve`` on the data dir) shown on three topics (one
    restart serves them all: each ``serve`` start is most of the test's time):

    * ``acks``: a restart redelivers exactly the unsettled messages, with the delivery counts they
      had (failed deliveries are in the ack log; deliveries unsettled at shutdown count as failed);
      accepted and dead-lettered ones never come back. Messages published after the restart reach
      the durable and a new plain subscriber in order, and every accepted message is in the topic
      once, positions gap-free across the restart.
    * ``t``, docs/peers.md A2.35: shared consumers ack out of order; after the restart only the
      unacknowledged come back (ActiveMQ Classic commit 3a58ab7389: a single last-ack marker
      moved backwards).
    * ``u``, scenarios 23, 24, 45; docs/peers.md A2.16, A4.52: durable subscriptions keep their
      stored source (a lookup answers with it) and their backlog; a shared non-durable one is gone.
    """
    from tests.amqp_peer import Received
    from tests.e2e.test_outcomes import ack_log, dead_letters

    root = str(tmp_path)
    for topic in ("acks", "t", "u"):
        create_topic(root, topic)
    name, cid = "keeper", "client-restart"
    arrivals: dict[int, int] = {}

    def policy(got: Received) -> str:
        body = got.message.body
        n = arrivals[body] = arrivals.get(body, 0) + 1
        if body < 5:
            return "accept"
        if body == 5:
            return "reject|app:nope|five is bad"
        if body == 6 and n <= 2:
            return "modified-failed"
        return "none"  # 6 (third time), 7, 8, 9: still unsettled when the service stops

    first = ServeProcess(tmp_path).start()
    try:
        acked = _acks_out_of_order(first, "t")
        _durable_subscriptions_with_a_backlog(first, "u")
        with Subscriber(first.url, "acks", container_id=cid, credit=50, settle=policy, **jms_durable(name)) as sub:
            sub.wait_attached()
            outcomes = publish(first.url, "acks", [Message(body=i) for i in range(10)])
            assert {o.state for o in outcomes} == {"accepted"}
            sub.wait_count(12)  # 0-9 once, 6 twice more
            wait_for(lambda: len(ack_log(tmp_path, name)) == 8, 60, "5 accepted, 1 dead-lettered, 2 failed")
            assert first.stop() == 0, first.log()[-3000:]
    finally:
        first.kill()
    counts = {}
    for seq, outcome in ack_log(tmp_path, name):
        counts.setdefault(outcome, []).append(seq)
    assert sorted(counts["accepted"]) == [0, 1, 2, 3, 4]
    assert counts["dead-lettered"] == [5]
    assert sorted(counts["failed"]) == [6, 6, 6, 7, 8, 9]  # the last four recorded at shutdown
    assert [r["error_description"] for r in dead_letters(tmp_path, name)] == ["five is bad"]

    second = ServeProcess(tmp_path).start()
    try:
        _only_the_unacknowledged_come_back(second, "t", acked)
        _durable_subscriptions_kept(second, "u")
        with (
            Subscriber(second.url, "acks", container_id=cid, **jms_durable(name)) as sub,
            Subscriber(second.url, "acks") as plain,
        ):
            sub.wait_attached()
            plain.wait_attached()
            sub.wait_count(4)
            fresh = [f"b{i}" for i in range(5)]
            publish(second.url, "acks", [Message(body=b) for b in fresh])
            got = sub.wait_count(9)
            assert [r.message.body for r in got] == [6, 7, 8, 9, *fresh]
            assert [r.delivery_count for r in got] == [3, 1, 1, 1, 0, 0, 0, 0, 0]
            assert [r.message.first_acquirer for r in got[:4]] == [False] * 4
            assert [r.message.body for r in plain.wait_count(5)] == fresh
            sub.detach()
    finally:
        assert second.stop() == 0, second.log()[-3000:]
    data = read_table(layout.topic_table(root, "acks"), ["seq"])
    assert data is not None
    assert sorted(data.column("seq").to_pylist()) == list(range(15))


def _bodies(sub: Subscriber) -> list:
    return [r.message.body for r in sub.received]


def _acks_out_of_order(service: ServeProcess, topic: str) -> set[int]:
    """Two shared consumers of one subscription: one acknowledges what it gets, the other nothing;
    return what was acknowledged."""
    name, cid = "acks", "client-acks"
    keep = Subscriber(service.url, topic, container_id=cid, credit=10, settle="none", **jms_shared_durable(name))
    with keep:
        keep.wait_attached()
        ack = Subscriber(service.url, topic, container_id=cid, credit=10, **jms_shared_durable(name, ordinal=2))
        with ack:
            ack.wait_attached()
            publish(service.url, topic, [Message(body=i) for i in range(20)])
            wait_for(lambda: len(keep.received) + len(ack.received) >= 20, 60, "20 deliveries")
            acked = set(_bodies(ack))
            ack.detach()
    # keep's connection closed with its 10 deliveries unsettled: they return to the subscription
    return acked


def _only_the_unacknowledged_come_back(service: ServeProcess, topic: str, acked: set[int]) -> None:
    with Subscriber(service.url, topic, container_id="client-acks", **jms_shared_durable("acks")) as again:
        again.wait_attached()
        got = again.wait_count(20 - len(acked))
        assert set(_bodies(again)) == set(range(20)) - acked
        assert len(got) == 20 - len(acked)
        publish(service.url, topic, [Message(body="END")])
        again.wait_count(20 - len(acked) + 1)
        assert not (set(_bodies(again)) & acked)


def _durable_subscriptions_with_a_backlog(service: ServeProcess, topic: str) -> None:
    """An unshared durable subscription (selecting ``topic/x.*``), a shared durable and a shared
    non-durable one; five messages routed while only the non-durable one has a consumer."""
    with Subscriber(service.url, f"{topic}/x.*", container_id="rc", **jms_durable("dur")) as d:
        d.wait_attached()
        d.detach()
    with Subscriber(service.url, topic, container_id="rc", **jms_shared_durable("shd")) as s:
        s.wait_attached()
        s.detach()
    with Subscriber(service.url, topic, container_id="rc", **jms_shared_volatile("vol")) as v:
        v.wait_attached()
        publish(service.url, f"{topic}/x.y", [Message(body=f"b{i}") for i in range(5)])
        v.wait_count(5)  # routed: the durable ones hold these five as backlog


def _durable_subscriptions_kept(service: ServeProcess, topic: str) -> None:
    # No credit: the lookup link is a consumer of the subscription, and with credit it could
    # take (and accept) the backlog before it detaches, leaving nothing for `d` below.
    with Subscriber(service.url, None, name="dur", container_id="rc", credit=0) as look:
        look.wait_attached()
        assert look.remote_source["address"] == f"{topic}/x.*"  # stored source after restart
        look.detach()
    with Subscriber(service.url, f"{topic}/x.*", container_id="rc", **jms_durable("dur")) as d:
        d.wait_attached()
        d.wait_count(5)
        assert _bodies(d) == [f"b{i}" for i in range(5)]
        d.detach()
    with Subscriber(service.url, topic, container_id="rc", **jms_shared_durable("shd")) as s:
        s.wait_attached()
        s.wait_count(5)
        s.detach()
    # no shared non-durable subscription survives a restart (A3.45)
    assert unsubscribe(service.url, "vol|volatile1", container_id="rc")[0] == "amqp:not-found"
    assert unsubscribe(service.url, "shd", container_id="rc") == (None, None)
    assert unsubscribe(service.url, "dur", container_id="rc") == (None, None)


def test_after_a_sigkill_the_unsettled_come_back_marked_redelivered(tmp_path: Path) -> None:
    """A killed front end leaves no failed rows for what it had sent: after the restart every
    unacknowledged message may have been delivered, so each goes out with delivery-count >= 1
    (JMSRedelivered), while acknowledged ones stay settled."""
    from tests.amqp_peer import Received, jms_durable, wait_for
    from tests.e2e.test_outcomes import ack_log

    root = str(tmp_path)
    create_topic(root, "killed")
    name, cid = "survivor", "client-kill"

    def policy(got: Received) -> str:
        return "accept" if got.message.body < 3 else "none"

    first = ServeProcess(tmp_path).start()
    try:
        with Subscriber(first.url, "killed", container_id=cid, settle=policy, **jms_durable(name)) as sub:
            sub.wait_attached()
            publish(first.url, "killed", [Message(body=i) for i in range(8)])
            sub.wait_count(8)
            wait_for(lambda: len(ack_log(tmp_path, name)) == 3, 60, "0..2 acknowledged")
            first.kill()
    finally:
        first.kill()

    second = ServeProcess(tmp_path).start()
    try:
        with Subscriber(second.url, "killed", container_id=cid, **jms_durable(name)) as sub:
            sub.wait_attached()
            got = sub.wait_count(5)
            assert sorted(r.message.body for r in got) == [3, 4, 5, 6, 7]
            assert all(r.delivery_count >= 1 for r in got), [(r.message.body, r.delivery_count) for r in got]
            # A message routed after the restart was never sent before: no mark.
            publish(second.url, "killed", [Message(body=8)])
            (fresh,) = sub.wait_count(6)[5:]
            assert (fresh.message.body, fresh.delivery_count) == (8, 0)
    finally:
        assert second.stop() == 0, second.log()[-3000:]
