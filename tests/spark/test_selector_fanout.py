"""The fan-out routes by JMS selector: FanoutSink.route_batch on real Delta tables and local Spark."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from jobs.fanout_sink import FanoutSink
from tests import builders as b
from tests.spark.test_fanout import source_frame

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("ansi", ["true", "false"])
def test_subscriptions_with_different_selectors_get_their_rows(spark: SparkSession, root: str, ansi: str) -> None:
    b.publish(root, "orders", ["eu.new"], properties={"color": "red", "weight": 5})  # seq 0
    b.publish(root, "orders", ["eu.new"], properties={"color": "blue", "weight": 12})  # 1
    b.publish(root, "orders", ["us.paid"], properties={"color": "red", "weight": 20})  # 2
    b.publish(root, "orders", ["x"])  # 3: no properties: every comparison is unknown
    b.publish(root, "orders", ["eu.old"], properties={"color": "it's", "weight": "heavy"})  # 4
    red, heavy_eu, quoted, unknown_only, everything, broken = b.register(
        root,
        b.subscription("orders", name="red", selector="color = 'red'"),
        b.subscription("orders", name="heavy-eu", binding="eu.#", selector="weight > 10 OR JMSType LIKE '%.old'"),
        b.subscription("orders", name="quoted", selector="color = 'it''s' AND JMSPriority = 4"),
        b.subscription("orders", name="not-red", selector="NOT color = 'red'"),
        b.subscription("orders", name="everything", selector="  -- blank: no selector"),
        b.subscription("orders", name="broken", selector="color = "),  # only a damaged catalog has this
    )
    before = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", ansi)
    sink = FanoutSink(root)
    try:
        plan = sink.plan()
        assert [s.record.identity.name for s in plan.skipped] == ["broken"]
        written = sink.route_batch(source_frame(spark, root), 0)
    finally:
        sink.close()
        spark.conf.set("spark.sql.ansi.enabled", before)

    assert len(written) == 5
    assert b.routed_seqs(root, red) == [0, 2]
    # weight 12 > 10 on eu.new; 'heavy' > 10 is unknown, but JMSType (the subject) ends in .old.
    assert b.routed_seqs(root, heavy_eu) == [1, 4]
    assert b.routed_seqs(root, quoted) == [4]
    # NOT keeps unknown unknown: the message without a color is not routed.
    assert b.routed_seqs(root, unknown_only) == [1, 4]
    assert b.routed_seqs(root, everything) == [0, 1, 2, 3, 4]
    row = b.routed(root, red)[1]
    assert (row["seq"], row["routing_key"], row["subject"]) == (2, "us.paid", "us.paid")
    assert not any(t.endswith(broken.table) for t in written)
