"""The fan-out SparkSession: jobs/spark-defaults.conf applied, data source registered."""

from __future__ import annotations

import os
from pathlib import Path

import pyspark
import pytest
from pyspark.sql import SparkSession

from jobs import jvm_helpers
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


def test_local_files_get_their_permissions_without_a_child_process(spark: SparkSession, tmp_path: Path) -> None:
    # jobs/jvm_helpers.py: bootstrap.py builds sharedsub's JVM classes, and a local session makes
    # file:'s file system the one that sets permissions through java.nio and writes no checksum
    # files. Hadoop's own runs a chmod process per created file (four per micro-batch of the
    # fan-out's checkpoint), each with a thread of the JVM reading its output: the JVM's count of
    # started threads shows them.
    jvm = spark._jvm  # type: ignore[attr-defined]
    conf = spark._jsparkSession.sessionState().newHadoopConf()  # type: ignore[attr-defined]
    # A new instance: Hadoop caches file systems per JVM, and this JVM may have made its file:
    # one for an earlier session of the test run (the cluster tier's, whose master gets no
    # file-system setting but puts the jar on the classpath all the same).
    fs = jvm.org.apache.hadoop.fs.FileSystem.newInstance(jvm.java.net.URI(tmp_path.as_uri()), conf)
    assert fs.getClass().getName() == jvm_helpers.LOCAL_FS_CLASS
    threads = jvm.java.lang.management.ManagementFactory.getThreadMXBean()
    files = 20
    before = threads.getTotalStartedThreadCount()
    for n in range(files):  # with a checksum file each: 40 chmod processes the Hadoop way
        fs.create(jvm.org.apache.hadoop.fs.Path((tmp_path / f"f{n}").as_uri()), True).close()
    assert threads.getTotalStartedThreadCount() - before < files  # a Spark thread or two may start meanwhile
    created = tmp_path / "f0"
    assert created.stat().st_mode & 0o7777 == 0o644  # Hadoop's default 0666 less umask 022
    assert not (tmp_path / ".f0.crc").exists()  # no checksum file: half the files
    assert jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf) is not None  # still a LocalFileSystem (Hadoop casts)
    # A file Hadoop's own file system wrote (with a checksum file), written over here, loses
    # its stale checksum file: Hadoop's reads it back unverified, not as corrupt.
    hadoops = jvm.org.apache.hadoop.fs.LocalFileSystem()
    hadoops.initialize(jvm.java.net.URI(tmp_path.as_uri()), conf)
    both = jvm.org.apache.hadoop.fs.Path((tmp_path / "both").as_uri())
    out = hadoops.create(both, True)
    out.write(b"old contents")
    out.close()
    assert (tmp_path / ".both.crc").exists()
    out = fs.create(both, True)
    out.write(b"new")
    out.close()
    assert not (tmp_path / ".both.crc").exists()
    stream = hadoops.open(both)
    assert bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream)) == b"new"
    stream.close()
    private = jvm.org.apache.hadoop.fs.permission.FsPermission.createImmutable(0o600)
    fs.setPermission(jvm.org.apache.hadoop.fs.Path(created.as_uri()), private)
    assert created.stat().st_mode & 0o7777 == 0o600
    # Bits java.nio cannot set are left to Hadoop's way: still set, by a chmod process (which
    # the thread count sees, so the check above could fail).
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    before = threads.getTotalStartedThreadCount()
    mode = jvm.org.apache.hadoop.fs.permission.FsPermission.createImmutable(0o1777)
    fs.setPermission(jvm.org.apache.hadoop.fs.Path(sticky.as_uri()), mode)
    assert sticky.stat().st_mode & 0o7777 == 0o1777
    assert threads.getTotalStartedThreadCount() > before


def test_spark_conf_uses_the_jvm_helpers_file_system_on_local_masters_only() -> None:
    local = spark_conf(make_settings("d", spark_master="local[2]"))
    assert local[jvm_helpers.LOCAL_FS_KEY] == jvm_helpers.LOCAL_FS_CLASS
    assert local["spark.driver.extraClassPath"].split(os.pathsep)[-1].endswith(".jar")
    for master in ("local-cluster[2,1,768]", "spark://h:7077"):  # executors in other JVMs lack the jar
        cluster = spark_conf(make_settings("d", spark_master=master))
        assert jvm_helpers.LOCAL_FS_KEY not in cluster
        assert cluster["spark.driver.extraClassPath"].split(os.pathsep)[-1].endswith(".jar")


def test_jvm_helpers_can_be_switched_off() -> None:
    pyspark_dir = Path(pyspark.__file__).parent
    assert jvm_helpers.spark_conf("local[2]", pyspark_dir, {}) != {}
    assert jvm_helpers.spark_conf("local[2]", pyspark_dir, {jvm_helpers.ENV: "off"}) == {}


def test_changed_sources_name_another_jar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A jar built from older sources is never used: the jar's name carries the sources' digest.
    hadoop = jvm_helpers.hadoop_api_jar(Path(pyspark.__file__).parent)
    assert hadoop is not None
    built = jvm_helpers.jar_path(hadoop.name)
    copy = tmp_path / "jvm"
    copy.mkdir()
    for source in jvm_helpers.sources():
        target = copy / source.relative_to(jvm_helpers.SOURCES)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes() + b"\n// changed\n")
    monkeypatch.setattr(jvm_helpers, "SOURCES", copy)
    assert jvm_helpers.jar_path(hadoop.name) != built
