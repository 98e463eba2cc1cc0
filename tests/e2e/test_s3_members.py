"""Two front ends on one ``s3://`` data dir share its subscriptions (issue 30): ``serve`` (member
slot 0, with the fan-out) and ``frontend`` (slot 1) on a real S3 server, each publishing to a
partition of its own; a global shared durable subscription with consumers on both gets every
message once, and each member's consumers are served."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from proton import Message

from sharedsub.core import layout
from sharedsub.core.ownership.members import fence_token
from sharedsub.storage.catalog import load_catalog
from sharedsub.storage.cluster.presence import read_presence
from sharedsub.storage.delta.appender import EPOCH_MARK
from sharedsub.storage.delta.commit_log import latest_version, read_log_entry
from sharedsub.storage.delta.table_reads import read_table
from sharedsub.storage.objects import open_store
from sharedsub.storage.topics import create_topic, topic_partitions
from tests.amqp_peer import (
    Subscriber,
    jms_durable,
    jms_shared_durable,
    jms_shared_volatile,
    publish,
    start_publish,
    uid,
    wait_for,
)
from tests.http_probe import health, scrape
from tests.members import MEMBERS, wait_for_owner
from tests.s3_server import S3Server
from tests.service import ROOT, ServeProcess


@pytest.fixture(scope="module")
def pair(s3_server: S3Server) -> Iterator[tuple[ServeProcess, ServeProcess]]:
    """``serve`` then ``frontend`` on one bucket prefix, two member slots allowed."""
    env = {**s3_server.env(), **MEMBERS}
    data = s3_server.url("members")
    first = ServeProcess(data, env=env).start()
    try:
        second = ServeProcess(data, command="frontend", env=env).start()
    except BaseException:
        first.stop()
        raise
    try:
        yield first, second
    finally:
        codes = (second.stop(), first.stop())
        assert codes == (0, 0), "\n".join(first.stderr_lines[-30:] + second.stderr_lines[-30:])


def _logs(*members: ServeProcess) -> str:
    """The last lines each member logged (for a failure's message)."""
    return "\n".join(f"--- member {i}:\n" + "\n".join(m.stderr_lines[-60:]) for i, m in enumerate(members))


def test_each_member_holds_a_slot_and_writes_its_own_partition(
    pair: tuple[ServeProcess, ServeProcess], s3_server: S3Server, s3_env: dict[str, str]
) -> None:
    first, second = pair
    data = str(first.data_dir)

    def members() -> dict[int, tuple[str, str | None]]:
        status = subprocess.run(
            [sys.executable, "-m", "sharedsub", "cluster", "status", "--json", "--data-dir", data],
            env={**s3_server.env(), "PATH": "/usr/bin:/bin"}, cwd=ROOT, capture_output=True, text=True, timeout=120,
        )
        assert status.returncode == 0, status.stderr[-2000:]
        return {m["slot"]: (m["state"], m["amqp"]) for m in json.loads(status.stdout)["members"]}

    expected = {0: ("live", first.url), 1: ("live", second.url)}
    wait_for(lambda: members() == expected, 30, "both members' leases to name them")  # (written with a renewal)
    topic = uid("t")
    create_topic(data, topic)
    for url in (first.url, second.url):
        outcomes = publish(url, topic, [Message(body=f"{url}-{i}") for i in range(5)])
        assert [o.state for o in outcomes] == ["accepted"] * 5
    assert topic_partitions(data, topic) == [0, 1]


def test_a_global_shared_durable_subscription_is_served_from_both_members_each_message_once(
    pair: tuple[ServeProcess, ServeProcess], s3_env: dict[str, str]
) -> None:
    first, second = pair
    topic, name = uid("t"), uid("sub")
    create_topic(str(first.data_dir), topic)
    create_topic(str(first.data_dir), topic, 1)  # the second member's partition, as its first publish makes it
    subs = [
        Subscriber(first.url, topic, **jms_shared_durable(name, is_global=True)),
        Subscriber(second.url, topic, **jms_shared_durable(name, is_global=True, ordinal=2)),
    ]
    for sub in subs:
        sub.start()
    try:
        for sub in subs:
            assert sub.attached.wait(60), (sub.error, _logs(first, second))
        wait_for_owner(str(first.data_dir), name, 1, 1)
        sent = []
        for url, who in ((first.url, "a"), (second.url, "b")):
            bodies = [f"{who}{i}" for i in range(60)]
            outcomes = publish(url, topic, [Message(body=b) for b in bodies])
            assert [o.state for o in outcomes] == ["accepted"] * len(bodies)
            sent += bodies
        try:
            wait_for(lambda: sum(len(s.received) for s in subs) >= len(sent), 180, "every message delivered")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; received {[len(s.received) for s in subs]}\n{_logs(first, second)}") from None
        got = Counter(r.message.body for s in subs for r in s.received)
        assert sorted(got) == sorted(sent) and max(got.values()) == 1, [b for b, n in got.items() if n > 1]
        assert all(s.received for s in subs), [len(s.received) for s in subs]  # both members' consumers served
        for sub in subs:  # each publisher's messages in the order it sent them, at every consumer
            for who in "ab":
                mine = [int(r.message.body[1:]) for r in sub.received if r.message.body.startswith(who)]
                assert mine == sorted(mine), (who, mine)
        status = subprocess.run(
            [sys.executable, "-m", "sharedsub", "cluster", "status", "--json", "--data-dir", str(first.data_dir)],
            env={**s3_env, "PATH": "/usr/bin:/bin"}, cwd=ROOT, capture_output=True, text=True, timeout=120,
        )
        key = layout.subscription_key("global", name, shared=True, durable=True)
        owners = {d["partition"]: d["owner"] for d in json.loads(status.stdout)["dispatch"] if d["subscription"] == key}
        assert owners == {0: 0, 1: 1}, status.stdout  # each partition dispatched by its writer
        for partition in (0, 1):  # no seq twice in any partition
            seqs = read_table(layout.topic_partition_table(str(first.data_dir), topic, partition), ["seq"])
            assert seqs is not None and seqs.num_rows == len(set(seqs.column("seq").to_pylist())) == 60
        acknowledged = ("sharedsub_acknowledged_total", (("subscription", key), ("topic", topic)))
        for member, sub in zip((first, second), subs, strict=True):  # each member's /metrics counts its own
            assert scrape(member)[("sharedsub_published_total", (("topic", topic),))] == 60
            got = len(sub.received)
            wait_for(lambda m=member, n=got: scrape(m).get(acknowledged) == n, 30, "the member's acknowledgements")
    finally:
        for sub in subs:
            sub.stop()


def test_a_killed_member_s_partition_is_taken_over_its_unsettled_deliveries_come_again_and_it_rejoins(
    s3_server: S3Server, s3_env: dict[str, str]
) -> None:
    """kill -9 the second member while its consumer holds deliveries unsettled: the first takes
    its partition over and delivers every message of it, those the dead member had sent marked
    redelivered; nothing accepted is lost. The non-durable subscriptions whose only consumers were
    on the dead member (a shared one, a plain consumer's) are ended by the survivor. A new second
    member takes the slot again (epoch 2) and its consumer gets a share of what comes next."""
    env = {**s3_server.env(), **MEMBERS}
    data = s3_server.url("members-kill")
    first = ServeProcess(data, env=env).start()
    second = ServeProcess(data, command="frontend", env=env).start()
    third: ServeProcess | None = None
    topic, name = uid("t"), uid("sub")
    create_topic(data, topic)
    create_topic(data, topic, 1)  # the second member's partition, as its first publish makes it
    survivor = Subscriber(first.url, topic, **jms_shared_durable(name, is_global=True))
    doomed = Subscriber(second.url, topic, settle="none", **jms_shared_durable(name, is_global=True, ordinal=2))
    volatile = Subscriber(second.url, topic, **jms_shared_volatile(name, is_global=True))
    plain = Subscriber(second.url, topic, expiry="link-detach", capabilities=["topic"])
    later: Subscriber | None = None
    try:
        for sub in (survivor, doomed, volatile, plain):
            sub.start()
            assert sub.attached.wait(60), sub.error
        non_durable = [k for k, rec in load_catalog(data).items() if rec.active and not rec.identity.durable]
        assert len(non_durable) == 2, non_durable
        wait_for_owner(data, name, 1, 1)
        sent = [f"a{i}" for i in range(30)] + [f"b{i}" for i in range(30)]
        assert {o.state for o in publish(first.url, topic, [Message(body=b) for b in sent[:30]])} == {"accepted"}
        assert {o.state for o in publish(second.url, topic, [Message(body=b) for b in sent[30:]])} == {"accepted"}
        wait_for(lambda: len(doomed.received) >= 30, 120, "the second member's consumer to hold its partition's messages")
        held = {r.message.body for r in doomed.received}
        second.kill()
        wait_for(lambda: {r.message.body for r in survivor.received} >= set(sent), 120, "every message at the survivor")
        again = [r for r in survivor.received if r.message.body in held]
        assert again and all(r.delivery_count >= 1 for r in again), [(r.message.body, r.delivery_count) for r in again]
        # None twice unless marked: a message the dead member had sent, or that came here before,
        # comes again with a delivery count.
        seen = set(held)
        for r in survivor.received:
            body = r.message.body
            assert body not in seen or r.delivery_count >= 1, (body, "again without the mark", _logs(first, second))
            seen.add(body)
        wait_for(
            lambda: not any(load_catalog(data)[k].active for k in non_durable), 90,
            "the survivor to end the non-durable subscriptions only the dead member consumed",
        )

        third = ServeProcess(data, command="frontend", env=env).start()
        later = Subscriber(third.url, topic, **jms_shared_durable(name, is_global=True, ordinal=3))
        later.start()
        assert later.attached.wait(60), later.error
        wait_for_owner(data, name, 1, 1)
        before = len(survivor.received)
        more = [f"c{i}" for i in range(30)]
        assert {o.state for o in publish(third.url, topic, [Message(body=b) for b in more])} == {"accepted"}
        wait_for(lambda: len(later.received) >= 30, 120, "the rejoined member's consumer to get its partition")
        assert sorted(r.message.body for r in later.received) == sorted(more)
        assert len(survivor.received) == before  # nothing of the new partition twice
    finally:
        for sub in (survivor, doomed, volatile, plain, later):
            if sub is not None:
                sub.stop()
        codes = [p.stop() for p in (third, first) if p is not None]
        assert codes == [0] * len(codes), "\n".join(first.stderr_lines[-40:])


def test_a_member_paused_past_its_lease_writes_nothing_after_it_resumes_and_closes_its_connections(
    s3_server: S3Server, s3_env: dict[str, str]
) -> None:
    """SIGSTOP the second member past its lease: the first takes its partition over (after a whole
    TTL of an unchanged lease: the paused process still exists). SIGCONT with a publish and
    settlements waiting for it: it stops, having written nothing more (no topic row, no ack, no
    catalog revision under its token), and its clients' connections end."""
    env = {**s3_server.env(), **MEMBERS}
    data = s3_server.url("members-stop")
    first = ServeProcess(data, env=env).start()
    second = ServeProcess(data, command="frontend", env=env).start()
    topic, name = uid("t"), uid("sub")
    create_topic(data, topic)
    create_topic(data, topic, 1)  # the second member's partition, as its first publish makes it
    survivor = Subscriber(first.url, topic, **jms_shared_durable(name, is_global=True))
    paused = Subscriber(second.url, topic, settle="none", **jms_shared_durable(name, is_global=True, ordinal=2))
    try:
        for sub in (survivor, paused):
            sub.start()
            assert sub.attached.wait(60), sub.error
        wait_for_owner(data, name, 1, 1)
        sent = [f"b{i}" for i in range(20)]
        assert {o.state for o in publish(second.url, topic, [Message(body=b) for b in sent])} == {"accepted"}
        wait_for(lambda: len(paused.received) >= 20, 120, "the second member's consumer to hold its messages")
        token = fence_token(1, 1)  # slot 1's first epoch: the second member's commits carry it
        os.kill(second.pid, signal.SIGSTOP)
        try:
            wait_for(lambda: {r.message.body for r in survivor.received} >= set(sent), 120, "the survivor to take over")
            p1 = layout.topic_partition_table(data, topic, 1)
            key = layout.subscription_key("global", name, shared=True, durable=True)
            acks = layout.join(data, layout.ack_table_rel(key, 1))
            versions = {p1: latest_version(p1), layout.catalog_table(data): latest_version(layout.catalog_table(data))}
            acks_before = latest_version(acks)
            late = start_publish(second.url, topic, [Message(body="late")])  # read when it resumes
            time.sleep(1)
        finally:
            os.kill(second.pid, signal.SIGCONT)
        assert second.proc is not None
        assert second.proc.wait(60) != 0  # fail-stop
        assert paused.disconnected.wait(60), "the paused member's consumer connection did not end"
        assert all(o.state != "accepted" for o in late.settled)
        assert {table: latest_version(table) for table in versions} == versions  # nothing of its own
        for version in range(acks_before + 1, latest_version(acks) + 1):
            entry = read_log_entry(acks, version)
            assert entry is None or entry.info.get(EPOCH_MARK) != str(token), version
    finally:
        for sub in (survivor, paused):
            sub.stop()
        second.kill()
        assert first.stop() == 0, "\n".join(first.stderr_lines[-40:])


def _second_connection(first_url: str, second_url: str, cid: str, *, close_first: bool) -> dict[str, object]:
    """Connect as container ``cid`` (sole-connection desired, as a JMS ClientID) to
    ``first_url``, then (after closing that one when ``close_first``) to ``second_url``: what
    the second connection got (``opened``, or its refusal's ``condition`` and ``info``)."""
    from proton import symbol
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    sole = [symbol("sole-connection-for-container")]
    result: dict[str, object] = {}

    class Two(MessagingHandler):  # type: ignore[misc]
        def on_start(self, event: Any) -> None:
            event.container.container_id = cid
            self.a = event.container.connect(first_url, desired_capabilities=sole, reconnect=False)
            self.b = None

        def on_connection_opened(self, event: Any) -> None:
            if event.connection == self.a:
                if close_first:
                    self.a.close()
                else:
                    self.b = event.container.connect(second_url, desired_capabilities=sole, reconnect=False)
            elif event.connection == self.b and "condition" not in result:
                result["opened"] = True
                self.b.close()
                if not close_first:
                    self.a.close()

        def on_connection_closed(self, event: Any) -> None:
            if event.connection == self.a and close_first and self.b is None:
                self.b = event.container.connect(second_url, desired_capabilities=sole, reconnect=False)

        def on_connection_error(self, event: Any) -> None:
            cond = event.connection.remote_condition
            result["condition"], result["info"] = cond.name, dict(cond.info or {})
            event.connection.close()
            if self.a is not None and not self.a.state & self.a.LOCAL_CLOSED:
                self.a.close()

    container = Container(Two())
    container.container_id = cid
    container.run()
    return result


def test_a_jms_client_id_has_one_connection_across_the_members(pair: tuple[ServeProcess, ServeProcess]) -> None:
    """A ClientID connected to one member is refused by the other, as by the same front end
    (invalid-field container-id: the Qpid JMS client's InvalidClientIDException); once its
    connection ends, the other member takes it."""
    from proton import symbol

    first, second = pair
    cid = uid("client")
    refused = _second_connection(first.url, second.url, cid, close_first=False)
    assert refused.get("condition") == "amqp:invalid-field", refused
    assert refused["info"] == {symbol("invalid-field"): symbol("container-id")}  # type: ignore[comparison-overlap]
    # Once it ended (its member releases the claim as the connection goes; a client that comes
    # back at once may find the release not landed yet and tries again, as Qpid JMS reconnects).
    for _ in range(10):
        if _second_connection(first.url, second.url, cid, close_first=True) == {"opened": True}:
            break
        time.sleep(0.5)
    else:
        raise AssertionError("the other member never took the ClientID after its connection ended")


def test_an_unsubscribe_sent_to_one_member_counts_the_consumers_on_the_other(
    pair: tuple[ServeProcess, ServeProcess], s3_server: S3Server, s3_env: dict[str, str]
) -> None:
    """A subscription with a consumer on the second member is not deleted through the first
    (the command line reaches the member of this host in the lowest slot: the first); once that
    consumer is gone, it is, and the second member learns it."""
    first, second = pair
    data = str(first.data_dir)
    topic, name = uid("t"), uid("sub")
    create_topic(data, topic)
    key = layout.subscription_key("global", name, shared=True, durable=True)
    store = open_store(data)
    holder = Subscriber(second.url, topic, **jms_shared_durable(name, is_global=True))
    holder.start()

    def unsubscribe() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sharedsub", "unsubscribe", name, "--data-dir", data, "--json"],
            env={**s3_server.env(), "PATH": "/usr/bin:/bin"}, cwd=ROOT, capture_output=True, text=True, timeout=120,
        )

    try:
        assert holder.attached.wait(60), holder.error
        wait_for(lambda: 1 in read_presence(store, "", key, 1), 30, "the second member to say it has a consumer")
        wait_for(lambda: "no subscription" not in unsubscribe().stdout, 30, "the first member to know the subscription")
        refused = unsubscribe()
        assert refused.returncode != 0 and json.loads(refused.stdout)["error"] == "in-use", refused.stdout
    finally:
        holder.stop()
    wait_for(lambda: 1 not in read_presence(store, "", key, 1), 30, "the second member to say it has none")
    done = unsubscribe()
    assert done.returncode == 0 and json.loads(done.stdout)["ok"], done.stdout + done.stderr
    assert not load_catalog(data)[key].active


