"""The fan-out SparkSession: jobs/spark-defaults.conf applied, data source registered."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.session import read_spark_defaults, spark_conf
from tests.spark.conftest import make_settings

pytestmark = pytest.mark.spark


def test_read_spark_defaults_skips_comments_and_splits_on_whitespace(tmp_path: Path) -> None:
    path = tmp_path / "spark-defaults.conf"
    path.write_text("# comment\n\nspark.a   1\nspark.b\tx y\n  spark.c true  \nspark.empty\n")
    assert read_spark_defaults(path) == {"spark.a": "1", "spark.b": "x y", "spark.c": "true", "spark.empty": ""}


def test_spark_conf_local_master_binds_loopback() -> None:
    local = spark_conf(make_settings("d", spark_master="local[1]"), extra={"spark.x": "1"})
    assert local["spark.master"] == "local[1]" and local["spark.driver.bindAddress"] == "127.0.0.1"
    assert local["spark.ui.enabled"] == "false" and local["spark.x"] == "1"
    cluster = spark_conf(make_settings("d", spark_master="spark://h:7077"))
    assert "spark.driver.bindAddress" not in cluster


def test_session_has_the_defaults_and_the_source(spark: SparkSession) -> None:
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.sparkContext.getConf().get("spark.ui.enabled") == "false"
    with pytest.raises(Exception, match="data_dir"):
        spark.readStream.format("sharedsub_topics").load()


def test_streaming_checkpoints_are_written_through_the_file_system_api(spark: SparkSession, tmp_path: Path) -> None:
    # The FileContext manager (Spark's default) runs chmod and readlink processes per checkpoint
    # file on a local file system (jobs/spark-defaults.conf, bench/checkpoint_files.py). Resolved
    # as a query does: from the session's Hadoop configuration, which carries its SQL settings.
    jvm = spark._jvm  # type: ignore[attr-defined]
    conf = spark._jsparkSession.sessionState().newHadoopConf()  # type: ignore[attr-defined]
    manager = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager.create(
        jvm.org.apache.hadoop.fs.Path(tmp_path.as_uri()), conf,
    )
    assert manager.getClass().getSimpleName() == "FileSystemBasedCheckpointFileManager"


def test_an_idle_trigger_waits_the_configured_polling_delay(spark: SparkSession) -> None:
    # Read back the way a streaming query reads it (SQLConf.streamingPollingDelay): a misspelt
    # key in jobs/spark-defaults.conf would be ignored silently and leave Spark's 10 ms.
    sql_conf = spark._jsparkSession.sessionState().conf()  # type: ignore[attr-defined]
    assert sql_conf.streamingPollingDelay() == 50
