"""The jars that let Spark read ``s3a://`` (Hadoop's S3A file system), fetched only when asked.

Standard library only (with jobs.jar_sets), like jobs.delta_jars: ``bootstrap.py`` fetches them
with ``python3 bootstrap.py setup --object-storage`` (and ``bootstrap.py test``, whose
object-storage tier reads tables on a bucket with Spark), never for ``serve``: the fan-out's
default source reads topics on a bucket through delta-rs and needs none of them.

* ``org.apache.hadoop:hadoop-aws`` at pyspark's own Hadoop version (pyspark 4.2 ships
  ``hadoop-client-api``/``hadoop-client-runtime`` 3.5.0; S3A must match the Hadoop it runs in);
* ``software.amazon.awssdk:bundle``, the AWS SDK v2 in one shaded jar (686 MB), at the version
  hadoop-aws 3.5.0 is built against;
* ``software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3``, which hadoop-aws 3.5.0
  also needs at run time (without it the first ``s3a://`` read fails with
  ``NoClassDefFoundError: software/amazon/s3/analyticsaccelerator/request/ObjectClient``).

hadoop-aws's other dependencies are provided by pyspark's Hadoop client jars or optional
(``wildfly-openssl``: only for ``fs.s3a.ssl.channel.mode=openssl``), so the three are copied
artifact by artifact, not as a dependency tree. ``SHAREDSUB_S3A_JARS`` names another directory
holding the same files; ``SHAREDSUB_S3A_JARS=off`` makes them count as absent.
"""

from __future__ import annotations

from jobs.jar_sets import CACHE, JarSet

HADOOP_VERSION = "3.5.0"  # = pyspark 4.2's hadoop-client-api
AWS_SDK_VERSION = "2.35.4"  # hadoop-aws 3.5.0's aws-java-sdk-v2.version
ANALYTICS_ACCELERATOR_VERSION = "1.3.1"  # hadoop-aws 3.5.0's amazon-s3-analyticsaccelerator-s3.version
ARTIFACTS = (
    f"org.apache.hadoop:hadoop-aws:{HADOOP_VERSION}",
    f"software.amazon.awssdk:bundle:{AWS_SDK_VERSION}",
    f"software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:{ANALYTICS_ACCELERATOR_VERSION}",
)
ENV = "SHAREDSUB_S3A_JARS"
S3A = JarSet("Spark's s3a:// support (hadoop-aws and the AWS SDK)", ARTIFACTS, CACHE / f"s3a-{HADOOP_VERSION}", ENV, "690 MB")


def jars() -> list[str]:
    """Absolute paths of the three jars, or [] when any is missing (or they are switched off)."""
    return S3A.jars()
