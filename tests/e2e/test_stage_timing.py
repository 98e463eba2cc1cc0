"""Per-stage timing of the message path on /metrics of a real ``sharedsub serve``
(sharedsub.stage_timing): after messages went from a publisher to a consumer, every stage they
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


def counts(service: ServeProcess) -> dict[str, float]:
    return {dict(labels)["stage"]: v for (name, labels), v in scrape(service).items()
            if name == "sharedsub_stage_seconds_count"}


def test_every_stage_a_message_passes_counts_it(service: ServeProcess, topic: str) -> None:
    before = counts(service)
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
    samples = scrape(service)
    total = samples[("sharedsub_stage_seconds_sum", (("stage", "publish_to_send"),))]
    assert 0 < total < N * 120  # seconds spent, from the clocks of this machine
