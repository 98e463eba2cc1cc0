"""Counters and the Prometheus text exposition (sharedsub/core/ops/metrics.py), read back by a parser."""

from __future__ import annotations

import pytest

from sharedsub.core.ops import metrics
from tests.prometheus_text import parse, value


def test_counters_render_and_parse() -> None:
    c = metrics.Counters()
    c.inc(metrics.PUBLISHED, "orders", n=3)
    c.inc(metrics.DELIVERED, "orders", "shared-durable~app~a~0123", 2)
    c.inc(metrics.DELIVERED, "orders", "shared-durable~app~a~0123")
    families = metrics.counter_families(c.snapshot())
    families.append(
        metrics.gauge("sharedsub_backlog_messages", "Backlog.", [({"topic": 'we"ird\\\n', "subscription": "s"}, 7.0)])
    )
    families.append(metrics.gauge("sharedsub_fanout_batch_duration_seconds", "Last batch.", [({}, 0.25)]))
    types, samples = parse(metrics.render(families))
    assert types["sharedsub_published_total"] == "counter"
    assert types["sharedsub_backlog_messages"] == "gauge"
    assert value(samples, "sharedsub_published_total", topic="orders") == 3
    assert value(samples, "sharedsub_delivered_total", topic="orders", subscription="shared-durable~app~a~0123") == 3
    assert value(samples, "sharedsub_backlog_messages", topic='we"ird\\\n', subscription="s") == 7
    assert value(samples, "sharedsub_fanout_batch_duration_seconds") == 0.25
    # every counter family is declared, even with no samples yet
    assert {f"sharedsub_{n}_total" for n in metrics.COUNTER_HELP} <= set(types)


def test_snapshot_is_a_copy() -> None:
    c = metrics.Counters()
    c.inc(metrics.EXPIRED, "t", "s")
    snap = c.snapshot()
    c.inc(metrics.EXPIRED, "t", "s")
    assert snap[(metrics.EXPIRED, "t", "s")] == 1 and c.value(metrics.EXPIRED, "t", "s") == 2


@pytest.mark.parametrize("bad", ["x 1", "# TYPE a counter\nb 1\n", "# TYPE a counter\na{l=1} 1\n", "# TYPE a gauge\na one\n"])
def test_the_parser_rejects_bad_expositions(bad: str) -> None:
    with pytest.raises(ValueError, match="bad|duplicate|newline|could not convert"):
        parse(bad if bad.endswith("\n") else bad + "\n")
