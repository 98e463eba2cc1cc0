"""Delivery outcomes end to end (docs/design.md §5): what each consumer disposition does to a message,
the redelivery markers, redelivery after a link, session or connection goes, pre-settled
consumers, and the dead-letter table. Real ``sharedsub serve``, real python-qpid-proton clients."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from proton import Message

from sharedsub.core import layout
from sharedsub.core.model import SubscriptionRecord
from sharedsub.storage.catalog import load_catalog
from sharedsub.storage.delta.table_reads import iter_rows, read_table
from tests.amqp_peer import Received, Subscriber, jms_shared_durable, presettled, publish, uid, unsubscribe, wait_for
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e


def record(data_dir: Path, name: str) -> SubscriptionRecord:
    """The newest catalog record of the subscription called ``name`` (or, for a plain consumer,
    whose name the broker made up, the one subscription of topic ``name``)."""
    recs = [r for r in load_catalog(str(data_dir)).values() if name in (r.identity.name, r.topic)]
    assert len(recs) == 1, recs
    return recs[0]


def dead_letters(data_dir: Path, name: str) -> list[dict[str, Any]]:
    """Rows of the subscription's dead-letter table, by seq."""
    rec = record(data_dir, name)
    data = read_table(layout.join(str(data_dir), layout.dead_letter_table_rel(rec.key, rec.generation)))
    return sorted(iter_rows(data), key=lambda r: r["seq"])


def ack_log(data_dir: Path, name: str) -> list[tuple[int, str]]:
    """(seq, outcome) rows of the subscription's ack log, sorted."""
    rec = record(data_dir, name)
    data = read_table(layout.join(str(data_dir), layout.ack_table_rel(rec.key, rec.generation)), ["seq", "outcome"])
    return sorted((r["seq"], r["outcome"]) for r in iter_rows(data))


def bodies(sub: Subscriber) -> list[Any]:
    return [r.message.body for r in sub.received]


def assert_only_new_messages_then_unsubscribe(
    service: ServeProcess, topic: str, name: str, cid: str, terminus: dict[str, Any]
) -> None:
    """Nothing settled for good comes back: a new consumer of the subscription gets only a
    message published now. Then the subscription is removed."""
    with Subscriber(service.url, topic, container_id=cid, **terminus) as s:
        s.wait_attached()
        publish(service.url, topic, [Message(body="END")])
        s.wait_count(1)
        assert bodies(s) == ["END"]
        s.detach()
    assert unsubscribe(service.url, name, container_id=cid) == (None, None)


def first_time_then(how: str) -> Any:
    """A settle policy: ``how`` for a message's first arrival, accept afterwards."""
    seen: set[Any] = set()

    def policy(got: Received) -> str:
        body = got.message.body
        if body in seen:
            return "accept"
        seen.add(body)
        return how

    return policy


def test_accepted_is_acknowledged_for_good(service: ServeProcess, topic: str) -> None:
    name, cid = uid("acc"), uid("client")
    with Subscriber(service.url, topic, container_id=cid, **jms_shared_durable(name)) as s:
        s.wait_attached()
        publish(service.url, topic, [Message(body=f"m{i}") for i in range(3)])
        s.wait_count(3)
        wait_for(lambda: len(ack_log(service.data_dir, name)) == 3, 60, "three acks in the ack log")
        s.detach()
    assert {o for _, o in ack_log(service.data_dir, name)} == {"accepted"}
    assert_only_new_messages_then_unsubscribe(service, topic, name, cid, jms_shared_durable(name))


def test_released_comes_back_with_the_same_count(service: ServeProcess, topic: str) -> None:
    with Subscriber(service.url, topic, settle=first_time_then("release")) as s:
        s.wait_attached()
        publish(service.url, topic, [Message(body="r")])
        got = s.wait_count(2)
        assert [r.message.body for r in got] == ["r", "r"]
        assert [r.delivery_count for r in got] == [0, 0]
        # Sent before: it may have been acquired already, so first-acquirer is false the second time.
        assert got[1].message.first_acquirer is False


def test_modified_delivery_failed_counts_up(service: ServeProcess, topic: str) -> None:
    policy_seen: dict[Any, int] = {}

    def twice_failed(got: Received) -> str:
        n = policy_seen[got.message.body] = policy_seen.get(got.message.body, 0) + 1
        return "modified-failed" if n <= 2 else "accept"

    with Subscriber(service.url, topic, settle=twice_failed) as s:
        s.wait_attached()
        publish(service.url, topic, [Message(body="f")])
        got = s.wait_count(3)
        assert [r.message.body for r in got] == ["f", "f", "f"]
        assert [r.delivery_count for r in got] == [0, 1, 2]
        assert [bool(r.message.first_acquirer) for r in got[1:]] == [False, False]


def test_modified_undeliverable_here_goes_to_another_link(service: ServeProcess, topic: str) -> None:
    """Refused by the only link: it waits (never back to that link), then goes to the next link."""
    name, cid = uid("undeliverable"), uid("client")
    refuser = Subscriber(
        service.url,
        topic,
        container_id=cid,
        settle=lambda got: "modified-undeliverable" if got.message.body == "x" else "accept",
        **jms_shared_durable(name),
    )
    other = Subscriber(service.url, topic, container_id=cid, **jms_shared_durable(name, ordinal=2))
    with refuser:
        refuser.wait_attached()
        publish(service.url, topic, [Message(body="x")])
        refuser.wait_count(1)
        publish(service.url, topic, [Message(body="END")])
        refuser.wait_count(2)
        # "x" was not sent to the refusing link again (it would have come before END).
        assert bodies(refuser) == ["x", "END"]
        with other:
            other.wait_attached()
            got = other.wait_count(1)
            assert [r.message.body for r in got] == ["x"]
            assert got[0].delivery_count == 0  # undeliverable-here alone is not a failed delivery
            assert got[0].message.first_acquirer is False
            other.detach()
        assert bodies(refuser) == ["x", "END"]
        refuser.detach()
    assert unsubscribe(service.url, name, container_id=cid) == (None, None)


