"""Run a real ``sharedsub serve`` (or ``frontend``) process for tests.

The process is started with ``--port 0`` (or a given port, so a restart after a crash keeps the
URL its clients reconnect to); its URL comes from the single ready line it prints (with
``one_pipe``, stdout and stderr share one pipe, as under a supervisor that merges them). ``stop()``
sends SIGTERM and checks the process exits cleanly; ``kill()`` and ``kill_fanout()`` SIGKILL the
server or only its supervised fan-out job.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class ServeProcess:
    """A ``sharedsub`` server process on a free port."""

    def __init__(
        self,
        data_dir: Path | str,
        *,
        command: str = "serve",
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
        ready_timeout: float = 300.0,
        port: int = 0,
        one_pipe: bool = False,
    ) -> None:
        self.data_dir = data_dir
        self.command = command
        self.extra_args = extra_args or []
        self.env = env or {}
        self.ready_timeout = ready_timeout
        self.port = port
        self.one_pipe = one_pipe  # stderr into stdout's pipe: stdout_lines has every line, stderr_lines the others
        self.url = ""
        self.tls_url: str | None = None  # the amqps URL when the ready line names one
        self.proc: subprocess.Popen[str] | None = None
        self.stderr_lines: list[str] = []
        self.stdout_lines: list[str] = []
        self._ready = threading.Event()

    def start(self, *, wait: bool = True) -> ServeProcess:
        """Start the process; with ``wait``, also :meth:`wait_ready`."""
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, **self.env)
        cmd = [sys.executable, "-m", "sharedsub", self.command, "--data-dir", str(self.data_dir), "--port", str(self.port)]
        self.proc = subprocess.Popen(
            cmd + self.extra_args,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if self.one_pipe else subprocess.PIPE,
            text=True,
        )
        self._ready = threading.Event()

        def read_stdout() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.stdout_lines.append(line.rstrip("\n"))
                if self.one_pipe and not line.startswith("sharedsub ready "):
                    self.stderr_lines.append(line.rstrip("\n"))  # for log() and wait_log()
                if line.startswith("sharedsub ready "):
                    # ``sharedsub ready amqp://HOST:PORT [amqps://HOST:TLS_PORT]``
                    urls = line.split()[2:]
                    self.url = urls[0]
                    self.tls_url = next((u for u in urls[1:] if u.startswith("amqps://")), None)
                    self._ready.set()

        def read_stderr() -> None:
            assert self.proc is not None and self.proc.stderr is not None
            for line in self.proc.stderr:
                self.stderr_lines.append(line.rstrip("\n"))

        threading.Thread(target=read_stdout, daemon=True).start()
        if not self.one_pipe:
            threading.Thread(target=read_stderr, daemon=True).start()
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float | None = None) -> ServeProcess:
        """Wait for ``sharedsub ready amqp://HOST:PORT`` (``ready_timeout`` by default); kill the
        process and raise RuntimeError if it exits or the time runs out first."""
        assert self.proc is not None
        deadline = time.monotonic() + (self.ready_timeout if timeout is None else timeout)
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                tail = "\n".join(self.stderr_lines[-40:])
                raise RuntimeError(f"sharedsub {self.command} did not become ready:\n{tail}")
        return self

    def stop(self, timeout: float = 90.0) -> int:
        """SIGTERM and wait; return the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError("sharedsub did not stop within the timeout after SIGTERM") from None
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL the process (and leave its children to their supervisor's fate)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    @property
    def ready(self) -> bool:
        """True once the process printed its ready line."""
        return self._ready.is_set()

    @property
    def pid(self) -> int:
        """PID of the server process."""
        assert self.proc is not None
        return self.proc.pid

    def fanout_pid(self) -> int | None:
        """PID of the server's fan-out child (``python -m jobs.fanout``) now, or None."""
        assert self.proc is not None
        for task in Path(f"/proc/{self.proc.pid}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in children:
                try:
                    cmdline = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if b"jobs.fanout" in cmdline:
                    return int(child)
        return None

    def fanout_running_pids(self) -> list[int]:
        """PIDs of the fan-out children the server reported running, oldest first (from its log)."""
        marker = "fan-out job running (pid "
        return [int(line.split(marker, 1)[1].split(")", 1)[0]) for line in list(self.stderr_lines) if marker in line]

    def kill_fanout(self) -> int:
        """SIGKILL the fan-out job, as a crash of the job would: the child's whole process group (its
        Python driver and the JVM; Spark's Python daemons end with the JVM). Return the child's pid
        once it is dead."""
        pid = self.fanout_pid()
        if pid is None:
            raise AssertionError("sharedsub serve has no fan-out child to kill")
        os.killpg(pid, signal.SIGKILL)  # the supervisor starts the child in its own session
        deadline = time.monotonic() + 30
        while _alive(pid):  # dead means gone or a zombie its supervisor has yet to reap
            if time.monotonic() > deadline:
                raise AssertionError(f"fan-out child {pid} still alive 30 s after SIGKILL")
            time.sleep(0.01)
        return pid

    def log(self) -> str:
        """Everything the process wrote to stderr so far."""
        return "\n".join(self.stderr_lines)

    def wait_log(self, text: str, timeout: float = 10.0) -> str:
        """Wait until ``text`` is in what the process wrote to stderr; return the log so far.

        stderr is read on its own thread: a line written before the ready line on stdout may
        still be on its way when :meth:`wait_ready` returns.
        """
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not in the log after {timeout:.0f} s:\n" + "\n".join(self.stderr_lines[-40:]))
            time.sleep(0.02)
        return self.log()


def _alive(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
