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

``[fanout] spark_conf`` (the user's Spark settings) comes last, as spark-submit's ``--conf``
would: over the defaults file and the service's own settings, except for the list-valued keys of
:data:`JOINED`, where it is added to the service's value (the service's jars and JVM flags stay).

Object storage: when ``bootstrap.py setup --object-storage`` fetched S3A's jars
(:mod:`jobs.s3a_jars`) they join the classpath for sessions that may read ``s3a://`` paths
(:func:`wants_s3a`: a data dir ``s3://BUCKET/...``, a caller that asks, or S3A settings in
``[fanout] spark_conf``), and a data dir ``s3://BUCKET/...`` gets S3A settings for its bucket
derived from the AWS variables and ``[storage] options`` (:func:`use_object_storage`,
:mod:`jobs.s3a_settings`), so Spark reads the tables at ``s3a://BUCKET/...``
(:func:`jobs.s3a_settings.spark_path`). They are set on the running session, so a session that
was already running (a notebook's, the test tier's) gets them too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import pyspark
from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from jobs import delta_jars, jvm_archive, jvm_helpers, s3a_jars, s3a_settings
from jobs.sources.deltars_topics import TopicsDataSource
from sharedsub.core.config import Settings

SPARK_DEFAULTS = Path(__file__).resolve().parent / "spark-defaults.conf"
APP_NAME = "sharedsub-fanout"
S3A_CLASS = "org.apache.hadoop.fs.s3a.S3AFileSystem"

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


# Spark settings whose value is a list the service fills (its jars, its class path, its JVM
# flags): a [fanout] spark_conf value is added after the service's, with this separator, so the
# Delta connector and sharedsub's own classes stay (a JVM flag given twice takes the last one).
JOINED = {"spark.jars": ",", "spark.driver.extraClassPath": os.pathsep, "spark.driver.extraJavaOptions": " "}
S3A_KEYS = "spark.hadoop.fs.s3a."  # a [fanout] spark_conf key with this prefix asks for S3A's jars


def spark_conf(
    settings: Settings,
    *,
    defaults_path: str | os.PathLike[str] = SPARK_DEFAULTS,
    extra: Mapping[str, str] | None = None,
    s3a: bool = False,
) -> dict[str, str]:
    """The Spark configuration sharedsub wants: the defaults file, the master, the Delta
    connector's settings when its jars are there (with S3A's jars when those are there too and
    :func:`wants_s3a`), ``extra`` on top, and ``[fanout] spark_conf`` over all (:func:`with_user_conf`)."""
    conf = read_spark_defaults(defaults_path)
    conf["spark.master"] = settings.fanout.spark_master
    if settings.fanout.spark_master.startswith("local"):
        conf.update(_LOCAL_ONLY)
    delta = delta_jars.spark_conf(delta_jars.jars())
    conf.update(delta)
    # S3A alone is no use: Spark reads sharedsub's tables through the connector.
    if delta and wants_s3a(settings, asked=s3a):
        conf.update(s3a_classpath(conf, s3a_jars.jars()))
    helpers = jvm_helpers.spark_conf(conf["spark.master"], Path(pyspark.__file__).parent, os.environ)
    if helpers:  # sharedsub's own classes (jobs/jvm_helpers.py), local masters only
        classpath = helpers.pop("spark.driver.extraClassPath")
        conf["spark.driver.extraClassPath"] = os.pathsep.join(
            p for p in (conf.get("spark.driver.extraClassPath", ""), classpath) if p
        )
        conf.update(helpers)
    conf.update(extra or {})
    merged = with_user_conf(conf, settings.fanout.spark_conf)
    # The driver JVM's class archive (jobs/jvm_archive.py), made by setup for this class path.
    archive = jvm_archive.java_options(
        Path(pyspark.__file__).parent, merged.get("spark.driver.extraClassPath", ""), os.environ
    )
    if archive:
        merged["spark.driver.extraJavaOptions"] = " ".join(
            o for o in (merged.get("spark.driver.extraJavaOptions", ""), archive) if o
        )
    return merged


def with_user_conf(conf: Mapping[str, str], user: Mapping[str, str]) -> dict[str, str]:
    """``conf`` with the user's settings ``user`` (``[fanout] spark_conf``, checked by
    sharedsub.core.config) over it; for a key of :data:`JOINED` the user's value follows ours."""
    merged = dict(conf)
    for key, value in user.items():
        sep = JOINED.get(key)
        merged[key] = sep.join(v for v in (conf.get(key, ""), value) if v) if sep else value
    return merged


def wants_s3a(settings: Settings, *, asked: bool = False) -> bool:
    """Whether S3A's jars (690 MB: hadoop-aws and the AWS SDK bundle) join the session's class
    path: only when Spark may read ``s3a://`` paths. Yes for a data dir ``s3://...``, when the
    caller ``asked`` (a session that reads buckets beside a local data dir: the Spark test tier,
    a notebook), or when ``[fanout] spark_conf`` configures S3A (a ``spark.hadoop.fs.s3a.*`` key).
    A local data dir's job reads nothing over S3A, and the jars only lengthen its start."""
    if asked or s3a_settings.bucket_of(settings.storage.data_dir) is not None:
        return True
    return any(key.startswith(S3A_KEYS) for key in settings.fanout.spark_conf)


