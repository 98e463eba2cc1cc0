"""Stop ``sharedsub serve`` with SIGTERM and start it again on the same data dir."""

from __future__ import annotations

from pathlib import Path

import pytest
from proton import Message

from sharedsub.core import layout
from sharedsub.storage.delta.table_reads import read_table
from sharedsub.storage.topics import create_topic
from tests.amqp_peer import Subscriber, publish
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e


def test_ack_state_and_delivery_counts_survive_a_restart(tmp_path: Path) -> None:
    """A restart redelivers exactly the unsettled messages, with the delivery counts they had
    (failed deliveries are in the ack log; deliveries unsettled at shutdown count as failed);
    accepted and dead-lettered ones never come back. Messages published after the restart reach
    the durable and a new plain subscriber in order, and every accepted message is in the topic
    once, positions gap-free across the restart."""
    from tests.amqp_peer import Received, jms_durable, wait_for
    from tests.e2e.test_outcomes import ack_log, dead_letters

    root = str(tmp_path)
    create_topic(root, "acks")
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
