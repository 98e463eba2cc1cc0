"""The Delta Lake Spark connector on sharedsub's tables (real local Spark, real tables).

Topics are written by the front end's group committer (sharedsub.runtime.committer, proton messages),
subscriptions and acknowledgements by the committer too, routing by the fan-out job, and then
maintenance (acknowledged-row deletes, compaction, checkpoints, topic retention) rewrites them.
Spark reads every version with ``format("delta")``, SQL and time travel, and the reads are
compared with delta-rs's. The fan-out's two sources (delta-rs and Delta's own streaming source)
route the same topics to the same rows, and the Delta one exactly once across restarts.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from typing import Any

import proton
import pytest
from pyspark.sql import SparkSession

from jobs import delta_jars
from jobs.fanout import build_fanout_query
from jobs.fanout_sink import FanoutSink
from jobs.session import delta_enabled, spark_conf
from jobs.sources.delta_streaming import routed_version
from jobs.spark_tables import backlog_sql, register_tables, table_ref, view_name
from sharedsub.core import layout
from sharedsub.core.model import SubscriptionRecord
from sharedsub.runtime import maintenance
from sharedsub.runtime.commit_requests import Ack, Publish, Result, SaveSubscription
from sharedsub.runtime.committer import Committer
from sharedsub.runtime.payloads import PayloadCache
from sharedsub.storage import retention as stored
from sharedsub.storage.commits.commit_store import DeltaStore
from sharedsub.storage.delta.commit_log import latest_version
from sharedsub.storage.delta.table_reads import read_table
from sharedsub.storage.topics import create_topic
from tests import builders as b
from tests.builders import maintenance_policy, publish_request
from tests.spark.conftest import make_settings, run_available_now, wait_until
from tests.storage.test_committer import Collector

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def dspark(spark: SparkSession) -> SparkSession:
    """The shared session; it has the connector, since bootstrap.py fetched it."""
    assert delta_enabled(spark), f"no Delta connector jars in {delta_jars.JARS_DIR} (run python3 bootstrap.py setup)"
    return spark


# --------------------------------------------------------------------------- writing, as the front end does


def _commit(root: str, *requests: Any) -> list[Result]:
    """Run ``requests`` through a real group committer (one group commit per kind) and return
    its results; fails on any error."""
    done = Collector()
    committer = Committer(DeltaStore(root), cache=PayloadCache(1 << 20), on_done=done)
    for request in requests:
        committer.submit(request)
    committer.start()
    committer.stop()
    results = done.wait(len(requests))
    assert all(r.error is None for r in results), [r.error for r in results]
    return results


def _publish(topic: str, n: int, first: int, publisher: str = "shop") -> list[Publish]:
    out = []
    for i in range(first, first + n):
        region = "eu" if i % 2 == 0 else "us"
        msg = proton.Message(body=f"order {i}", id=f"order-{i}", subject="order", properties={"region": region, "n": i})
        out.append(publish_request(topic, msg, i, key=f"{region}.new", publisher=publisher))
    return out


def _subscribe(root: str, record: SubscriptionRecord) -> SubscriptionRecord:
    (result,) = _commit(root, SaveSubscription(record, assign_start=True, token=None))
    saved = result.value
    assert isinstance(saved, SubscriptionRecord)
    return saved


def _versions(table: str) -> range:
    return range(latest_version(table) + 1)


def _spark_seqs(spark: SparkSession, table: str, version: int | None = None) -> list[int]:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return sorted(r.seq for r in reader.load(table).select("seq").collect())


def _deltars_seqs(table: str, version: int | None = None) -> list[int]:
    data = read_table(table, ["seq"], version=version)
    return sorted(data.column("seq").to_pylist()) if data is not None else []


# --------------------------------------------------------------------------- tests


def test_the_connector_is_configured_only_when_its_jars_are_there(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    settings = make_settings(str(tmp_path))
    monkeypatch.setenv(delta_jars.ENV, "off")
    off = spark_conf(settings)
    assert "spark.jars" not in off and "spark.sql.extensions" not in off
    monkeypatch.setenv(delta_jars.ENV, str(tmp_path))  # an empty directory: jars missing
    assert "spark.sql.extensions" not in spark_conf(settings)
    monkeypatch.delenv(delta_jars.ENV)
    on = spark_conf(settings)
    assert on["spark.sql.extensions"] == delta_jars.EXTENSION
    assert on["spark.sql.catalog.spark_catalog"] == delta_jars.CATALOG
    assert [p.rsplit("/", 1)[1] for p in on["spark.jars"].split(",")] == [
        "delta-spark_4.2_2.13-4.4.0.jar",
        "delta-storage-4.4.0.jar",
    ]


def test_spark_reads_topic_and_subscription_tables_at_every_version_as_delta_rs_does(
    dspark: SparkSession, root: str
) -> None:
    spark = dspark
    create_topic(root, "orders")
    billing = _subscribe(root, b.subscription("orders", name="billing", start_seq=0))
    for batch in range(3):  # three group commits of four messages
        _commit(root, *_publish("orders", 4, batch * 4))
        run_available_now(spark, make_settings(root))
    acks = layout.ack_table_rel(billing.key, billing.generation)
    _commit(root, Ack(acks, list(range(6)), "accepted", "c1"), Ack(acks, [7], "failed", "c1"))
    topic = layout.topic_table(root, "orders")
    sub = layout.join(root, billing.table)
    before_maintenance = latest_version(sub)
    report = maintenance.run_once(
        root, maintenance_policy(history_retention_hours=168, compact_min_files=2, min_acked_rows=1, topic_retention_hours=0)
    )
    assert report.errors == 0, report
    assert report.acked_rows_deleted == 6 and report.files_compacted > 0, report
    for table in (topic, sub):
        assert latest_version(table) > 3
        # maintenance wrote a checkpoint: the connector reads it instead of the whole log
        assert any(n.endswith(".checkpoint.parquet") for n in os.listdir(f"{table}/_delta_log"))

    # Every version, read by delta-rs and by the DataFrame reader; some by SQL VERSION AS OF.
    for table in (topic, sub):
        for version in _versions(table):
            assert _spark_seqs(spark, table, version) == _deltars_seqs(table, version), (table, version)
    for table, version in ((topic, 1), (sub, before_maintenance), (sub, latest_version(sub))):
        sql = spark.sql(f"SELECT seq FROM {table_ref(table)} VERSION AS OF {version} ORDER BY seq")
        assert [r.seq for r in sql.collect()] == _deltars_seqs(table, version), (table, version)
    assert _spark_seqs(spark, sub) == list(range(6, 12)) == _deltars_seqs(sub)
    assert _spark_seqs(spark, sub, before_maintenance) == list(range(12))

    # TIMESTAMP AS OF a version's commit time reads that version (DESCRIBE HISTORY gives it).
    history = {r.version: r.timestamp for r in spark.sql(f"DESCRIBE HISTORY {table_ref(sub)}").collect()}
    stamp = history[before_maintenance].strftime("%Y-%m-%d %H:%M:%S.%f")
    at = spark.sql(f"SELECT seq FROM {table_ref(sub)} TIMESTAMP AS OF '{stamp}'")
    assert sorted(r.seq for r in at.collect()) == _deltars_seqs(sub, before_maintenance)
    at_reader = spark.read.format("delta").option("timestampAsOf", stamp).load(sub)
    assert sorted(r.seq for r in at_reader.select("seq").collect()) == _deltars_seqs(sub, before_maintenance)

    # Whole rows: the topic's typed columns, property map and exact message bytes agree.
    expected_rows = {r["seq"]: r for r in read_table(topic).to_pylist()}
    for row in spark.read.format("delta").load(topic).collect():
        want = expected_rows[row.seq]
        assert bytes(row.message) == want["message"] and row.message_id == want["message_id"]
        assert row.routing_key == want["routing_key"] and row.published_at.replace(tzinfo=dt.UTC) == want["published_at"]
        assert {k: v.asDict() for k, v in row.application_properties.items()} == dict(want["application_properties"])

    # The views and the backlog query: 6..11 routed, 0..5 acknowledged (deleted), 7 only failed.
    views = register_tables(spark, root)
    assert views[view_name("topic_", "orders")] == topic
    assert views["sub_container_1_billing"] == sub and views["acks_container_1_billing"] == layout.join(root, acks)
    assert "sharedsub_catalog" in views
    assert spark.sql("SELECT count(*) AS n FROM sub_container_1_billing").first().n == 6
    keys = spark.sql("SELECT DISTINCT key FROM sharedsub_catalog WHERE state = 'active'").collect()
    assert [r.key for r in keys] == [billing.key]
    assert [r.seq for r in spark.sql(backlog_sql(root, billing)).collect()] == list(range(6, 12))
    _commit(root, Ack(acks, [6, 8], "accepted", "c1"))
    assert [r.seq for r in spark.sql(backlog_sql(root, billing)).collect()] == [7, 9, 10, 11]


def _routed_rows(root: str, record: SubscriptionRecord) -> list[dict[str, Any]]:
    """The rows of ``record``'s table in append order, without what differs between two runs."""
    return [{k: v for k, v in r.items() if k not in ("routed_at", "fanout_batch")} for r in b.routed(root, record)]


