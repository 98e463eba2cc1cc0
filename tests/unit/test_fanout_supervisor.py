"""The fan-out supervisor's start policy, with real child processes that play the job's part:
exit before the ready line, print it, hang, or leave a process holding the output pipe.

A scripted child stands in for ``python -m jobs.fanout`` (no Spark here): it records each start
(its ``SHAREDSUB_FANOUT_STARTUP_TIMEOUT``) in a file and behaves as the test says.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from sharedsub.runtime.fanout_process import READY_LINE, FanoutProcess

# argv: starts file, behaviour per start ("fail" | "ready" | "hang" | "orphan" | "killed"),
# comma-separated (the last one repeats).
CHILD = f"""
import os, subprocess, sys, time
starts = sys.argv[1]
with open(starts, "a") as fh:
    fh.write(os.environ.get("SHAREDSUB_FANOUT_STARTUP_TIMEOUT", "-") + "\\n")
n = len(open(starts).read().splitlines())
plan = sys.argv[2].split(",")
what = plan[min(n, len(plan)) - 1]
if what == "ready":
    print({READY_LINE!r}, flush=True)
    time.sleep(3600)
elif what == "hang":
    time.sleep(3600)
elif what == "orphan":
    # Like a JVM that outlives the job's driver: same process group, holding our stdout.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    with open(starts + ".orphan", "w") as fh:
        fh.write(str(child.pid))
    sys.exit(1)
elif what == "unfit":
    sys.exit(6)
elif what == "killed":
    import signal
    os.kill(os.getpid(), signal.SIGKILL)
else:
    sys.exit(1)
"""


class Scripted(FanoutProcess):
    """The supervisor, running the scripted child instead of the job."""

    def __init__(self, tmp: Path, plan: str, **kwargs: float) -> None:
        super().__init__(str(tmp), startup_timeout=10, **kwargs)  # type: ignore[arg-type]
        self.starts = tmp / "starts"
        self.plan = plan

    def command(self) -> list[str]:
        return [sys.executable, "-c", CHILD, str(self.starts), self.plan]

    def started(self) -> list[str]:
        return self.starts.read_text().splitlines() if self.starts.exists() else []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_job_that_never_comes_up_is_started_three_times_with_doubling_timeouts_then_given_up(tmp_path: Path) -> None:
    fanout = Scripted(tmp_path, "fail")
    fanout.start()
    try:
        assert fanout.wait_started(60) is False
        assert fanout.failed.is_set() and fanout.status()["state"] == "failed"
        assert fanout.failure is not None and "did not come up in 3 attempts" in fanout.failure
        # The first attempt has the configured timeout (nothing passed), each retry twice the last.
        assert fanout.started() == ["-", "20", "40"]
        assert fanout.restarts == 3 and fanout.status()["last_exit"]["code"] == 1
    finally:
        fanout.stop(5)


def test_a_job_whose_executors_cannot_run_it_is_not_started_again(tmp_path: Path) -> None:
    """Exit 6 (and 2) would only repeat: one start, and the failure says why."""
    fanout = Scripted(tmp_path, "unfit")
    fanout.start()
    try:
        assert fanout.wait_started(60) is False
        assert fanout.started() == ["-"]
        assert fanout.failure == "the fan-out job exited with code 6: the cluster's executors cannot run it"
    finally:
        fanout.stop(5)


def test_a_job_that_comes_up_on_a_retry_makes_the_service_ready(tmp_path: Path) -> None:
    fanout = Scripted(tmp_path, "fail,ready")
    fanout.start()
    try:
        assert fanout.wait_started(60) is True
        assert fanout.started() == ["-", "20"]
        assert fanout.status()["state"] == "running" and fanout.restarts == 1 and not fanout.failed.is_set()
    finally:
        fanout.stop(5)


def test_a_job_killed_by_someone_else_before_it_came_up_is_started_again_without_counting(tmp_path: Path) -> None:
    # As the crash suite does: SIGKILLs of the job while it starts are crashes, not failed starts.
    fanout = Scripted(tmp_path, "killed,killed,killed,ready")
    fanout.start()
    try:
        assert fanout.wait_started(60) is True
        assert fanout.started() == ["-", "-", "-", "-"]
        assert fanout.restarts == 3 and fanout.status()["last_exit"]["code"] == -9
    finally:
        fanout.stop(5)


def test_a_job_that_neither_comes_up_nor_exits_is_killed_and_counts_as_a_failed_start(tmp_path: Path) -> None:
    fanout = Scripted(tmp_path, "hang,ready", start_grace=0.5)
    fanout.startup_timeout = 0.5  # the first attempt's deadline: 1 s after its spawn
    fanout.start()
    try:
        assert fanout.wait_started(60) is True
        assert fanout.started() == ["-", "1"]
        assert fanout.status()["last_exit"]["code"] == -9  # SIGKILLed by the supervisor
    finally:
        fanout.stop(5)


def test_a_process_left_holding_the_output_does_not_delay_the_restart_and_is_killed(tmp_path: Path) -> None:
    fanout = Scripted(tmp_path, "orphan,ready")
    began = time.monotonic()
    fanout.start()
    try:
        assert fanout.wait_started(60) is True
        # Restarted after the 1 s backoff, not when the orphan (sleeping an hour) let go of the pipe.
        assert time.monotonic() - began < 30
        orphan = int((tmp_path / "starts.orphan").read_text())
        deadline = time.monotonic() + 10
        while _alive(orphan) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(orphan), "the orphan in the job's process group outlived the job"
    finally:
        fanout.stop(5)
        if (tmp_path / "starts.orphan").exists():
            pid = int((tmp_path / "starts.orphan").read_text())
            if _alive(pid):
                os.kill(pid, 9)
