"""The two halves as separate processes: ``sharedsub frontend`` and ``spark-submit jobs/fanout.py``.

This is the layout of docs/cluster.md ("Running the two halves separately") on one machine:
the front end alone serves AMQP, the fan-out runs under the spark-submit of the pyspark package
(with jobs/spark-defaults.conf as its properties file, PYSPARK_PYTHON the venv's python), and
both meet only in the tables under the data dir, which the job is given as a ``file://`` URI.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from proton import Message

from jobs.fanout import READY_LINE
from sharedsub.storage.topics import create_topic
from tests.amqp_peer import Subscriber, jms_shared_durable, publish, wait_for
from tests.service import ServeProcess

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

PROJECT = Path(__file__).resolve().parents[2]
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"


class SparkSubmit:
    """``spark-submit [spark_args] jobs/fanout.py --data-dir URI`` (``env`` added to this
    process's) with its stdout lines on a queue."""

    def __init__(self, data_uri: str, *, env: dict[str, str] | None = None, spark_args: list[str] | None = None) -> None:
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, **(env or {}))
        cmd = [
            str(SPARK_SUBMIT),
            "--properties-file", str(PROJECT / "jobs" / "spark-defaults.conf"),
            "--master", "local[2]",
            *(spark_args or []),
            str(PROJECT / "jobs" / "fanout.py"),
            "--data-dir", data_uri,
            "--trigger-interval", "0.2",
        ]  # fmt: skip
        # Its own session, so a failed test can stop the JVM and Python workers with it.
        self.proc = subprocess.Popen(
            cmd, cwd=PROJECT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True,
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.stdout: list[str] = []  # every stdout line, also those wait_ready took off the queue
        self.stderr: list[str] = []
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.stdout.append(line.rstrip("\n"))
            self.lines.put(line.rstrip("\n"))

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def wait_ready(self, timeout: float) -> None:
        """Wait for the job's ready line. Spark's PythonRunner merges the driver's stderr into
        its stdout, so under spark-submit the job's log lines come on stdout too: skip them."""
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail("spark-submit printed no ready line:\n" + "\n".join(seen[-40:]) + self.log())
            if line == READY_LINE:
                return
            seen.append(line)
            if self.proc.poll() is not None and self.lines.empty():
                pytest.fail(f"spark-submit exited with {self.proc.returncode}:\n" + "\n".join(seen[-40:]) + self.log())

    def log(self) -> str:
        return "".join(self.stderr)[-4000:]

    def driver_pid(self) -> int:
        """PID of the job's Python driver: the child of spark-submit's JVM that runs fanout.py."""
        pending = [self.proc.pid]
        while pending:
            pid = pending.pop()
            for task in Path(f"/proc/{pid}/task").glob("*"):
                try:
                    children = [int(c) for c in (task / "children").read_text().split()]
                except OSError:
                    continue
                for child in children:
                    try:
                        argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
                    except OSError:
                        continue
                    if any(a.endswith(b"jobs/fanout.py") for a in argv) and b"java" not in argv[0]:
                        return child
                    pending.append(child)
        raise AssertionError("no Python driver under spark-submit")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


def test_frontend_and_spark_submit_fanout_deliver_end_to_end(tmp_path: Path) -> None:
    data = tmp_path / "data"
    create_topic(str(data), "orders")
    frontend = ServeProcess(data, command="frontend").start()
    job = SparkSubmit(data.as_uri())
    try:
        job.wait_ready(timeout=300)
        assert frontend.fanout_pid() is None, "the front end must not run a fan-out of its own"

        total = 20
        with Subscriber(frontend.url, "orders", container_id="billing-app", **jms_shared_durable("billing")) as sub:
            sub.wait_attached()
            bodies = [f"order {i}" for i in range(total)]
            sent = [Message(body=b, properties={"n": i}) for i, b in enumerate(bodies)]
            outcomes = publish(frontend.url, "orders", sent, container_id="shop")
            assert [o.state for o in outcomes] == ["accepted"] * total
            got = sub.wait_count(total, timeout=180)
            assert [r.message.body for r in got] == bodies
            assert [r.message.properties["n"] for r in got] == list(range(total))
        # Acknowledged: nothing of the subscription waits any more (the ack log is the front end's).
        from sharedsub.runtime import inspection

        wait_for(lambda: inspection.subscription_status(str(data), "billing-app:billing").messages == 0, 60, "acks")

        # A graceful stop of the job: SIGTERM to its Python driver (signalling the JVM would kill
        # it from Spark's shutdown hook instead); spark-submit exits with the driver's code.
        os.kill(job.driver_pid(), signal.SIGTERM)
        assert job.proc.wait(120) == 0, job.log()
    finally:
        job.kill()
        code = frontend.stop()
        assert code == 0, frontend.log()[-3000:]
