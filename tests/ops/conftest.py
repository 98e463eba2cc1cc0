"""A data dir built by a real service run, for the read-only operations tests (CLI, notebook).

``ops_service`` starts ``sharedsub serve`` on a fresh data dir, creates topic ``orders``, attaches
the subscriptions below with real python-qpid-proton clients, publishes ten messages, consumes
some, and waits until the tables show it all. The subscribers stay attached while the tests run.

===========================  ==================  ==============================================
subscription (namespace:name) kind               state when the tests run
===========================  ==================  ==============================================
app-1:billing                shared durable      2 links; one took 3 messages and accepted them:
                                                 backlog 7 of 10
app-3:billing                shared durable      1 link with no credit: backlog 10 (ambiguous name)
app-2:archive                durable, selector   detached (no consumer): backlog 5 (region = 'eu')
                             region = 'eu'
app-1:live                   shared non-durable  1 link with no credit: backlog <= 10 (no acks)
===========================  ==================  ==============================================
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import Message

from sharedsub.runtime import inspection
from sharedsub.storage.topics import create_topic
from tests.amqp_peer import Subscriber, jms_durable, jms_shared_durable, jms_shared_volatile, publish, wait_for
from tests.service import ServeProcess

TOPIC = "orders"
PUBLISHED = 10
EXPECTED_BACKLOG = {"app-1:billing": 7, "app-3:billing": 10, "app-2:archive": 5, "app-1:live": 10}
EXPECTED_CONSUMERS = {"app-1:billing": 2, "app-3:billing": 1, "app-2:archive": 0, "app-1:live": 1}


@dataclasses.dataclass
class OpsDataDir:
    """The running service and what was done to its data dir."""

    service: ServeProcess
    data_dir: Path
    subscribers: list[Subscriber]


def order(i: int) -> Message:
    return Message(
        body=f"order {i}",
        id=f"order-{i}",
        subject="order",
        properties={"region": "eu" if i % 2 == 0 else "us", "n": i},
    )


@pytest.fixture(scope="session")
def ops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpsDataDir]:
    data = tmp_path_factory.mktemp("ops-data")
    create_topic(str(data), TOPIC)
    service = ServeProcess(data).start()
    url = service.url
    subscribers: list[Subscriber] = []
    try:
        taker = Subscriber(url, TOPIC, container_id="app-1", credit=3, settle="accept", **jms_shared_durable("billing"))
        idle = Subscriber(url, TOPIC, container_id="app-1", credit=0, **jms_shared_durable("billing", ordinal=2))
        other = Subscriber(url, TOPIC, container_id="app-3", credit=0, **jms_shared_durable("billing"))
        live = Subscriber(url, TOPIC, container_id="app-1", credit=0, **jms_shared_volatile("live"))
        subscribers = [taker, idle, other, live]
        for s in subscribers:
            s.start()
            s.wait_attached()
        with Subscriber(url, TOPIC, container_id="app-2", credit=0, selector="region = 'eu'", **jms_durable("archive")) as a:
            a.wait_attached()
            a.detach()
        outcomes = publish(url, TOPIC, [order(i) for i in range(PUBLISHED)], container_id="publisher")
        assert [o.state for o in outcomes] == ["accepted"] * PUBLISHED
        taker.wait_count(3, timeout=180)

        def settled() -> bool:
            found = {s.display_name: s for s in inspection.list_subscriptions(str(data))}
            return {n: s.messages for n, s in found.items()} == EXPECTED_BACKLOG and {
                n: len(s.consumers) for n, s in found.items()
            } == EXPECTED_CONSUMERS

        wait_for(settled, 240, "routing and acknowledgements in the tables")
        yield OpsDataDir(service, data, subscribers)
    finally:
        for s in subscribers:
            s.stop()
        code = service.stop()
        assert code == 0, f"serve exited with {code}:\n{service.log()[-4000:]}"
