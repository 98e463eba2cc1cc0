"""Spark reads a data dir on a real S3 server (versitygw) over ``s3a://`` (issue 28, item 8).

The tables are written by the service's own code through delta-rs on ``s3://`` (the front end's
group committer for topics, subscriptions and acknowledgements) and routed by the fan-out over
Delta's own streaming source, which reads the topics over ``s3a://``; then Spark reads every
version with ``format("delta")``, SQL, time travel, the views of jobs.spark_tables and the
backlog query, compared with delta-rs's reads. The tier's one session is used: S3A's jars
joined it at start (bootstrap.py fetched them), and the bucket's settings are set on it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from jobs import s3a_jars
from jobs.s3a_settings import is_secret, spark_path
from jobs.session import s3a_enabled, use_object_storage
from jobs.spark_tables import backlog_sql, register_tables, table_ref
from sharedsub.core import layout
from sharedsub.core.ownership.members import fence_token
from sharedsub.runtime.commit_requests import Ack
from sharedsub.storage import schemas
from sharedsub.storage.delta import blind_append
from sharedsub.storage.delta.appender import DeltaAppender
from sharedsub.storage.delta.commit_log import latest_version
from sharedsub.storage.delta.table_reads import read_table
from sharedsub.storage.delta.tables import log_names
from sharedsub.storage.topics import create_topic
from tests import builders as b
from tests.s3_server import SECRET_KEY, S3Server
from tests.spark.conftest import make_settings, run_available_now
from tests.spark.test_delta_connector import _commit, _deltars_seqs, _publish, _spark_seqs, _subscribe

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def s3a_spark(spark: SparkSession) -> SparkSession:
    """The shared session; it has S3A, since bootstrap.py test fetched its jars."""
    assert s3a_enabled(spark), (
        f"the Spark session has no S3A: its jars are not in {s3a_jars.S3A.directory()} "
        "(python3 bootstrap.py setup --object-storage)"
    )
    return spark


def test_spark_reads_tables_on_s3_over_s3a_with_sql_and_time_travel(
    s3a_spark: SparkSession, s3_server: S3Server, s3_env: dict[str, str], tmp_path: Path
) -> None:
    spark, root = s3a_spark, s3_server.url("lake")
    made = use_object_storage(spark, root, None, os.environ)
    bucket = root[len("s3://") :].split("/")[0]
    assert f"fs.s3a.bucket.{bucket}.endpoint" in made and any(is_secret(k) for k in made)
    assert SECRET_KEY not in " ".join(made)  # names only

    create_topic(root, "orders")
    billing = _subscribe(root, b.subscription("orders", name="billing", start_seq=0))
    for batch in range(2):  # two group commits of four messages: topic versions 1 and 2
        _commit(root, *_publish("orders", 4, batch * 4))
    # Routed by the fan-out over Delta's streaming source, which reads the topic over s3a://
    # (its Spark checkpoint stays local: S3 has no atomic rename).
    run_available_now(spark, make_settings(root, source="delta"), checkpoint=str(tmp_path / "checkpoint"))
    assert b.routed_seqs(root, billing) == list(range(8))
    acks = layout.ack_table_rel(billing.key, billing.generation)
    _commit(root, Ack(acks, [0, 1, 2], "accepted", "c1"), Ack(acks, [3], "failed", "c1"))

    topic, sub = layout.topic_table(root, "orders"), layout.join(root, billing.table)
    assert topic.startswith("s3://") and spark_path(topic).startswith("s3a://")
    for table in (topic, sub):
        for version in range(latest_version(table) + 1):
            assert _spark_seqs(spark, spark_path(table), version) == _deltars_seqs(table, version), (table, version)
    assert _spark_seqs(spark, spark_path(topic)) == list(range(8))
    travel = spark.sql(f"SELECT seq FROM {table_ref(topic)} VERSION AS OF 1 ORDER BY seq").collect()
    assert [r.seq for r in travel] == [0, 1, 2, 3] == _deltars_seqs(topic, 1)

    # Whole rows: the exact message bytes delta-rs reads.
    want = {r["seq"]: r["message"] for r in read_table(topic).to_pylist()}
    assert {r.seq: bytes(r.message) for r in spark.read.format("delta").load(spark_path(topic)).collect()} == want

    views = register_tables(spark, root)
    assert views["topic_orders"] == spark_path(topic) and views["sub_container_1_billing"] == spark_path(sub)
    assert all(path.startswith("s3a://") for path in views.values())
    assert spark.sql("SELECT count(*) AS n FROM sub_container_1_billing").first().n == 8
    assert [r.seq for r in spark.sql(backlog_sql(root, billing)).collect()] == [3, 4, 5, 6, 7]


def test_spark_reads_a_bucket_table_through_the_checkpoints_its_writer_made(
    s3a_spark: SparkSession, s3_server: S3Server, s3_env: dict[str, str]
) -> None:
    """The writer's checkpoints (sharedsub.storage.delta.object_checkpoint: the first from the
    log entries it holds, the next from the first) are read by Spark's Delta reader as delta-rs's."""
    spark, root = s3a_spark, s3_server.url("checkpoints")
    use_object_storage(spark, root, None, os.environ)
    interval = blind_append.CHECKPOINT_INTERVAL
    topic = create_topic(root, "ticks")
    writer = DeltaAppender(topic, schemas.TOPIC, epoch=fence_token(1, 1))
    for seq in range(2 * interval + 1):
        cols = {"seq": [seq], "message": [b"m"]}
        writer.append(pa.table({f.name: pa.array(cols.get(f.name, [None]), f.type) for f in schemas.TOPIC}))
    writer.finish(60)
    names = {Path(n).name for n in log_names(topic)}
    assert {f"{interval:020d}.checkpoint.parquet", f"{2 * interval:020d}.checkpoint.parquet"} <= names
    for version in (interval + 1, 2 * interval + 1):
        assert _spark_seqs(spark, spark_path(topic), version) == _deltars_seqs(topic, version) == list(range(version)), version