def test_an_unshared_durable_subscription_has_one_consumer_across_the_members(
    pair: tuple[ServeProcess, ServeProcess], s3_env: dict[str, str]
) -> None:
    """A client that does not ask for a sole connection may use its container id on both
    members: its durable subscription's consumer attached on the first, the same attach on the
    second is refused resource-locked as one front end refuses it; once detached there, the
    second member takes the consumer, with the backlog kept meanwhile."""
    first, second = pair
    topic, name, cid = uid("t"), uid("ex"), uid("client")
    create_topic(str(first.data_dir), topic)
    with Subscriber(first.url, topic, container_id=cid, **jms_durable(name)) as held:
        held.wait_attached()
        with Subscriber(second.url, topic, container_id=cid, **jms_durable(name)) as refused:
            cond, desc = refused.wait_refused()
            assert cond == "amqp:resource-locked", (cond, desc)
        assert held.detach(closed=False) == (None, None)
    assert {o.state for o in publish(first.url, topic, [Message(body="while-away")])} == {"accepted"}
    # The claim goes as the link does; a client coming back at once may find the release not
    # landed yet, and attaches again.
    for _ in range(20):
        with Subscriber(second.url, topic, container_id=cid, **jms_durable(name)) as taken:
            wait_for(lambda: taken.attached.is_set() or taken.error is not None, 30, "the attach's answer")
            if taken.error is None:
                assert [r.message.body for r in taken.wait_count(1)] == ["while-away"]
                assert taken.detach(closed=True) == (None, None)  # the unsubscribe
                break
            assert taken.error[0] == "amqp:resource-locked", taken.error
        time.sleep(0.5)
    else:
        raise AssertionError("the second member never took the consumer after the first detached")


