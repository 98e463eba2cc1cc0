"""sharedsub's tables in Spark SQL, through the Delta Lake Spark connector (data teams, notebooks).

    from jobs.session import build_session
    from jobs.spark_tables import backlog_sql, register_tables, table_ref
    spark = build_session(load_settings(None, os.environ, {}), app_name="analysis")
    views = register_tables(spark, DATA_DIR)        # {"topic_orders": ".../topics/orders", ...}
    spark.sql("SELECT routing_key, count(*) FROM topic_orders GROUP BY routing_key").show()
    spark.sql(f"SELECT count(*) FROM {table_ref(views['topic_orders'])} VERSION AS OF 3")  # time travel
    spark.sql(backlog_sql(DATA_DIR, record)).show()                         # a subscription's backlog

Every table is a plain Delta table, so ``spark.read.format("delta").load(path)`` and
``delta.`<path>``` in SQL work too, with ``versionAsOf``/``timestampAsOf`` and ``VERSION AS OF`` /
``TIMESTAMP AS OF``. Temporary views pin no version: a view over a path reads the table as it is
when each query runs; time travel goes through the path (``delta.`<path>` VERSION AS OF n``), as
Spark does not time-travel a view. Read only: sharedsub's writers (the front end, the fan-out,
maintenance) expect to be the only ones writing its tables.

Needs a session with the connector (jobs/session.py sets it up when ``bootstrap.py`` fetched its
jars); :class:`DeltaUnavailable` otherwise.

On a data dir ``s3://BUCKET/PREFIX`` the same works over ``s3a://`` (the paths in the views map
and every ``table_ref`` are Spark's ``s3a://`` ones, :func:`jobs.s3a_settings.spark_path`; the
session needs S3A's jars, ``python3 bootstrap.py setup --object-storage``, and build_session's
settings for the bucket).
"""

from __future__ import annotations

import re

from pyspark.sql import SparkSession

from jobs.s3a_settings import bucket_of, spark_path
from jobs.session import delta_enabled, s3a_enabled
from sharedsub.core import layout
from sharedsub.core.delivery.outcomes import AckOutcome
from sharedsub.core.model import SubscriptionRecord
from sharedsub.storage.catalog import load_catalog
from sharedsub.storage.delta.tables import table_exists
from sharedsub.storage.topics import list_topic_partitions


class DeltaUnavailable(RuntimeError):
    """The session cannot read the tables: it has no Delta Spark connector, or no S3A for a data
    dir on S3."""


def require_delta(spark: SparkSession) -> None:
    """Raise :class:`DeltaUnavailable` unless ``spark`` has the Delta connector configured."""
    if not delta_enabled(spark):
        raise DeltaUnavailable(
            "this SparkSession has no Delta Lake connector: run `python3 bootstrap.py setup` (it fetches the "
            "jars into .jars/) and build the session with jobs.session.build_session, or pass the connector "
            "to spark-submit (--packages io.delta:delta-spark_4.2_2.13:4.4.0)"
        )


def require_s3a(spark: SparkSession, location: str) -> None:
    """Raise :class:`DeltaUnavailable` when ``location`` is on S3 and ``spark`` has no S3A."""
    if bucket_of(location) is not None and not s3a_enabled(spark):
        raise DeltaUnavailable(
            f"{location} is on object storage and this SparkSession cannot read s3a:// paths: run "
            "`python3 bootstrap.py setup --object-storage` (it fetches hadoop-aws and the AWS SDK into .jars/) and "
            "start the session with jobs.session.build_session, or pass those jars to spark-submit (--jars)"
        )


def view_name(prefix: str, name: str) -> str:
    """A SQL identifier for a view: ``prefix`` + ``name`` with every other character than a
    letter, digit or '_' turned into '_' (``topic_`` + ``eu.orders`` → ``topic_eu_orders``)."""
    return prefix + re.sub(r"[^0-9A-Za-z_]", "_", name)


def table_ref(path: str) -> str:
    """``delta.`<path>```: the table at ``path`` in Spark SQL (time travel works on it); an
    ``s3://`` path is named ``s3a://``, as Spark reads it."""
    return "delta.`" + spark_path(path).replace("`", "``") + "`"