def _scenario(root: str) -> list[SubscriptionRecord]:
    """Two topics, four subscriptions (binding, selector, no-local, a late start)."""
    b.publish(root, "orders", ["eu.new", "us.new", "eu.paid.late", "eu"], publisher="shop", properties={"n": 1})
    b.publish(root, "audit", ["x", "y.z"], publisher="container-1")
    subs = b.register(
        root,
        b.subscription("orders", name="everything"),
        b.subscription("orders", binding="eu.#", name="eu-all"),
        b.subscription("orders", name="selected", selector="JMSType = 'us.new' OR n > 5"),
        b.subscription("audit", name="own", no_local=True, namespace="container-1"),
        b.subscription("orders", name="late", start_seq=4),
    )
    b.publish(root, "orders", ["eu.new", "us.x"], publisher="shop", properties={"n": 7})
    b.publish(root, "audit", ["x"], publisher="someone")
    return subs


def test_the_delta_streaming_source_routes_like_delta_rs_and_exactly_once_across_restarts(
    dspark: SparkSession, tmp_path: Any
) -> None:
    spark = dspark
    roots = {source: str(tmp_path / source) for source in ("deltars", "delta")}
    subs = {source: _scenario(root) for source, root in roots.items()}
    for source, root in roots.items():
        run_available_now(spark, make_settings(root, source=source, max_commits_per_batch=1))
    routed = {s: [_routed_rows(roots[s], r) for r in subs[s]] for s in roots}
    assert routed["delta"] == routed["deltars"]
    assert [len(rows) for rows in routed["delta"]] == [6, 4, 3, 1, 2]  # non-trivial: every rule routed something

    root, records = roots["delta"], subs["delta"]
    # Restart on the same checkpoints after more commits, one of them a topic retention delete
    # (a commit that only removes files: the Delta source skips it).
    orders = layout.topic_table(root, "orders")
    assert stored.remove_topic_rows(orders, 3) == 4  # the first commit's file, as retention removes
    b.publish(root, "orders", ["us.more"], publisher="shop", properties={"n": 9})
    run_available_now(spark, make_settings(root, source="delta"))
    assert b.routed_seqs(root, records[0]) == [0, 1, 2, 3, 4, 5, 6]
    assert b.routed_seqs(root, records[2]) == [1, 4, 5, 6]
    # The checkpoints are lost (or a replay re-reads everything): still every row once.
    shutil.rmtree(tmp_path / "delta" / "_checkpoints" / "fanout-delta")
    run_available_now(spark, make_settings(root, source="delta"))
    assert [b.routed_seqs(root, r) for r in records] == [[0, 1, 2, 3, 4, 5, 6], [0, 2, 3, 4], [1, 4, 5, 6], [2], [4, 5, 6]]


