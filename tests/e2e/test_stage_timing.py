"""Per-stage timing of the message path on /metrics of a real ``sharedsub serve``
(sharedsub.core.ops.stage_timing): after messages went from a publisher to a consumer, every stage they
passed through, in the front end and in the fan-out job, has counted them."""

from __future__ import annotations

import pytest
from proton import Message

from tests.amqp_peer import Subscriber, publish, wait_for
from tests.http_probe import scrape
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e

N = 40
PER_MESSAGE = ("decode", "publish_accept", "publish_to_send")
PER_BATCH = ("group_commit", "tail_read", "tail_visible", "dispatch_wait",
             "fanout_source_read", "fanout_route", "fanout_commit", "fanout_batch", "fanout_wait")


def counts(service: ServeProcess, what: str = "count") -> dict[str, float]:
    return {dict(labels)["stage"]: v for (name, labels), v in scrape(service).items()
            if name == f"sharedsub_stage_seconds_{what}"}


def test_every_stage_a_message_passes_counts_it(service: ServeProcess, topic: str) -> None:
    before, before_sum = counts(service), counts(service, "sum")
    with Subscriber(service.url, topic, credit=N) as sub:
        sub.wait_attached()
        outcomes = publish(service.url, topic, [Message(body=f"m{i}") for i in range(N)])
        assert [o.state for o in outcomes] == ["accepted"] * N
        sub.wait_count(N, timeout=120)
    # The fan-out job's figures arrive with its statistics file, written after each batch.
    wait_for(lambda: counts(service).get("fanout_batch", 0) > before.get("fanout_batch", 0), 60, "fan-out stages")
    after = counts(service)
    for stage in PER_MESSAGE:
        assert after[stage] - before.get(stage, 0) >= N, stage
    for stage in PER_BATCH:
        assert after[stage] - before.get(stage, 0) >= 1, stage
    # Seconds spent in the window (the service is shared: earlier tests' figures are subtracted).
    spent = counts(service, "sum")["publish_to_send"] - before_sum.get("publish_to_send", 0)
    sent = after["publish_to_send"] - before.get("publish_to_send", 0)
    assert 0 < spent / sent < 120
