"""``python -m jobs.fanout`` as a process: the ready line, --available-now, graceful SIGTERM."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from jobs.fanout import READY_LINE
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


def test_prints_ready_line_routes_and_stops_on_sigterm(root: str) -> None:
    os.makedirs(root)
    proc = subprocess.Popen(
        fanout_command(root, "--trigger-interval", "0.2"),
        cwd=PROJECT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    stderr: list[str] = []

    def pump_stdout() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    def pump_stderr() -> None:
        assert proc.stderr is not None
        stderr.extend(proc.stderr)

    threading.Thread(target=pump_stdout, daemon=True).start()
    threading.Thread(target=pump_stderr, daemon=True).start()
    try:
        try:
            first = lines.get(timeout=240)
        except queue.Empty:
            pytest.fail("no ready line: " + "".join(stderr)[-3000:])
        assert first == READY_LINE + "\n"
        (sub,) = b.register(root, b.subscription("t"))
        b.publish(root, "t", ["k", "k"])
        assert wait_until(lambda: b.routed_seqs(root, sub), timeout=120, what="routed rows") == [0, 1]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0, "".join(stderr)[-3000:]
        assert lines.empty(), "stdout must carry the ready line only"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