def subscription_name(record: SubscriptionRecord) -> str:
    """``<namespace>:<name>``, as ``sharedsub subscriptions list`` shows a subscription."""
    return f"{record.identity.namespace}:{record.identity.name}"


def register_tables(spark: SparkSession, root: str) -> dict[str, str]:
    """Register the data dir ``root``'s tables as temporary views; return ``{view: table path}``
    (the path as Spark reads it: ``s3a://`` for a data dir on ``s3://``).

    * ``topic_<topic>``: each topic (one row per published message, payload in ``message``): the
      union of its partitions' tables when several front ends wrote it (sharedsub.core.layout,
      "Partitions"; the ``partition`` column tells them apart), its one table otherwise;
    * ``sub_<namespace>_<name>``: each active subscription's current generation table (routed
      messages; only when the fan-out has created it) and ``acks_<namespace>_<name>`` its
      acknowledgement log (once something was settled);
    * ``sharedsub_catalog``: the subscription catalog (every revision of every subscription).

    Names are made SQL-safe by :func:`view_name`; a name two tables would share gets ``_2``,
    ``_3``, … in the order topics, then subscriptions by key. Views replace earlier ones of the
    same name.
    """
    require_delta(spark)
    require_s3a(spark, root)
    wanted: list[tuple[str, str]] = []
    unions: dict[str, list[str]] = {}  # partition 0's path -> the topic's other partitions' tables
    for topic, partitions in list_topic_partitions(root).items():
        wanted.append((view_name("topic_", topic), layout.topic_table(root, topic)))
        unions[layout.topic_table(root, topic)] = [layout.topic_partition_table(root, topic, p) for p in partitions[1:]]
    for record in sorted(load_catalog(root).values(), key=lambda r: r.key):
        if not record.active:
            continue
        name = f"{record.identity.namespace}_{record.identity.name}"
        wanted.append((view_name("sub_", name), layout.join(root, record.table)))
        wanted.append((view_name("acks_", name), layout.join(root, layout.ack_table_rel(record.key, record.generation))))
    wanted.append(("sharedsub_catalog", layout.catalog_table(root)))
    views: dict[str, str] = {}
    for name, path in wanted:
        if not table_exists(path):
            continue
        unique, n = name, 1
        while unique.lower() in {v.lower() for v in views}:
            n += 1
            unique = f"{name}_{n}"
        frame = spark.read.format("delta").load(spark_path(path))
        for other in unions.get(path, []):
            frame = frame.unionByName(spark.read.format("delta").load(spark_path(other)))
        frame.createOrReplaceTempView(unique)
        views[unique] = spark_path(path)
    return views


def backlog_sql(root: str, record: SubscriptionRecord) -> str:
    """Spark SQL for the backlog of ``record``'s generation: its routed rows that are not settled
    for good, oldest ``seq`` first, with every column of the subscription table.

    Settled for good is sharedsub.core.delivery.acklog's rule: more final rows (every outcome but
    ``failed`` and ``replayed``, sharedsub.core.delivery.outcomes.is_final) than ``replayed`` rows
    for the seq. A subscription without an ack log yet
    (nothing settled; always so for a non-durable one, which keeps its acknowledgements in
    memory) has its whole table as backlog, an upper bound for a non-durable one. (No time
    travel here: maintenance deletes acknowledged rows from both tables together, so an old
    version of one read with the other as it is now would count them as waiting.)
    """
    routed = table_ref(layout.join(root, record.table))
    acks = layout.join(root, layout.ack_table_rel(record.key, record.generation))
    if not table_exists(acks):
        return f"SELECT * FROM {routed} ORDER BY seq"
    not_final = f"'{AckOutcome.FAILED.value}', '{AckOutcome.REPLAYED.value}'"
    return (
        f"SELECT r.* FROM {routed} r LEFT ANTI JOIN ("
        f"SELECT seq FROM {table_ref(acks)} GROUP BY seq "
        f"HAVING count_if(outcome NOT IN ({not_final})) > count_if(outcome = '{AckOutcome.REPLAYED.value}')"
        f") settled ON r.seq = settled.seq ORDER BY r.seq"
    )