def s3a_classpath(conf: Mapping[str, str], paths: list[str]) -> dict[str, str]:
    """The settings that put S3A's jars ``paths`` on the classpath of a session configured by
    ``conf``; {} for no jars.

    With a local master they go on the driver's own class path (``spark.driver.extraClassPath``,
    read when pyspark starts the JVM): ``spark.jars`` would make Spark copy every jar into each
    session's scratch directory for its executors, 690 MB of AWS SDK at every start. With any
    other master executors need them shipped: ``spark.jars``.
    """
    if not paths:
        return {}
    if conf.get("spark.master", "").startswith("local"):
        key, sep = "spark.driver.extraClassPath", os.pathsep
    else:
        key, sep = "spark.jars", ","
    return {key: sep.join([p for p in (conf.get(key, ""),) if p] + paths)}


def under_spark_submit() -> bool:
    """True when this Python was started by spark-submit (or a pyspark shell): a JVM is waiting."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(
    settings: Settings,
    *,
    app_name: str = APP_NAME,
    extra_conf: Mapping[str, str] | None = None,
    s3a: bool = False,
) -> SparkSession:
    """Get or create the SparkSession for the fan-out and register the topics data source.

    Under spark-submit, settings it already has (``--master``, ``--conf``, the cluster's
    spark-defaults.conf) win over ours; otherwise a local session is started with ours.
    ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON`` default to this interpreter so Python workers use
    the same environment (set them before the first session; a running JVM keeps its workers).
    ``s3a``: put S3A's jars on the class path even for a data dir that is not on S3
    (:func:`wants_s3a`); the first session of a process fixes its JVM's class path.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    wanted = spark_conf(settings, extra=extra_conf, s3a=s3a)
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
        for key in [*delta_keys, "spark.driver.extraClassPath", jvm_helpers.LOCAL_FS_KEY]:
            wanted.pop(key, None)
        if _driver_loads(delta_jars.EXTENSION):
            wanted.update({k: v for k, v in delta_keys.items() if k != "spark.jars" and k not in given})
    elif jvm_helpers.LOCAL_FS_KEY in wanted and SparkContext._jvm is not None:  # noqa: SLF001 (as _driver_loads)
        # This process started its JVM earlier (a session stopped since), with its classpath
        # then: name sharedsub's file system only if that JVM can load it.
        if not _driver_loads(jvm_helpers.LOCAL_FS_CLASS):
            wanted.pop(jvm_helpers.LOCAL_FS_KEY)
    builder = SparkSession.builder.appName(app_name)
    for key, value in wanted.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    quiet_loggers(spark)
    register_sources(spark)
    use_object_storage(spark, settings.storage.data_dir, settings.storage.options, os.environ)
    return spark


def use_object_storage(
    spark: SparkSession, location: str, options: Mapping[str, str] | None, environ: Mapping[str, str]
) -> list[str]:
    """Let ``spark`` read the bucket of ``location`` (``s3://``) as the service reaches it: S3A's
    per-bucket settings from the AWS variables in ``environ`` and ``options`` (``[storage]
    options``), set on the running session (Spark copies its SQL settings into the Hadoop
    configuration of every read). A setting the session was started with wins, for that bucket
    or all (``--conf spark.hadoop.fs.s3a.bucket.<bucket>.<key>`` or
    ``spark.hadoop.fs.s3a.<key>``). Returns the names of the settings made (never their values:
    some are secrets). A no-op for any other location.

    Settings reach a bucket's file system when Spark first opens it (Hadoop caches one per
    bucket for the JVM's life): call this before the first read of the bucket.
    """
    given = dict(spark.sparkContext.getConf().getAll())
    made = []
    for key, value in s3a_settings.hadoop_settings(location, options, environ).items():
        if f"spark.hadoop.{key}" in given or f"spark.hadoop.{s3a_settings.all_buckets(key)}" in given:
            continue
        spark.conf.set(key, value)
        made.append(key)
    return made


def s3a_enabled(spark: SparkSession) -> bool:
    """Whether ``spark``'s driver has S3A (``s3a://`` paths): its jars were on the classpath at start."""
    return _driver_loads(S3A_CLASS)


# Spark loggers whose warnings say nothing an operator can act on, at a rate that buries the
# service's own lines: "Current batch is falling behind" at every micro-batch longer than the
# trigger interval (on object storage most of them: a commit there takes 30 ms and more).
QUIET_LOGGERS = ("org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor",)


def quiet_loggers(spark: SparkSession) -> None:
    """Raise :data:`QUIET_LOGGERS` to ERROR in ``spark``'s driver JVM (log4j 2, as pyspark 4.2 ships)."""
    jvm = spark.sparkContext._jvm  # noqa: SLF001 (pyspark 4.2: the gateway's JVM view; no public accessor)
    if jvm is None:
        return
    try:
        error = jvm.org.apache.logging.log4j.Level.ERROR
        for name in QUIET_LOGGERS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, error)
    except Exception:  # noqa: BLE001 (another logging back end under spark-submit: its warnings stay)
        return


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