def test_rejected_is_dead_lettered_with_its_error(service: ServeProcess, topic: str) -> None:
    name, cid = uid("reject"), uid("client")

    def settle(got: Received) -> str:
        return "reject|app:bad-order|order 17 cannot be parsed" if got.message.body == "bad" else "accept"

    with Subscriber(service.url, topic, container_id=cid, settle=settle, **jms_shared_durable(name)) as s:
        s.wait_attached()
        publish(
            service.url, topic, [Message(body="good1", id="id-good1"), Message(body="bad", id="id-bad"), Message(body="good2")]
        )
        s.wait_count(3)
        wait_for(lambda: len(dead_letters(service.data_dir, name)) == 1, 60, "the dead-letter row")
        s.detach()
    (row,) = dead_letters(service.data_dir, name)
    assert row["topic"] == topic
    assert row["reason"] == "rejected"
    assert row["error_condition"] == "app:bad-order"
    assert row["error_description"] == "order 17 cannot be parsed"
    assert row["delivery_count"] == 0
    assert row["consumer"] == cid
    assert row["message_id"] == "id-bad"
    assert row["dead_lettered_at"] is not None
    topic_rows = read_table(layout.topic_table(str(service.data_dir), topic), ["seq", "message_id"])
    assert {r["seq"]: r["message_id"] for r in iter_rows(topic_rows)}[row["seq"]] == "id-bad"
    wait_for(lambda: len(ack_log(service.data_dir, name)) == 3, 60, "three ack-log rows")
    assert sorted(o for _, o in ack_log(service.data_dir, name)) == ["accepted", "accepted", "dead-lettered"]
    # Never redelivered: a new consumer gets only what comes next.
    assert_only_new_messages_then_unsubscribe(service, topic, name, cid, jms_shared_durable(name))


def test_rejected_without_error_on_a_plain_subscription(service: ServeProcess, topic: str) -> None:
    """Non-durable subscriptions have a dead-letter table too; an error-less reject leaves the
    error columns empty."""
    with Subscriber(service.url, topic, settle=lambda got: "reject" if got.message.body == "nope" else "accept") as s:
        s.wait_attached()
        publish(service.url, topic, [Message(body="nope"), Message(body="END")])
        s.wait_count(2)
        assert bodies(s) == ["nope", "END"]
        wait_for(lambda: len(dead_letters(service.data_dir, topic)) == 1, 60, "the dead-letter row")
        (row,) = dead_letters(service.data_dir, topic)
        assert row["reason"] == "rejected" and row["error_condition"] is None and row["error_description"] is None


@pytest.mark.parametrize("how", ["detach", "end-session", "drop-connection"])
def test_unsettled_deliveries_go_to_another_consumer_marked_redelivered(
    service: ServeProcess, topic: str, how: str
) -> None:
    name, cid = uid(f"gone-{how}"), uid("client")
    holder = Subscriber(
        service.url, topic, container_id=uid("holder"), credit=5, settle="none", **jms_shared_durable(name, is_global=True)
    )
    waiter = Subscriber(service.url, topic, container_id=cid, credit=0, **jms_shared_durable(name, is_global=True, ordinal=2))
    with holder, waiter:
        holder.wait_attached()
        waiter.wait_attached()
        publish(service.url, topic, [Message(body=i) for i in range(3)])
        holder.wait_count(3)
        assert [r.delivery_count for r in holder.received] == [0, 0, 0]
        if how == "detach":
            holder.detach()
        elif how == "end-session":
            holder.end_session()
        else:
            holder.drop_connection()
        waiter.flow(10)
        got = waiter.wait_count(3)
        assert [r.message.body for r in got] == [0, 1, 2]
        assert [r.delivery_count for r in got] == [1, 1, 1]
        assert [r.message.first_acquirer for r in got] == [False, False, False]
        waiter.detach()
    wait_for(lambda: sum(o == "accepted" for _, o in ack_log(service.data_dir, name)) == 3, 60, "three acks")
    assert sum(o == "failed" for _, o in ack_log(service.data_dir, name)) == 3  # one failed delivery each
    assert unsubscribe(service.url, name, container_id=cid, is_global=True) == (None, None)


def test_presettled_consumer_gets_each_message_once(service: ServeProcess, topic: str) -> None:
    name, cid = uid("presettled"), uid("client")
    kwargs = dict(jms_shared_durable(name), configure=presettled, settle="presettled")
    with Subscriber(service.url, topic, container_id=cid, **kwargs) as s:
        s.wait_attached()
        publish(service.url, topic, [Message(body=i) for i in range(5)])
        got = s.wait_count(5)
        assert [r.message.body for r in got] == list(range(5))
        assert all(r.presettled for r in got)
        wait_for(lambda: len(ack_log(service.data_dir, name)) == 5, 60, "five acks")
        s.detach()
    assert {o for _, o in ack_log(service.data_dir, name)} == {"accepted"}
    assert_only_new_messages_then_unsubscribe(service, topic, name, cid, kwargs)
