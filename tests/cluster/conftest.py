"""Cluster tier: a real Spark cluster of separate executor JVMs on this host.

``local-cluster[2,1,768]`` starts a Spark master and two workers inside the driver's JVM, and each
worker launches an executor JVM of its own (``CoarseGrainedExecutorBackend``) with its own Python
workers: tasks cross process boundaries as on a real cluster, an executor can be killed, and
Spark reschedules its tasks. ONE such session serves the tier's in-process tests (~40 s to start,
~300 MB per executor); it is stopped when the tier is done, so the Spark tier after it gets its
local session. Gotchas (measured): the default ``spark.executor.memory`` (1g) is refused for
768 MB workers, and without ``SPARK_LOCAL_IP`` workers register on the host's interface address.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark import SparkContext
from pyspark.sql import SparkSession

from jobs.executor_routing import executor_count
from jobs.session import build_session
from tests.spark.conftest import make_settings

CLUSTER_MASTER = "local-cluster[2,1,768]"
CLUSTER_CONF = {"spark.executor.memory": "512m"}
EXECUTORS = 2


@pytest.fixture(scope="package")
def cluster() -> Iterator[SparkSession]:
    """A SparkSession on ``local-cluster[2,1,768]`` with both executors registered."""
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    active = SparkContext._active_spark_context  # noqa: SLF001 (pyspark 4.2: the one context of this process)
    if active is not None:  # another tier's local session: one context per process
        active.stop()
    session = build_session(
        make_settings("unused", spark_master=CLUSTER_MASTER), app_name="sharedsub-cluster-tests", extra_conf=CLUSTER_CONF
    )
    wait_for_executors(session, EXECUTORS, timeout=240)
    yield session
    session.stop()


@pytest.fixture
def root(tmp_path: Path) -> str:
    """An empty data dir."""
    return str(tmp_path / "data")


def wait_for_executors(spark: SparkSession, count: int, timeout: float) -> None:
    """Wait until ``count`` executors are registered; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while executor_count(spark) < count:
        if time.monotonic() > deadline:
            pytest.fail(f"{executor_count(spark)} of {count} executors registered after {timeout:.0f} s")
        time.sleep(0.5)


def executor_pids() -> list[int]:
    """Process ids of the executor JVMs running on this host (their command lines are too long
    for ``ps``'s default width: read /proc)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if b"CoarseGrainedExecutorBackend" in fh.read():
                    pids.append(int(entry))
        except OSError:  # gone meanwhile
            continue
    return pids
