"""The embedded fan-out job as a supervised child process of ``sharedsub serve``.

The job runs in its own Python process (``python -m jobs.fanout``) with its own JVM, so the AMQP
reactor never shares a GIL with Spark's driver callbacks and either side can be killed and
restarted alone. The child prints ``sharedsub fanout running`` once its query has completed a
first micro-batch; the supervisor restarts it (with backoff) if it exits unexpectedly.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

log = logging.getLogger(__name__)

READY_LINE = "sharedsub fanout running"


def _die_with_parent(parent: int) -> None:
    """In the child: get SIGKILL when the supervising thread's process dies (even by SIGKILL).

    SIGKILL, not SIGTERM: the job acts on SIGTERM only once its query has started, so an orphan told
    to stop gracefully went on starting its query on the same checkpoint as the child of the
    restarted server (two fan-out queries at once, seen in the crash suite). A job killed
    outright is a crash the job survives by design; its JVM exits when the driver's pipe closes.

    ``parent`` is the supervisor's pid: if it died between the fork and the ``prctl`` the signal
    would never come (the child is already an orphan), so the child exits at once then.
    """
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        return
    if os.getppid() != parent:
        os._exit(1)  # before exec: no Python cleanup to run in this forked copy of the supervisor


class FanoutProcess:
    """Start, watch, restart and stop the fan-out child."""

    def __init__(self, data_dir: str, *, config: str | None = None, extra_args: list[str] | None = None) -> None:
        self.data_dir = data_dir
        self.config = config
        self.extra_args = extra_args or []
        self.ready = threading.Event()
        self.restarts = 0
        self._state = "starting"  # starting | running | restarting (see status())
        self._last_exit: tuple[int | None, float] | None = None  # (exit code, wall time)
        self._proc: subprocess.Popen[str] | None = None
        self._stopping = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._supervise, name="sharedsub-fanout", daemon=True)

    def command(self) -> list[str]:
        """The child's command line."""
        cmd = [sys.executable, "-m", "jobs.fanout", "--data-dir", self.data_dir]
        if self.config:
            cmd += ["--config", self.config]
        return cmd + self.extra_args

    def start(self) -> None:
        """Start the child and its supervisor thread."""
        self._thread.start()

    def wait_ready(self, timeout: float) -> bool:
        """Block until the child reported its first micro-batch (False on timeout)."""
        return self.ready.wait(timeout)

    def status(self) -> dict[str, Any]:
        """The job's state for /health and /metrics (any thread).

        ``state``: ``starting`` (spawned, no micro-batch yet), ``running`` (its query completed
        a micro-batch), ``restarting`` (it exited; waiting out the backoff). ``restarts`` counts
        unexpected exits; ``last_exit`` is the newest one's code and time (epoch seconds).
        """
        last = self._last_exit
        return {
            "state": self._state,
            "pid": self.pid,
            "restarts": self.restarts,
            "last_exit": None if last is None else {"code": last[0], "at": last[1]},
        }

    @property
    def pid(self) -> int | None:
        """PID of the current child."""
        return self._proc.pid if self._proc else None

    def _spawn(self) -> subprocess.Popen[str]:
        env = dict(os.environ)
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        return subprocess.Popen(
            self.command(),
            stdout=subprocess.PIPE,
            stderr=None,  # the job's logs go to our stderr
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
            start_new_session=True,  # our Ctrl-C is handled by us, not delivered to the JVM
            preexec_fn=functools.partial(_die_with_parent, os.getpid()),
        )

    def _supervise(self) -> None:
        backoff = 1.0
        while not self._stopping:
            with self._lock:
                if self._stopping:
                    return
                self._proc = proc = self._spawn()
                self._state = "starting"
            started = time.monotonic()
            came_up = False
            assert proc.stdout is not None
            for line in proc.stdout:
                text = line.rstrip("\n")
                if text == READY_LINE:
                    came_up = True
                    self._state = "running"
                    self.ready.set()
                    log.info("fan-out job running (pid %d)", proc.pid)
                elif text:
                    print(f"[fanout] {text}", file=sys.stderr, flush=True)
            code = proc.wait()
            if self._stopping:
                return
            self.restarts += 1
            self._state = "restarting"
            self._last_exit = (code, time.time())
            log.error("fan-out job exited with code %s; restarting", code)
            # Back off only while the job cannot come up (a crash loop); one that was running and
            # then died is restarted after the shortest pause, however short its run.
            if came_up or time.monotonic() - started > 60:
                backoff = 1.0
            time.sleep(backoff)
            backoff = min(backoff * 2, 30.0)

    def stop(self, timeout: float = 60.0) -> None:
        """Stop the child gracefully (SIGTERM, then SIGKILL after ``timeout``)."""
        with self._lock:
            self._stopping = True
            proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.error("fan-out job did not stop in %.0f s; killing it", timeout)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
