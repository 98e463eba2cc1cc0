"""``[fanout] spark_conf`` (sharedsub/core/config.py) and the Spark settings the fan-out child builds
from it (jobs/session.spark_conf), and when S3A's jars join the class path (jobs/session.wants_s3a)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pyspark
import pytest

from jobs import delta_jars, jvm_archive, s3a_jars
from jobs.fanout import DRIVER_CONF, DRIVER_JAVA_OPTIONS
from jobs.session import spark_conf, wants_s3a
from sharedsub.core.config import Settings, load_settings, parse_settings
from sharedsub.core.errors import ConfigError
from sharedsub.runtime.fanout_process import FanoutProcess

LOCAL_CLUSTER = """
[fanout]
spark_master = "local-cluster[2,1,768]"
spark_conf = { "spark.executor.memory" = "512m" }
"""


def settings(spark_conf: object = None, data_dir: str = "/var/lib/ss", **fanout: object) -> Settings:
    body = dict(fanout, **({"spark_conf": spark_conf} if spark_conf is not None else {}))
    return parse_settings({"storage": {"data_dir": data_dir}, "fanout": body}, environ={})


def test_spark_conf_is_empty_by_default() -> None:
    assert settings().fanout.spark_conf == {}


def test_a_table_of_spark_settings_is_kept_as_strings_and_not_shown() -> None:
    conf = settings({"spark.executor.memory": "512m", "spark.executor.cores": 1, "spark.eventLog.enabled": True})
    assert conf.fanout.spark_conf == {
        "spark.executor.memory": "512m",
        "spark.executor.cores": "1",
        "spark.eventLog.enabled": "true",
    }
    assert "spark_conf" not in repr(conf.fanout)  # may hold secrets, as [storage] options


def test_the_documented_local_cluster_example_parses() -> None:
    fanout = parse_settings(tomllib.loads(LOCAL_CLUSTER), environ={}).fanout
    assert fanout.spark_master == "local-cluster[2,1,768]" and fanout.spark_conf == {"spark.executor.memory": "512m"}


def test_spark_conf_from_the_environment() -> None:
    env = {"SHAREDSUB_FANOUT_SPARK_CONF": "spark.executor.memory=512m, spark.driver.extraJavaOptions=-Da=b"}
    assert parse_settings({}, env).fanout.spark_conf == {
        "spark.executor.memory": "512m",
        "spark.driver.extraJavaOptions": "-Da=b",
    }


@pytest.mark.parametrize(
    ("conf", "key", "why"),
    [
        ({"spark.master": "local[4]"}, "fanout.spark_conf.spark.master", "[fanout] spark_master"),
        ({"spark.sql.extensions": "x"}, "fanout.spark_conf.spark.sql.extensions", "Delta connector"),
        ({"spark.sql.catalog.spark_catalog": "x"}, "fanout.spark_conf.spark.sql.catalog.spark_catalog", "Delta connector"),
        ({"executor.memory": "512m"}, "fanout.spark_conf.executor.memory", "keys start with 'spark.'"),
        ({"spark.": "x"}, "fanout.spark_conf.spark.", "keys start with 'spark.'"),
        # [fanout.spark_conf] with an unquoted dotted key is a nested table in TOML
        ({"spark": {"executor": {"memory": "512m"}}}, "fanout.spark_conf.spark", '"spark.executor.memory"'),
        ("spark.executor.memory", "fanout.spark_conf", "key=value pairs"),
    ],
)
def test_refused_spark_settings_name_the_key(conf: object, key: str, why: str) -> None:
    with pytest.raises(ConfigError) as raised:
        settings(conf)
    assert raised.value.key == key and why in str(raised.value)


@pytest.fixture
def no_jars(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Neither jar set fetched (as in a fresh checkout), and no driver class archive made yet."""
    monkeypatch.setattr(delta_jars, "jars", list)
    monkeypatch.setattr(s3a_jars, "jars", list)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # where jobs/jvm_archive looks


