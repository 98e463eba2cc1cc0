"""Run a real ``sharedsub serve`` (or ``frontend``) process for tests.

The process is started with ``--port 0``; its URL comes from the single ready line it prints.
``stop()`` sends SIGTERM and checks the process exits cleanly.
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
        data_dir: Path,
        *,
        command: str = "serve",
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
        ready_timeout: float = 300.0,
    ) -> None:
        self.data_dir = data_dir
        self.command = command
        self.extra_args = extra_args or []
        self.env = env or {}
        self.ready_timeout = ready_timeout
        self.url = ""
        self.proc: subprocess.Popen[str] | None = None
        self.stderr_lines: list[str] = []
        self.stdout_lines: list[str] = []

    def start(self) -> ServeProcess:
        """Start and wait for ``sharedsub ready amqp://HOST:PORT``."""
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, **self.env)
        cmd = [sys.executable, "-m", "sharedsub", self.command, "--data-dir", str(self.data_dir), "--port", "0"]
        self.proc = subprocess.Popen(
            cmd + self.extra_args,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        ready = threading.Event()

        def read_stdout() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.stdout_lines.append(line.rstrip("\n"))
                if line.startswith("sharedsub ready "):
                    self.url = line.split()[2]
                    ready.set()

        def read_stderr() -> None:
            assert self.proc is not None and self.proc.stderr is not None
            for line in self.proc.stderr:
                self.stderr_lines.append(line.rstrip("\n"))

        threading.Thread(target=read_stdout, daemon=True).start()
        threading.Thread(target=read_stderr, daemon=True).start()
        deadline = time.monotonic() + self.ready_timeout
        while not ready.wait(0.05):
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

    def log(self) -> str:
        """Everything the process wrote to stderr so far."""
        return "\n".join(self.stderr_lines)
