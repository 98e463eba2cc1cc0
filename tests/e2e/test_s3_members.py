"""Two front ends on one ``s3://`` data dir share its subscriptions (issue 30): ``serve`` (member
slot 0, with the fan-out) and ``frontend`` (slot 1) on a real S3 server, each publishing to a
partition of its own; a global shared durable subscription with consumers on both gets every
message once, and each member's consumers are served."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator

import pytest
from proton import Message

from sharedsub.storage.topics import create_topic, topic_partitions
from tests.amqp_peer import Subscriber, jms_shared_durable, publish, uid, wait_for
from tests.s3_server import S3Server
from tests.service import ROOT, ServeProcess

MEMBERS = {"SHAREDSUB_CLUSTER_MAX_MEMBERS": "2", "SHAREDSUB_CLUSTER_INTERVAL": "0.5", "SHAREDSUB_CLUSTER_DRAIN_TIMEOUT": "2"}


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
    subs = [
        Subscriber(first.url, topic, **jms_shared_durable(name, is_global=True)),
        Subscriber(second.url, topic, **jms_shared_durable(name, is_global=True, ordinal=2)),
    ]
    for sub in subs:
        sub.start()
    try:
        for sub in subs:
            assert sub.attached.wait(60), sub.error
        sent = []
        for url, who in ((first.url, "a"), (second.url, "b")):
            bodies = [f"{who}{i}" for i in range(60)]
            outcomes = publish(url, topic, [Message(body=b) for b in bodies])
            assert [o.state for o in outcomes] == ["accepted"] * len(bodies)
            sent += bodies
        wait_for(lambda: sum(len(s.received) for s in subs) >= len(sent), 180, "every message delivered")
        got = Counter(r.message.body for s in subs for r in s.received)
        assert sorted(got) == sorted(sent) and max(got.values()) == 1, [b for b, n in got.items() if n > 1]
        assert all(s.received for s in subs), [len(s.received) for s in subs]  # both members' consumers served
    finally:
        for sub in subs:
            sub.stop()
