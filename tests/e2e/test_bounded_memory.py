"""The front end's per-subscription delivery state stays bounded while a subscription is used
for many messages (issue 11 item 6; the memory figure itself is bench/soak.py's).

Two consumers share one durable subscription and settle out of order through several rounds;
after each, ``sharedsub_delivery_state_seqs`` of its table must stay near the open window (the
credit), far below the messages the subscription took. A plain set of acknowledged seqs (what
the front end kept before sharedsub.core.delivery.acked_seqs) holds every one of them and fails this.
"""

from __future__ import annotations

import pytest
from proton import Message

from tests.amqp_peer import Subscriber, jms_shared_durable, publish, uid, wait_for
from tests.http_probe import scrape
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e

ROUNDS = 3
PER_ROUND = 3000
CREDIT = 200


def delivery_state(service: ServeProcess, table_part: str) -> float | None:
    samples = scrape(service)
    found = [v for (name, labels), v in samples.items()
             if name == "sharedsub_delivery_state_seqs" and table_part in dict(labels).get("table", "")]
    return max(found) if found else None


def test_delivery_state_stays_near_the_open_window(service: ServeProcess, topic: str) -> None:
    name = uid("mem")
    container = uid("c")
    subs = [
        Subscriber(service.url, topic, container_id=container, credit=CREDIT, refill=True,
                   **jms_shared_durable(name, ordinal=n))
        for n in (1, 2)
    ]
    for sub in subs:
        sub.start()
    try:
        wait_for(lambda: all(s.attached.is_set() for s in subs), 60, "both consumers attached")
        seen: list[float] = []
        for round_no in range(ROUNDS):
            base = round_no * PER_ROUND
            outcomes = publish(service.url, topic, [Message(body=f"m{base + i}") for i in range(PER_ROUND)],
                               timeout=180)
            assert all(o.state == "accepted" for o in outcomes)
            want = (round_no + 1) * PER_ROUND
            wait_for(lambda want=want: sum(len(s.received) for s in subs) >= want, 300, f"{want} messages received")
            state = delivery_state(service, name)
            assert state is not None, "no sharedsub_delivery_state_seqs sample for the subscription"
            seen.append(state)
        bodies = [r.message.body for s in subs for r in s.received]
        assert len(bodies) == len(set(bodies)) == ROUNDS * PER_ROUND
        # Bound: the explicit seqs are raised into the floor once they reach 1,024 (or twice
        # the previous remainder); what remains is the open window (2 x CREDIT) and the seqs
        # settled above its lowest row.
        assert max(seen) < 1024 + 4 * CREDIT, seen
    finally:
        for sub in subs:
            sub.stop()
