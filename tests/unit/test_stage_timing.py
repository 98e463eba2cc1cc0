"""sharedsub.core.ops.stage_timing: buckets, quantile estimates, differences, the JSON the fan-out job
writes and the Prometheus histogram it renders to."""

from __future__ import annotations

import pytest

from sharedsub.core.ops import metrics
from sharedsub.core.ops.stage_timing import BUCKETS, STAGE_HELP, Histogram, StageTimes, merged, stage_family, stages_from_json
from tests.prometheus_text import parse


@pytest.mark.parametrize(
    ("seconds", "bucket"),
    [(0.0, 0), (-1.0, 0), (0.0001, 0), (0.00011, 1), (0.02, 7), (0.025, 7), (30.0, len(BUCKETS) - 1), (31.0, len(BUCKETS))],
)
def test_an_observation_lands_in_the_first_bucket_whose_bound_it_does_not_exceed(seconds: float, bucket: int) -> None:
    h = Histogram()
    h.observe(seconds)
    assert h.counts[bucket] == 1 and h.count == 1
    assert h.total == max(seconds, 0.0)


def test_quantiles_interpolate_within_a_bucket() -> None:
    h = Histogram()
    assert h.quantile(0.5) is None
    for _ in range(100):
        h.observe(0.02)  # all in (0.01, 0.025]
    assert 0.01 < h.quantile(0.5) <= 0.025  # type: ignore[operator]
    assert h.quantile(0.5) == pytest.approx(0.0175)
    h.observe(100.0)
    assert h.quantile(1.0) == BUCKETS[-1]


def test_difference_and_sum_of_two_scrapes() -> None:
    h = Histogram()
    h.observe(0.001)
    before = h.copy()
    h.observe(0.5)
    h.observe(0.5)
    since = h.minus(before)
    assert since.count == 2 and since.total == pytest.approx(1.0)
    assert since.plus(before).counts == h.counts


def test_json_round_trip_and_broken_documents() -> None:
    t = StageTimes()
    t.observe("fanout_batch", 0.3)
    doc = t.to_json()
    back = stages_from_json(doc)
    assert back["fanout_batch"].counts == t.snapshot()["fanout_batch"].counts
    invalid = {"x": {"counts": [1, 2], "sum": 1}, "y": "nope", "z": {"counts": [-1] * (len(BUCKETS) + 1), "sum": 0}}
    assert stages_from_json(invalid) == {}
    assert stages_from_json(None) == {}


def test_rendered_as_one_prometheus_histogram_family() -> None:
    front, job = StageTimes(), StageTimes()
    front.observe("decode", 0.0003)
    front.observe("decode", 0.004)
    job.observe("fanout_batch", 0.2)
    job.observe("decode", 0.004)  # same stage from two sources adds up
    text = metrics.render([stage_family(merged(front.snapshot().items(), job.snapshot().items()))])
    assert "# TYPE sharedsub_stage_seconds histogram" in text
    _, samples = parse(text)
    bucket = {dict(labels)["le"]: v for (name, labels), v in samples.items()
              if name == "sharedsub_stage_seconds_bucket" and dict(labels)["stage"] == "decode"}
    assert bucket["0.00025"] == 0 and bucket["0.0005"] == 1 and bucket["0.005"] == 3 and bucket["+Inf"] == 3
    assert samples[("sharedsub_stage_seconds_count", (("stage", "decode"),))] == 3
    assert samples[("sharedsub_stage_seconds_sum", (("stage", "decode"),))] == pytest.approx(0.0083)
    # Every known stage is listed from the start, with zero counts.
    stages = {dict(labels)["stage"] for (name, labels) in samples if name == "sharedsub_stage_seconds_count"}
    assert stages == set(STAGE_HELP)