def test_delta_source_offsets_give_the_routed_version() -> None:
    assert routed_version({"sourceVersion": 1, "reservoirId": "x", "reservoirVersion": 5, "index": -1}) == 4
    assert routed_version('{"reservoirVersion": 0, "index": -1, "isStartingVersion": true}') == -1
    assert routed_version({"topics": {}}) is None
    # A new stream reads the snapshot at its start version file by file (here 3 files).
    starting = {"reservoirVersion": 7, "index": 1, "isStartingVersion": True}
    assert routed_version(starting, lambda v: 3) == 6
    assert routed_version({**starting, "index": 2}, lambda v: 3) == 7


def test_the_delta_source_picks_up_a_topic_created_while_the_job_runs(dspark: SparkSession, root: str) -> None:
    b.publish(root, "early", ["k"])
    settings = make_settings(root, source="delta", trigger_interval=0.2)
    sink = FanoutSink(root)
    query = build_fanout_query(dspark, settings, sink=sink)
    try:
        wait_until(lambda: query.lastProgress is not None, timeout=120, what="the first trigger")
        b.topic(root, "late")
        (sub,) = b.register(root, b.subscription("late", binding="x.*"))
        b.publish(root, "late", ["x.1", "y.1", "x.2"])  # version 1 of the new topic
        assert wait_until(lambda: b.routed_seqs(root, sub), timeout=120, what="rows routed from the new topic") == [0, 2]
        assert query.isActive
        # The job's main loop hands the progress to the sink: routed versions in the stats file.
        # (a tick while a batch runs does nothing: the next one records them)
        def recorded() -> bool:
            sink.tick(query.lastProgress)
            return sink.stats.routed_versions == {"early": 1, "late": 1}

        wait_until(recorded, timeout=60, what="both topics' routed versions in the statistics")
    finally:
        query.stop()
        query.awaitTermination()
        sink.close()
