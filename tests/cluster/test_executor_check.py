"""The fan-out job on a real local-cluster: executors whose Python lacks the packages stop it at
start with one line and exit 6 (jobs/executor_check.py); executors with the driver's environment
let it route and exit 0."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jobs.fanout import EXIT_EXECUTORS_UNFIT, READY_LINE
from tests import builders as b
from tests.cluster.conftest import ONE_EXECUTOR, cluster_env, run_fanout

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


def test_executors_with_the_drivers_python_route(tmp_path: Path) -> None:
    root = str(tmp_path / "data")
    b.publish(root, "t", ["a.b", "c"])
    (sub,) = b.register(root, b.subscription("t", binding="a.*"))
    b.publish(root, "t", ["a.x"])
    done = run_fanout(root, cluster_env(sys.executable), "--available-now")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == READY_LINE + "\n"
    assert f"executors checked (master {ONE_EXECUTOR}):" in done.stderr
    assert b.routed_seqs(root, sub) == [0, 2]