def test_a_shared_non_durable_subscription_lives_while_any_member_has_a_consumer(
    pair: tuple[ServeProcess, ServeProcess], s3_env: dict[str, str]
) -> None:
    """A global shared non-durable subscription with a consumer on each member: the first's
    consumer leaving (expiry link-detach) does not end it, the second's gets what is published
    on either member afterwards; the second's leaving ends it (no live member has a consumer)."""
    first, second = pair
    data = str(first.data_dir)
    topic, name = uid("t"), uid("vol")
    create_topic(data, topic)
    key = layout.subscription_key("global", name, shared=True, durable=False)
    store = open_store(data)
    leaving = Subscriber(first.url, topic, **jms_shared_volatile(name, is_global=True))
    staying = Subscriber(second.url, topic, **jms_shared_volatile(name, is_global=True, ordinal=2))
    try:
        for sub in (leaving, staying):
            sub.start()
            assert sub.attached.wait(60), sub.error
        wait_for(lambda: set(read_presence(store, "", key, 1)) == {0, 1}, 30, "both members to say they have a consumer")
        assert leaving.detach(closed=True) == (None, None)
        assert load_catalog(data)[key].active, "the subscription ended with one member's consumer"
        messages = [Message(body=f"{who}-{i}") for who in ("a", "b") for i in range(20)]
        for url, part in ((first.url, messages[:20]), (second.url, messages[20:])):
            assert {o.state for o in publish(url, topic, part)} == {"accepted"}
        got = [r.message.body for r in staying.wait_count(40, timeout=120)]
        assert sorted(got) == sorted(m.body for m in messages), got
        assert staying.detach(closed=True) == (None, None)
        wait_for(lambda: not load_catalog(data)[key].active, 30, "the subscription to end with its last consumer")
    finally:
        for sub in (leaving, staying):
            sub.stop()


