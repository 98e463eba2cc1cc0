"""The embedded fan-out job as a supervised child process of ``sharedsub serve``.

The job runs in its own Python process (``python -m jobs.fanout``) with its own JVM, so the AMQP
reactor never shares a GIL with Spark's driver callbacks and either side can be killed and
restarted alone. The child prints ``sharedsub fanout running`` once its query has completed a
first micro-batch; the supervisor restarts it (with backoff) if it exits unexpectedly.

Starting is retried a bounded number of times (:data:`START_ATTEMPTS`): a job that gives up
before it came up (it exits with a code: its startup timeout passed, its query failed, its
settings are wrong), or neither comes up nor exits well past its startup timeout, is started
again, each time with twice the ``[fanout] startup_timeout`` of the attempt before (passed to the
child as ``SHAREDSUB_FANOUT_STARTUP_TIMEOUT``); after the last attempt the supervisor gives up
(:attr:`FanoutProcess.failed`). A job killed by someone else's signal before it came up (the
crash suite, an operator, the OOM killer) did not fail to start: it is started again, with
backoff, without counting. Why: after a SIGKILL the first micro-batch a new job completes
is the one the killed job had planned, which may be a large catch-up batch; on a busy machine it
did not finish within the timeout, and every start would fail the same way with the same
timeout. A job that came up and died later is restarted without limit.

When a child exits, its process group (the job's Python driver and its JVM) is killed before
the child is reaped, so no JVM of one attempt is still at work on the query's checkpoint when
the next one starts; the supervisor waits for the child's exit, not for the end of its output,
which a lingering JVM holding the pipe would delay.
"""

from __future__ import annotations

import functools
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import TypedDict

from sharedsub.core.fanout import routed_tables
from sharedsub.runtime.process import console

log = logging.getLogger(__name__)

READY_LINE = "sharedsub fanout running"
# What the job prints after a micro-batch that wrote rows to subscription tables, when asked to
# (``--announce-routed``): the front end's tailer then probes those tables at once
# (sharedsub.core.fanout.routed_tables).
ROUTED_LINE = routed_tables.ROUTED_LINE
EXIT_INVALID_SETTINGS = 2  # the job's exit codes that another start would only repeat
EXIT_EXECUTORS_UNFIT = 6
PERMANENT_EXITS = {
    EXIT_INVALID_SETTINGS: "its settings are invalid",
    EXIT_EXECUTORS_UNFIT: "the cluster's executors cannot run it",
}
START_ATTEMPTS = 3
"""Starts in a row that may end before the job comes up; then the supervisor gives up."""
START_GRACE = 120.0
"""Seconds on top of an attempt's startup timeout before the supervisor kills a job that has
neither come up nor exited: the job's own timeout counts from its query's start, after its JVM
started (slow on a busy machine)."""


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


class FanoutExit(TypedDict):
    """An unexpected exit of the job: its code (None: unknown) and wall time (epoch seconds)."""

    code: int | None
    at: float


class FanoutStatus(TypedDict):
    """:meth:`FanoutProcess.status` (for /health and /metrics)."""

    state: str
    pid: int | None
    restarts: int
    last_exit: FanoutExit | None


