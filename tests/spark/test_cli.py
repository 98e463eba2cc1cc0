"""``python -m jobs.fanout`` as a process: the ready line, --available-now, graceful SIGTERM."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from jobs.fanout import READY_LINE
from sharedsub.core import layout
from tests import builders as b
from tests.spark.conftest import wait_until

pytestmark = pytest.mark.spark

PROJECT = Path(__file__).resolve().parents[2]


def fanout_command(root: str, *flags: str) -> list[str]:
    return [sys.executable, "-m", "jobs.fanout", "--data-dir", root, *flags]


def test_available_now_routes_and_exits_0(root: str) -> None:
    b.publish(root, "t", ["a.b", "c"])
    (sub,) = b.register(root, b.subscription("t", binding="a.*"))
    b.publish(root, "t", ["a.x"])
    done = subprocess.run(
        fanout_command(root, "--available-now"), cwd=PROJECT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == READY_LINE + "\n"
    assert b.routed_seqs(root, sub) == [0, 2]


class FanoutJob:
    """``python -m jobs.fanout`` running on ``root``: its stdout lines and its stderr, read as they come."""

    def __init__(self, root: str, *flags: str) -> None:
        self.proc = subprocess.Popen(
            fanout_command(root, *flags), cwd=PROJECT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        self._stderr.extend(self.proc.stderr)

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    def first_line(self) -> str:
        """The job's first stdout line (its ready line), or the test fails with its stderr."""
        try:
            return self.lines.get(timeout=240)
        except queue.Empty:
            pytest.fail("no ready line: " + self.stderr[-3000:])

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def test_prints_ready_line_routes_and_stops_on_sigterm(root: str) -> None:
    os.makedirs(root)
    job = FanoutJob(root, "--trigger-interval", "0.2")
    try:
        assert job.first_line() == READY_LINE + "\n"
        (sub,) = b.register(root, b.subscription("t"))
        b.publish(root, "t", ["k", "k"])
        assert wait_until(lambda: b.routed_seqs(root, sub), timeout=120, what="routed rows") == [0, 1]
        job.proc.send_signal(signal.SIGTERM)
        assert job.proc.wait(timeout=120) == 0, job.stderr[-3000:]
        assert job.lines.empty(), "stdout must carry the ready line only"
    finally:
        job.kill()


def test_a_query_that_fails_after_an_idle_spell_ends_the_job_with_1(root: str) -> None:
    """The job learns that its query ended from a thread blocked in ``awaitTermination``
    (jobs.fanout._watch_end), not by asking; a query that fails after the job sat idle (its
    source holding Spark's asks: [fanout] idle_hold) must still end the job, with exit code 1,
    for its supervisor to start it again."""
    os.makedirs(root)
    job = FanoutJob(root, "--trigger-interval", "0.2")
    try:
        assert job.first_line() == READY_LINE + "\n"
        (sub,) = b.register(root, b.subscription("t"))
        b.publish(root, "t", ["k"])
        assert wait_until(lambda: b.routed_seqs(root, sub), timeout=120, what="routed rows") == [0]
        time.sleep(3)  # idle: the source has found nothing for over a second and holds the asks
        assert job.proc.poll() is None, job.stderr[-3000:]
        # The subscription's table can neither be committed (its log is a file now) nor its rows
        # parked (the parking directory is a file): the next batch fails, and with it the query.
        table = layout.join(root, sub.table)
        os.rename(os.path.join(table, "_delta_log"), os.path.join(table, "_delta_log.moved"))
        Path(table, "_delta_log").write_text("not a directory")
        pending = layout.fanout_pending(root)
        shutil.rmtree(pending, ignore_errors=True)
        os.makedirs(os.path.dirname(pending), exist_ok=True)
        Path(pending).write_text("not a directory")
        b.publish(root, "t", ["k"])
        assert job.proc.wait(timeout=120) == 1, job.stderr[-3000:]
        assert "the fan-out query failed" in job.stderr, job.stderr[-3000:]
    finally:
        job.kill()