def test_consumers_that_get_no_partition_are_named_in_health(
    pair: tuple[ServeProcess, ServeProcess], s3_env: dict[str, str]
) -> None:
    """A topic with one partition (only the first member publishes to it) and a shared
    subscription with consumers on both members: the first dispatches it, the second's /health
    names the subscription as one whose consumers here wait."""
    first, second = pair
    topic, name = uid("t"), uid("sub")
    create_topic(str(first.data_dir), topic)
    key = layout.subscription_key("global", name, shared=True, durable=True)
    subs = [
        Subscriber(first.url, topic, **jms_shared_durable(name, is_global=True)),
        Subscriber(second.url, topic, **jms_shared_durable(name, is_global=True, ordinal=2)),
    ]
    try:
        for sub in subs:
            sub.start()
            assert sub.attached.wait(60), sub.error
        wait_for(lambda: key in health(second)[1].get("member", {}).get("idle_consumers", []), 30, "/health to name it")
        code, doc = health(second)  # (the second member's own: its discovery file names its pid)
        assert code == 200 and doc["member"]["slot"] == 1, doc
        assert {o.state for o in publish(first.url, topic, [Message(body=f"m{i}") for i in range(10)])} == {"accepted"}
        wait_for(lambda: len(subs[0].received) >= 10, 120, "the first member's consumer to get them all")
        assert not subs[1].received
    finally:
        for sub in subs:
            sub.stop()