class FanoutProcess:
    """Start, watch, restart and stop the fan-out child."""

    def __init__(
        self,
        data_dir: str,
        *,
        config: str | None = None,
        extra_args: list[str] | None = None,
        startup_timeout: float = 180.0,
        start_attempts: int = START_ATTEMPTS,
        start_grace: float = START_GRACE,
        on_routed: Callable[[frozenset[str] | None], None] | None = None,
    ) -> None:
        """``startup_timeout``: the ``[fanout]`` setting the child reads (its first attempt's).
        ``on_routed``: called (on the relay thread) after each micro-batch that wrote rows to
        subscription tables, with those tables (paths relative to the data dir; None: any
        table); the child is asked to say so only when given."""
        self.data_dir = data_dir
        self.config = config
        self.extra_args = extra_args or []
        self.startup_timeout = startup_timeout
        self.start_attempts = start_attempts
        self.start_grace = start_grace
        self.on_routed = on_routed
        self.ready = threading.Event()
        self.failed = threading.Event()  # the supervisor gave up starting the job
        self.failure: str | None = None  # why, for serve's last log line
        self._settled = threading.Event()  # ready or failed
        self.restarts = 0
        self._state = "starting"  # starting | running | restarting | failed (see status())
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
        if self.on_routed is not None:
            cmd.append("--announce-routed")
        return cmd + self.extra_args

    def start(self) -> None:
        """Start the child and its supervisor thread."""
        self._thread.start()

    def wait_ready(self, timeout: float) -> bool:
        """Block until the child reported its first micro-batch (False on timeout)."""
        return self.ready.wait(timeout)

    def wait_started(self, timeout: float | None = None) -> bool:
        """Block until the job first reports running (True) or the supervisor gives up starting
        it (False; :attr:`failure` says why), or ``timeout`` passes (False)."""
        self._settled.wait(timeout)
        return self.ready.is_set()

    def status(self) -> FanoutStatus:
        """The job's state for /health and /metrics (any thread).

        ``state``: ``starting`` (spawned, no micro-batch yet), ``running`` (its query completed
        a micro-batch), ``restarting`` (it exited; waiting out the backoff), ``failed`` (it did
        not come up in :data:`START_ATTEMPTS` attempts: no more). ``restarts`` counts
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

    def _spawn(self, startup_timeout: float | None = None) -> subprocess.Popen[str]:
        env = dict(os.environ)
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if startup_timeout is not None:  # a retry: more time than the configured timeout
            env["SHAREDSUB_FANOUT_STARTUP_TIMEOUT"] = f"{startup_timeout:g}"
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

    def _relay(self, proc: subprocess.Popen[str], came_up: threading.Event) -> None:
        """Read the child's stdout: its ready line, and anything else (relayed to our stderr)."""
        assert proc.stdout is not None
        for line in proc.stdout:
            text = line.rstrip("\n")
            routed, tables = routed_tables.parse_routed(text)
            if routed:
                if self.on_routed is not None:
                    self.on_routed(tables)
            elif text == READY_LINE:
                if self.on_routed is not None:
                    # A child that died (kill -9, an OOM) may have committed tables it never
                    # announced: whatever this one finds first, every table is probed once.
                    self.on_routed(None)
                came_up.set()
                self._state = "running"
                self.ready.set()
                self._settled.set()
                log.info("fan-out job running (pid %d)", proc.pid)
            elif text:
                console.err(f"[fanout] {text}")  # one write: serve's ready line may be printed meanwhile

    def _await_exit(self, proc: subprocess.Popen[str], came_up: threading.Event, deadline: float) -> bool:
        """Return once the child has exited, leaving it unreaped (its pid, the process group's
        id, stays reserved for :meth:`_kill_group`). A child that has neither come up nor exited
        by ``deadline`` is killed with its group; True when that happened."""
        killed = False
        exited = _exit_watch(proc.pid)
        try:
            while True:
                try:
                    if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None:
                        return killed
                except ChildProcessError:  # reaped by stop()
                    return killed
                if not killed and not came_up.is_set() and not self._stopping and time.monotonic() > deadline:
                    log.error("fan-out job (pid %d) neither came up nor exited in time; killing it", proc.pid)
                    self._kill_group(proc)
                    killed = True
                if exited is None or not came_up.is_set():
                    time.sleep(0.2)  # (the deadline is checked at each look)
                else:
                    # Running: wake at its exit only, not five times a second (an idle
                    # service's CPU, issue 43); the bound is a safety net.
                    select.select([exited], [], [], EXIT_WATCH_BOUND)
        finally:
            if exited is not None:
                os.close(exited)

    @staticmethod
    def _kill_group(proc: subprocess.Popen[str]) -> None:
        """SIGKILL the child's process group: its Python driver and its JVM (the child leads its
        own session; Spark's Python daemon has its own group and ends with the JVM)."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _supervise(self) -> None:
        backoff = 1.0
        failed_starts = 0  # attempts in a row that ended before the job came up
        while not self._stopping:
            timeout = self.startup_timeout * 2**failed_starts
            with self._lock:
                if self._stopping:
                    return
                self._proc = proc = self._spawn(timeout if failed_starts else None)
                self._state = "starting"
            started = time.monotonic()
            came_up = threading.Event()
            relay = threading.Thread(target=self._relay, args=(proc, came_up), name="sharedsub-fanout-out", daemon=True)
            relay.start()
            timed_out = self._await_exit(proc, came_up, started + timeout + self.start_grace)
            if self._stopping:
                return
            self._kill_group(proc)  # before reaping: what is left of the job goes with it
            code = proc.wait()
            relay.join(10)  # its pipe closed with the group; the last lines (a ready line) are in
            ran = time.monotonic() - started
            # Back off only while the job cannot come up (a crash loop); one that was running and
            # then died is restarted after the shortest pause, however short its run.
            if came_up.is_set() or ran > 60:
                backoff = 1.0
            self.restarts += 1
            self._last_exit = (code, time.time())
            if came_up.is_set():
                failed_starts = 0
                self._state = "restarting"
                log.error("fan-out job exited with code %s; restarting", code)
            elif code < 0 and not timed_out:
                self._state = "restarting"
                log.warning(
                    "fan-out job was killed by signal %d before it came up (after %.0f s); starting it again in %.0f s",
                    -code,
                    ran,
                    backoff,
                )
            else:
                failed_starts += 1
                if code in PERMANENT_EXITS:  # another start would end the same way: its line says why
                    self.failure = f"the fan-out job exited with code {code}: {PERMANENT_EXITS[code]}"
                    failed_starts = self.start_attempts
                if failed_starts >= self.start_attempts:
                    self.failure = self.failure or (
                        f"the fan-out job did not come up in {failed_starts} attempts "
                        f"(the last exited with code {code} after {ran:.0f} s)"
                    )
                    self._state = "failed"
                    log.error("%s; giving up", self.failure)
                    self.failed.set()
                    self._settled.set()
                    return
                self._state = "restarting"
                log.warning(
                    "fan-out job exited with code %s before it came up (attempt %d of %d, after %.0f s); "
                    "starting it again in %.0f s with startup timeout %.0f s",
                    code,
                    failed_starts,
                    self.start_attempts,
                    ran,
                    backoff,
                    self.startup_timeout * 2**failed_starts,
                )
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


EXIT_WATCH_BOUND = 30.0
"""Seconds a running job's supervisor waits on its exit watch before it looks again anyway."""


def _exit_watch(pid: int) -> int | None:
    """A descriptor that turns readable when child ``pid`` exits (Linux's pidfd: no reaping), or
    None where there is none (then the supervisor looks five times a second)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux 5.3+, or the pid is gone already
        return None
