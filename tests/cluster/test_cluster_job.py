"""The fan-out job under ``spark-submit --master local-cluster[…]`` on a bucket, routing on the
executors: its driver killed after the executors wrote a batch's files and before the driver
committed them, then started again: every message reaches every subscription it matches once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest

from jobs.routed_rows import by_route, route_rows
from jobs.sources.deltars_topics import ARROW_SCHEMA
from sharedsub.core import layout
from sharedsub.core.fanout.routing import plan_for
from sharedsub.storage import catalog
from sharedsub.storage.delta.commit_log import latest_version, read_log_entry
from sharedsub.storage.delta.table_reads import read_table
from sharedsub.storage.delta.tables import data_files
from tests import builders as b
from tests.s3_server import S3Server

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
MASTER = "local-cluster[1,1,768]"
COMMITTING = "; committing"  # the sink's line between the executors' writes and the commits


def submit(data_dir: str, state: Path, s3: dict[str, str], master: str = MASTER) -> subprocess.Popen[str]:
    """``spark-submit jobs/fanout.py --available-now`` on ``data_dir``, routing on the executors."""
    env = dict(
        os.environ,
        **s3,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        XDG_STATE_HOME=str(state),  # the job's checkpoint for a bucket lives under it
        SHAREDSUB_FANOUT_ROUTING="executors",
    )
    return subprocess.Popen(
        [
            str(SPARK_SUBMIT), "--master", master, "--conf", "spark.executor.memory=512m",
            str(ROOT / "jobs" / "fanout.py"), "--data-dir", data_dir, "--available-now",
        ],
        # Under spark-submit the Python driver's log lines come on stdout (docs/cluster.md): one stream.
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def driver_pid(submitter: int) -> int | None:
    """The Python driver spark-submit started (its JVM's child running jobs/fanout.py), from
    /proc (``ps`` cuts long command lines at its default width)."""
    children: dict[int, list[tuple[int, bytes]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                args = fh.read()
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
        children.setdefault(ppid, []).append((int(entry), args))
    todo = [submitter]
    while todo:
        for pid, args in children.get(todo.pop(), []):
            if b"python" in args and b"fanout.py" in args:
                return pid
            todo.append(pid)
    return None


def expected_seqs(root: str, topic: str) -> dict[str, list[int]]:
    """Per subscription table: the seqs routing everything in ``topic`` gives."""
    records = tuple(r for r in catalog.load_catalog(root).values() if r.active)
    plan = plan_for(records)
    source = read_table(layout.topic_table(root, topic), [c for c in ARROW_SCHEMA.names if c != "topic"])
    assert source is not None
    source = source.add_column(0, "topic", pa.array([topic] * source.num_rows, pa.string())).cast(ARROW_SCHEMA)
    return {plan.routes[i].record.table: rows.column("seq").to_pylist() for i, rows in by_route(route_rows(plan, source))}


def uncommitted_files(root: str, table: str) -> int:
    """Data files in ``table``'s directory that no commit of its log names."""
    path = layout.join(root, table)
    named: set[str] = set()
    for version in range(latest_version(path) + 1):
        entry = read_log_entry(path, version)
        if entry is not None:
            named.update(entry.added)
    return len(set(data_files(path)) - named)


def test_a_driver_killed_between_the_executors_writes_and_its_commits_routes_everything_once(
    s3_server: S3Server, s3_env: dict[str, str], tmp_path: Path
) -> None:
    root = s3_server.url()
    for n in range(6):
        b.publish(root, "orders", [f"k.{i % 5}" for i in range(200)], properties={"n": n})
    records = b.register(
        root,
        *(b.subscription("orders", name=f"key{i}", binding=f"k.{i}") for i in range(5)),
        *(b.subscription("orders", name=f"n{n}", selector=f"n = {n}") for n in range(6)),
        *(b.subscription("orders", name=f"all{i}") for i in range(29)),
    )
    first = submit(root, tmp_path / "state", s3_env)
    seen: list[str] = []
    killed = threading.Event()

    def watch() -> None:
        assert first.stdout is not None
        pid = None
        for line in first.stdout:
            seen.append(line)
            if pid is None and "sharedsub.fanout" in line:  # the Python driver is up: find it now
                pid = driver_pid(first.pid)
            if COMMITTING in line and pid is not None and not killed.is_set():
                os.kill(pid, signal.SIGSTOP)  # at once: the commits have not begun
                killed.set()
                os.kill(pid, signal.SIGKILL)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        first.wait(600)
    finally:
        if first.poll() is None:
            first.kill()
    watcher.join(30)
    assert killed.is_set(), "the driver never reached its commits:\n" + "".join(seen[-40:])
    left = sum(uncommitted_files(root, r.table) for r in records)
    assert left > 0, "the kill came after the commits: nothing was left between writes and commits"

    # The restart replays the batch; it need not be on a cluster to show that (local[2] starts
    # in seconds, a local-cluster in ~40 s), and its tasks still write and the driver commits.
    again = submit(root, tmp_path / "state", s3_env, master="local[2]")
    out, _ = again.communicate(timeout=600)
    assert again.returncode == 0, out[-4000:]
    expected = expected_seqs(root, "orders")
    assert len(expected) == len(records) and sum(map(len, expected.values())) > 5000
    for record in records:
        routed = b.routed_seqs(root, record)
        assert len(routed) == len(set(routed)), f"{record.identity.name}: {len(routed) - len(set(routed))} rows twice"
        assert routed == expected[record.table], record.identity.name
