"""Two front ends on one bucket and the fan-out under ``spark-submit --master local-cluster[2,1,768]``
routing on the executors (issue 30): publishers on both members (two topic partitions), a global
shared durable subscription with consumers on both, a selector subscription, a no-local one and a
ClientID durable one; every accepted message reaches each subscription it matches once, each
publisher's messages in order, both members' shared consumers served."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from proton import Message

from sharedsub.storage.topics import create_topic
from tests.amqp_peer import Subscriber, jms_durable, jms_shared_durable, publish, uid, wait_for
from tests.cluster.conftest import CLUSTER_MASTER
from tests.members import MEMBERS, wait_for_owner
from tests.ops.test_spark_submit import SparkSubmit
from tests.s3_server import S3Server
from tests.service import ServeProcess

pytestmark = pytest.mark.spark


def test_two_members_and_the_fan_out_on_a_spark_cluster_route_and_deliver_every_message_once(
    s3_server: S3Server, s3_env: dict[str, str], tmp_path: Path
) -> None:
    data = s3_server.url("cluster-members")
    env = {**s3_server.env(), **MEMBERS}
    topic = uid("t")
    create_topic(data, topic)
    create_topic(data, topic, 1)  # the second member's partition, as its first publish makes it
    first = ServeProcess(data, command="frontend", env=env).start()
    second = ServeProcess(data, command="frontend", env=env).start()
    job = SparkSubmit(
        data,
        env={**s3_server.env(), "SPARK_LOCAL_IP": "127.0.0.1", "XDG_STATE_HOME": str(tmp_path / "state"),
             "SHAREDSUB_FANOUT_ROUTING": "executors"},
        spark_args=["--master", CLUSTER_MASTER, "--conf", "spark.executor.memory=512m"],
    )  # fmt: skip
    name = uid("shared")
    subs = {
        "shared-a": Subscriber(first.url, topic, **jms_shared_durable(name, is_global=True)),
        "shared-b": Subscriber(second.url, topic, **jms_shared_durable(name, is_global=True, ordinal=2)),
        "selector": Subscriber(second.url, topic, selector="n >= 10", **jms_shared_durable(uid("sel"), is_global=True)),
        "no-local": Subscriber(first.url, topic, container_id="pub-a", no_local=True, **jms_durable(uid("nl"))),
        "client-id": Subscriber(first.url, topic, container_id=uid("client"), **jms_durable(uid("dur"))),
    }
    try:
        job.wait_ready(timeout=420)
        assert any(f"Spark master {CLUSTER_MASTER}, routing executors" in line for line in job.stdout), job.stdout[-20:]
        for sub in subs.values():
            sub.start()
            assert sub.attached.wait(60), sub.error
        wait_for_owner(data, name, 1, 1)  # the second member dispatches its partition of the shared one
        sent: dict[str, list[tuple[str, int]]] = {"pub-a": [], "pub-b": []}
        for member, pub in ((first, "pub-a"), (second, "pub-b")):
            messages = [Message(body=f"{pub}-{i}", properties={"n": i}) for i in range(20)]
            outcomes = publish(member.url, topic, messages, container_id=pub)
            assert [o.state for o in outcomes] == ["accepted"] * 20
            sent[pub] = [(f"{pub}-{i}", i) for i in range(20)]
        every = [body for bodies in sent.values() for body, _ in bodies]
        expected = {
            "shared": sorted(every),
            "selector": sorted(b for bodies in sent.values() for b, n in bodies if n >= 10),
            "no-local": sorted(b for b, _ in sent["pub-b"]),
            "client-id": sorted(every),
        }

        def got(*names: str) -> list[str]:
            return sorted(r.message.body for n in names for r in subs[n].received)

        def arrived(label: str, *names: str) -> None:
            wait_for(lambda: len(got(*names)) >= len(expected[label]), 300, f"the {label} subscription's messages")

        arrived("shared", "shared-a", "shared-b")
        for label in ("selector", "no-local", "client-id"):
            arrived(label, label)
        assert got("shared-a", "shared-b") == expected["shared"]
        assert max(Counter(got("shared-a", "shared-b")).values()) == 1
        assert got("selector") == expected["selector"]
        assert got("no-local") == expected["no-local"]
        assert got("client-id") == expected["client-id"]
        for sub in subs.values():  # each publisher's messages in its order at every consumer
            for pub in sent:
                mine = [int(r.message.body.rsplit("-", 1)[1]) for r in sub.received if r.message.body.startswith(pub)]
                assert mine == sorted(mine), (pub, mine)
        assert subs["shared-a"].received and subs["shared-b"].received  # both members' shared consumers served
        assert any("the executors wrote" in line for line in job.stdout), job.stdout[-20:]  # routed on the executors
    finally:
        for sub in subs.values():
            sub.stop()
        job.kill()
        codes = [second.stop(), first.stop()]
        assert codes == [0, 0], "\n".join(first.stderr_lines[-30:] + second.stderr_lines[-30:])
