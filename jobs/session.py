"""The fan-out job's SparkSession: local by default, or whatever spark-submit provides.

``build_session(settings)`` is the one place a SparkSession is configured. It applies
jobs/spark-defaults.conf and ``[fanout] spark_master``, makes Python workers run this interpreter
(the venv: workers import pyarrow, deltalake and sharedsub; docs/feasibility.md gotcha 4) and registers
the ``sharedsub_topics`` data source.

When the Delta Lake Spark connector's jars are there (``bootstrap.py`` fetches them into .jars/,
:mod:`jobs.delta_jars`), the session gets them and Delta's SQL extension and catalog, so
``spark.read.format("delta")``, ``delta.`<path>``` in SQL, ``VERSION AS OF`` and the native Delta
streaming source work (:func:`delta_enabled`). Without them the session is what it was: the
fan-out reads through delta-rs and nothing else changes. Under spark-submit the driver's classpath
is fixed before this code runs, so the connector is only configured when spark-submit was given
its jars (``--jars`` or ``--packages``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from jobs import delta_jars
from jobs.sources.deltars_topics import TopicsDataSource
from sharedsub.core.config import Settings

SPARK_DEFAULTS = Path(__file__).resolve().parent / "spark-defaults.conf"
APP_NAME = "sharedsub-fanout"

# Only for local masters: bind to loopback so a laptop's odd hostname or VPN does not matter.
_LOCAL_ONLY = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def read_spark_defaults(path: str | os.PathLike[str] = SPARK_DEFAULTS) -> dict[str, str]:
    """``key value`` lines of a spark-defaults.conf file ('#' comments, blank lines skipped)."""
    conf: dict[str, str] = {}
    with open(path, encoding="utf-8") as fh:
        for raw in fh:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            key, value = (line.split(None, 1) + [""])[:2]
            conf[key] = value.strip()
    return conf


def spark_conf(
    settings: Settings,
    *,
    defaults_path: str | os.PathLike[str] = SPARK_DEFAULTS,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The Spark configuration sharedsub wants: the defaults file, the master, the Delta
    connector's settings when its jars are there, ``extra`` on top."""
    conf = read_spark_defaults(defaults_path)
    conf["spark.master"] = settings.fanout.spark_master
    if settings.fanout.spark_master.startswith("local"):
        conf.update(_LOCAL_ONLY)
    conf.update(delta_jars.spark_conf(delta_jars.jars()))
    conf.update(extra or {})
    return conf


def under_spark_submit() -> bool:
    """True when this Python was started by spark-submit (or a pyspark shell): a JVM is waiting."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(
    settings: Settings,
    *,
    app_name: str = APP_NAME,
    extra_conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Get or create the SparkSession for the fan-out and register the topics data source.

    Under spark-submit, settings it already has (``--master``, ``--conf``, the cluster's
    spark-defaults.conf) win over ours; otherwise a local session is started with ours.
    ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON`` default to this interpreter so Python workers use
    the same environment (set them before the first session; a running JVM keeps its workers).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    wanted = spark_conf(settings, extra=extra_conf)
    if under_spark_submit():
        # pyspark 4.2's private API (the pinned version): connects to spark-submit's JVM without
        # starting a context; no public call does that.
        SparkContext._ensure_initialized()  # noqa: SLF001
        given = dict(SparkConf().getAll())
        wanted = {k: v for k, v in wanted.items() if k not in given}
        if "spark.master" in given:  # a cluster master: loopback binding would break executors
            for key in _LOCAL_ONLY:
                wanted.pop(key, None)
        # The driver's classpath is spark-submit's: our jars cannot join it. Turn Delta on when
        # spark-submit brought the connector (--jars/--packages), off otherwise.
        delta_keys = delta_jars.spark_conf(["-"])
        for key in delta_keys:
            wanted.pop(key, None)
        if _driver_loads(delta_jars.EXTENSION):
            wanted.update({k: v for k, v in delta_keys.items() if k != "spark.jars" and k not in given})
    builder = SparkSession.builder.appName(app_name)
    for key, value in wanted.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register_sources(spark)
    return spark


def _driver_loads(class_name: str) -> bool:
    """Whether the running driver JVM (spark-submit's) can load ``class_name``."""
    jvm = SparkContext._jvm  # noqa: SLF001 (pyspark 4.2: the gateway's JVM view; no public accessor)
    assert jvm is not None
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(class_name, False, loader)
        return True
    except Exception:  # noqa: BLE001 (the class is absent from this JVM)
        return False


def delta_enabled(spark: SparkSession) -> bool:
    """Whether ``spark`` has the Delta connector configured (``format("delta")``, Delta SQL)."""
    extensions = spark.conf.get("spark.sql.extensions", "") or ""
    return delta_jars.EXTENSION in [e.strip() for e in extensions.split(",")]


def register_sources(spark: SparkSession) -> None:
    """Register sharedsub's Python data sources with ``spark`` (idempotent)."""
    spark.dataSource.register(TopicsDataSource)