@pytest.fixture
def both_jar_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Delta connector's and S3A's jars fetched (paths only: nothing is opened)."""
    monkeypatch.setattr(delta_jars, "jars", lambda: ["/j/delta-spark.jar", "/j/delta-storage.jar"])
    monkeypatch.setattr(s3a_jars, "jars", lambda: ["/j/hadoop-aws.jar", "/j/bundle.jar", "/j/aa.jar"])


@pytest.mark.usefixtures("no_jars")
def test_the_child_s_session_gets_the_users_settings_over_the_defaults_file_and_the_service_s(tmp_path: Path) -> None:
    config = tmp_path / "sharedsub.toml"
    config.write_text(LOCAL_CLUSTER.replace("}", ', "spark.sql.shuffle.partitions" = "4", '
                                            '"spark.driver.extraJavaOptions" = "-XX:+UseG1GC" }'))  # fmt: skip
    # What serve hands the child: its --config (and its environment), which the child loads.
    command = FanoutProcess("/var/lib/ss", config=str(config)).command()
    assert command[command.index("--config") + 1] == str(config)
    child = load_settings(str(config), {}, {"storage.data_dir": "/var/lib/ss"})
    conf = spark_conf(child, extra=DRIVER_CONF)  # as jobs/fanout.py builds its session
    assert conf["spark.master"] == "local-cluster[2,1,768]"
    assert conf["spark.executor.memory"] == "512m"
    assert conf["spark.sql.shuffle.partitions"] == "4"  # jobs/spark-defaults.conf says 2
    assert conf["spark.driver.extraJavaOptions"] == f"{DRIVER_JAVA_OPTIONS} -XX:+UseG1GC"  # added after the service's
    assert conf["spark.ui.enabled"] == "false"  # the rest of the defaults file stays


@pytest.mark.usefixtures("no_jars")
def test_the_driver_class_archive_follows_the_users_java_options_once_setup_made_it(tmp_path: Path) -> None:
    user = settings({"spark.driver.extraJavaOptions": "-XX:+UseG1GC"})
    before = spark_conf(user, extra=DRIVER_CONF)
    assert "SharedArchiveFile" not in before["spark.driver.extraJavaOptions"]  # not made yet
    archive = jvm_archive.archive_path(
        Path(pyspark.__file__).parent, before.get("spark.driver.extraClassPath", ""), os.environ
    )
    assert archive is not None and archive.is_relative_to(tmp_path / "cache")
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"made by setup")
    after = spark_conf(user, extra=DRIVER_CONF)["spark.driver.extraJavaOptions"]
    assert after == f"{DRIVER_JAVA_OPTIONS} -XX:+UseG1GC -XX:SharedArchiveFile={archive} -Xlog:cds*=off"


@pytest.mark.usefixtures("both_jar_sets")
def test_users_jars_and_class_path_are_added_to_the_service_s() -> None:
    conf = spark_conf(settings({"spark.jars": "/mine.jar", "spark.driver.extraClassPath": "/mine"}, data_dir="s3://lake/ss"))
    assert conf["spark.jars"] == "/j/delta-spark.jar,/j/delta-storage.jar,/mine.jar"
    assert conf["spark.driver.extraClassPath"].startswith("/j/hadoop-aws.jar:/j/bundle.jar:/j/aa.jar")
    assert conf["spark.driver.extraClassPath"].endswith(":/mine")


@pytest.mark.parametrize(
    ("data_dir", "user", "asked", "wanted"),
    [
        ("/var/lib/ss", {}, False, False),
        ("file:///var/lib/ss", {}, False, False),
        ("/var/lib/ss", {"spark.executor.memory": "512m"}, False, False),
        ("s3://lake/ss", {}, False, True),
        ("/var/lib/ss", {}, True, True),
        ("/var/lib/ss", {"spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:7070"}, False, True),
    ],
)
def test_s3a_is_wanted_for_a_bucket_or_when_asked(data_dir: str, user: dict[str, str], asked: bool, wanted: bool) -> None:
    assert wants_s3a(settings(user, data_dir=data_dir), asked=asked) is wanted


@pytest.mark.usefixtures("both_jar_sets")
def test_s3a_jars_stay_off_the_class_path_of_a_local_data_dir() -> None:
    local = spark_conf(settings(data_dir="/var/lib/ss"))
    on_s3 = spark_conf(settings(data_dir="s3://lake/ss"))
    asked = spark_conf(settings(data_dir="/var/lib/ss"), s3a=True)
    assert "bundle.jar" not in local.get("spark.driver.extraClassPath", "")
    assert "bundle.jar" not in local["spark.jars"]  # the Delta connector's only
    for conf in (on_s3, asked):
        assert "/j/bundle.jar" in conf["spark.driver.extraClassPath"].split(":")
