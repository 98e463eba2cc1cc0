"""The fan-out job on a real local-cluster: executors whose Python lacks the packages stop it at
start with one line and exit 6 (jobs/executor_check.py). Executors with the driver's environment
pass the check and route: tests/cluster/test_serve_spark_conf.py shows it (serve's job on
local-cluster[2,1,768] logs "executors checked" and delivers), without a cluster of its own here."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from jobs.fanout import EXIT_EXECUTORS_UNFIT
from tests import builders as b
from tests.cluster.conftest import cluster_env, run_fanout

pytestmark = pytest.mark.cluster


def test_executors_without_the_packages_stop_the_job_with_one_line(tmp_path: Path, bare_python: str) -> None:
    root = str(tmp_path / "data")
    b.publish(root, "t", ["k"])
    b.register(root, b.subscription("t"))
    assert subprocess.run([bare_python, "-c", "import pyarrow"], capture_output=True).returncode != 0
    done = run_fanout(root, cluster_env(bare_python), "--available-now")
    assert done.returncode == EXIT_EXECUTORS_UNFIT, done.stderr[-3000:]
    assert done.stdout == ""  # no ready line: the query never started
    ours = [line for line in done.stderr.splitlines() if line.startswith("jobs.fanout:")]
    assert len(ours) == 1, done.stderr[-3000:]
    assert "lacks pyarrow (ModuleNotFoundError: No module named 'pyarrow')" in ours[0]
    assert "--archives" in ours[0] and 'docs/cluster.md "Routing on a Spark cluster"' in ours[0]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]

