"""Cluster tier: tests that need a real Spark cluster of separate executor JVMs on this host,
``local-cluster[N,C,MB]`` (pyspark's own, no install), each start ~20-40 s and ~300 MB per executor.

Two settings make it run from the pip-installed pyspark: executors of 512 MB
(``SPARK_EXECUTOR_MEMORY``; Spark's 1 GB default is more than a 768 MB worker offers, and the
executors never start) and ``SPARK_LOCAL_IP=127.0.0.1`` (else executors register on the host's
interface address). The executors' Python is ``PYSPARK_PYTHON``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
ONE_EXECUTOR = "local-cluster[1,1,768]"  # one worker, one core, 768 MB


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
