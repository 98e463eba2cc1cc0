"""Where the Delta Lake Spark connector's jars live, and the Spark settings that turn it on.

Standard library only (with jobs.jar_sets): ``bootstrap.py`` (system Python, no pyspark) imports it
to fetch the jars, ``jobs/session.py`` to configure Spark with them.

The connector is ``io.delta:delta-spark_4.2_2.13`` (Delta's artifact for Spark 4.2 and Scala
2.13) plus ``io.delta:delta-storage``, both :data:`VERSION`. The pinned Python package is
delta-spark 4.4.1 (it supports pyspark up to 4.2.0), but Maven Central serves no 4.4.1 jars of
either artifact here, so the jars are 4.4.0, the newest 4.4 release with both: the same Delta
protocol support, and the Python package only sends Spark SQL to them. Their other dependencies
(Scala library, ANTLR, Jackson, Parquet) ship with pyspark; the delta-kernel jars its POM also
lists were not needed for anything sharedsub does with it (batch reads, SQL, time travel, the
streaming source: tests/spark/test_delta_connector.py), so they are not fetched.

``bootstrap.py`` copies the jars into :data:`JARS_DIR` (``<project>/.jars/delta-<VERSION>``) with
Maven, once; they are found there offline afterwards. ``SHAREDSUB_DELTA_JARS`` names another
directory holding the same files, and ``SHAREDSUB_DELTA_JARS=off`` makes the connector count as
absent (Spark then runs without it, the delta-rs path only).
"""

from __future__ import annotations

from jobs.jar_sets import CACHE, JarSet

VERSION = "4.4.0"
SCALA_SPARK = "4.2_2.13"
# Maven coordinates (group:artifact:version) of the jars Spark needs on its classpath.
ARTIFACTS = (
    f"io.delta:delta-spark_{SCALA_SPARK}:{VERSION}",
    f"io.delta:delta-storage:{VERSION}",
)
JARS_DIR = CACHE / f"delta-{VERSION}"
ENV = "SHAREDSUB_DELTA_JARS"
CONNECTOR = JarSet("the Delta Spark connector", ARTIFACTS, JARS_DIR, ENV, "10 MB")

SNAPSHOT_PARTITIONS = 2
EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def jars() -> list[str]:
    """Absolute paths of the connector's jars, or [] when any is missing (or it is switched off)."""
    return CONNECTOR.jars()


def spark_conf(paths: list[str]) -> dict[str, str]:
    """Spark settings that put the jars ``paths`` on the classpath and make ``format("delta")``,
    ``delta.`path``` and ``VERSION AS OF`` work; {} for no jars."""
    if not paths:
        return {}
    return {
        "spark.jars": ",".join(paths),
        "spark.sql.extensions": EXTENSION,
        "spark.sql.catalog.spark_catalog": CATALOG,
        # Rebuilding a snapshot's state (the log replay behind every read and version) is a
        # Spark job with this many partitions, 50 by default: 50 tasks for a few log files.
        # sharedsub's tables are checkpointed by maintenance and their logs small.
        "spark.databricks.delta.snapshotPartitions": str(SNAPSHOT_PARTITIONS),
    }
