"""Cluster tier: a real Spark cluster of separate executor JVMs on this host.

``local-cluster[2,1,768]`` starts a Spark master and two workers inside the driver's JVM, and each
worker launches an executor JVM of its own (``CoarseGrainedExecutorBackend``) with its own Python
workers: tasks cross process boundaries as on a real cluster, an executor can be killed, and
Spark reschedules its tasks. ONE such session serves the tier's in-process tests (~40 s to start,
~300 MB per executor); it is stopped when the tier is done, so the Spark tier after it gets its
local session. Gotchas (measured): the default ``spark.executor.memory`` (1g) is refused for
768 MB workers, and without ``SPARK_LOCAL_IP`` workers register on the host's interface address.
Tests that run the job as a process of its own (:func:`run_fanout`, spark-submit) start their own
cluster; the executors' Python is ``PYSPARK_PYTHON`` there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from pyspark import SparkContext
from pyspark.sql import SparkSession

from jobs.executor_routing import executor_count
from jobs.session import build_session
from tests.spark.conftest import make_settings

PROJECT = Path(__file__).resolve().parents[2]
ONE_EXECUTOR = "local-cluster[1,1,768]"  # one worker, one core, 768 MB
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
    # s3a: the JVM this first session starts keeps its class path for the Spark tier after it,
    # whose S3A tests need the jars (tests/spark/conftest.py asks for them too).
    session = build_session(
        make_settings("unused", spark_master=CLUSTER_MASTER),
        app_name="sharedsub-cluster-tests",
        extra_conf=CLUSTER_CONF,
        s3a=True,
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


def executor_pids(app_id: str) -> list[int]:
    """Process ids of the executor JVMs of Spark application ``app_id`` on this host (their
    command lines are too long for ``ps``'s default width: read /proc)."""
    pids = []
    wanted = f"--app-id\0{app_id}\0".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                line = fh.read()
                if b"CoarseGrainedExecutorBackend" in line and wanted in line:
                    pids.append(int(entry))
        except OSError:  # gone meanwhile
            continue
    return pids


def cluster_env(executor_python: str, *, master: str = ONE_EXECUTOR) -> dict[str, str]:
    """The environment of a ``python -m jobs.fanout`` on ``master`` whose executors run ``executor_python``."""
    return dict(
        os.environ,
        SHAREDSUB_FANOUT_SPARK_MASTER=master,
        SPARK_EXECUTOR_MEMORY="512m",
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=executor_python,
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )


def run_fanout(root: str, env: Mapping[str, str], *flags: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the fan-out job (``python -m jobs.fanout --data-dir root flags``) to its end."""
    return subprocess.run(
        [sys.executable, "-m", "jobs.fanout", "--data-dir", root, *flags],
        cwd=PROJECT, env=dict(env), capture_output=True, text=True, timeout=timeout,
    )


@pytest.fixture(scope="session")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Python of the same version as the tests' with nothing installed (a venv without site
    packages): an executor's Python that lacks pyarrow, deltalake and sharedsub."""
    venv = tmp_path_factory.mktemp("bare-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python")