def test_a_partition_handed_over_while_its_messages_flow_delivers_none_twice_unmarked(
    pair: tuple[ServeProcess, ServeProcess], s3_env: dict[str, str]
) -> None:
    """The first member dispatches both partitions to its consumer while messages flow; a
    consumer attaches on the second, which takes its partition over mid-stream (the first drains
    it, its settlements stored before it lets go): every message arrives, and one that arrives
    twice is marked redelivered."""
    first, second = pair
    data = str(first.data_dir)
    topic, name = uid("t"), uid("sub")
    create_topic(data, topic)
    create_topic(data, topic, 1)
    def slowly(_received: object) -> str:
        time.sleep(0.01)  # a consumer that takes its time: the hand-over comes while it works
        return "accept"

    early = Subscriber(first.url, topic, refill=True, settle=slowly, **jms_shared_durable(name, is_global=True))
    late = Subscriber(second.url, topic, refill=True, **jms_shared_durable(name, is_global=True, ordinal=2))
    try:
        early.start()
        assert early.attached.wait(60), early.error
        runs = [
            start_publish(member.url, topic, [Message(body=f"{who}{i}") for i in range(300)])
            for member, who in ((first, "a"), (second, "b"))
        ]
        wait_for(lambda: len(early.received) >= 100, 120, "the first consumer to be under way")
        late.start()
        assert late.attached.wait(60), late.error
        for run in runs:
            assert {o.state for o in run.wait(180)} == {"accepted"}
        sent = {f"{who}{i}" for who in "ab" for i in range(300)}
        wait_for(lambda: {r.message.body for s in (early, late) for r in s.received} >= sent, 180, "every message")
        seen: set[str] = set()
        for r in sorted((r for s in (early, late) for r in s.received), key=lambda r: r.delivery_count):
            assert r.message.body not in seen or r.delivery_count >= 1, f"{r.message.body} twice, not marked"
            seen.add(r.message.body)
        assert late.received  # the hand-over happened
    finally:
        early.stop()
        late.stop()
