"""sharedsub itself as the system under test: ``sharedsub topics create`` and ``sharedsub serve``.

The contract (docs/design.md §6): ``serve --data-dir D --port 0`` prints exactly one line
``sharedsub ready amqp://HOST:PORT`` on stdout once it accepts connections and the fan-out job
runs (``sharedsub ready amqp://HOST:PORT amqps://HOST:TLS_PORT`` with a TLS listener, see
:func:`parse_ready_line`), and stops cleanly on SIGTERM. Publishing is a sender link whose
target is the topic name; subscribing is a receiver link whose source is the topic name.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import procstat
from rabbitmq_peer import Route

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tests.s3_server import S3Server  # noqa: E402  (the test suite's versitygw, shared with it)

READY_PREFIX = "sharedsub ready "


class ServiceError(RuntimeError):
    """sharedsub could not be started or driven."""


def parse_ready_line(line: str) -> tuple[str, str | None] | None:
    """Return (amqp URL, amqps URL or None) of a ready line, or None for any other line.

    ``sharedsub ready amqp://HOST:PORT`` or ``sharedsub ready amqp://HOST:PORT amqps://HOST:TLS_PORT``.
    """
    if not line.startswith(READY_PREFIX):
        return None
    urls = line[len(READY_PREFIX) :].split()
    amqp = next((u for u in urls if u.startswith("amqp://")), None)
    if amqp is None:
        return None
    return amqp, next((u for u in urls if u.startswith("amqps://")), None)


def sharedsub_executable() -> str:
    """Return the ``sharedsub`` console script next to the running interpreter, after checking
    that it runs this checkout's code.

    A venv shared between checkouts (a symlink to another clone's) imports the project from the
    checkout it was installed from, and a benchmark would measure that code while naming this
    one's commit; PYTHONPATH set to this checkout also counts (serve inherits it).
    """
    here = os.path.dirname(os.path.abspath(sys.executable))
    path = os.path.join(here, "sharedsub")
    if not os.path.exists(path):
        msg = f"no sharedsub console script at {path!r}: install the project into this venv (pip install -e .)"
        raise ServiceError(msg)
    found = subprocess.run(
        [sys.executable, "-c", "import sharedsub, os; print(os.path.dirname(os.path.dirname(sharedsub.__file__)))"],
        capture_output=True, text=True, timeout=60, cwd=tempfile.gettempdir(),
    )
    imported = found.stdout.strip()
    if found.returncode != 0 or os.path.realpath(imported) != os.path.realpath(ROOT):
        msg = (f"this venv's sharedsub is {imported or found.stderr.strip()[-300:]!r}, not this checkout {ROOT!r}: "
               f"run `{sys.executable} -m pip install --no-deps -e {ROOT}`, or set PYTHONPATH={ROOT}")
        raise ServiceError(msg)
    return path


class SharedSubService(procstat.BrokerMetrics):
    """One ``sharedsub serve`` process on its own data dir; a context manager that always stops it."""

    name = "sharedsub"

    def __init__(
        self, *, log: Callable[[str], None], log_path: str, data_dir: str | None = None,
        keep_data: bool = False, ready_timeout_s: float = 300.0, name: str = "sharedsub",
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name  # the broker column it is reported in
        self._env = env or {}  # extra environment of serve (SHAREDSUB_<SECTION>_<KEY> settings)
        self._log = log
        self._owns_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="sharedsub-bench-data-")
        self._keep_data = keep_data
        self._ready_timeout_s = ready_timeout_s
        self._proc: subprocess.Popen[str] | None = None
        self._stdout_lines: queue.Queue[str | None] = queue.Queue()
        self._stderr_path = log_path  # serve's stderr (its log), kept for diagnosis
        self.url = ""
        self.tls_url: str | None = None  # amqps://HOST:TLS_PORT when serve runs a TLS listener
        self.version = ""
        self.stop_s: float | None = None

    def create_topics(self, names: Iterable[str]) -> None:
        """Create each topic with the CLI (before ``start``: the CLI writes the data dir)."""
        exe = sharedsub_executable()
        for name in names:
            proc = subprocess.run(
                [exe, "topics", "create", name, "--data-dir", self.data_dir],
                capture_output=True, text=True, timeout=120, env={**os.environ, **self._env},
            )
            if proc.returncode != 0:
                msg = f"sharedsub topics create {name} failed (rc {proc.returncode}): {proc.stderr[-2000:]}"
                raise ServiceError(msg)

    def start(self) -> float:
        """Start ``sharedsub serve`` and wait for its ready line; return the start-up time in seconds."""
        exe = sharedsub_executable()
        t0 = time.perf_counter()
        stderr = open(self._stderr_path, "w", encoding="utf-8")  # noqa: SIM115 - kept open for the child
        self._proc = subprocess.Popen(
            [exe, "serve", "--data-dir", self.data_dir, "--port", "0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, text=True,
            start_new_session=True, env={**os.environ, **self._env},
        )
        stderr.close()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        deadline = time.monotonic() + self._ready_timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                msg = f"sharedsub serve printed no ready line within {self._ready_timeout_s:.0f} s ({self._tail()})"
                raise ServiceError(msg)
            try:
                line = self._stdout_lines.get(timeout=min(left, 1.0))
            except queue.Empty:
                if self._proc.poll() is not None:
                    msg = f"sharedsub serve exited with rc {self._proc.returncode} before ready ({self._tail()})"
                    raise ServiceError(msg) from None
                continue
            if line is None:
                msg = f"sharedsub serve closed stdout before ready ({self._tail()})"
                raise ServiceError(msg)
            urls = parse_ready_line(line)
            if urls is not None:
                self.url, self.tls_url = urls
                return time.perf_counter() - t0

    def _read_stdout(self) -> None:
        # Keeps draining stdout for the life of the process so it can never block on a full pipe.
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            self._stdout_lines.put(line.rstrip("\n"))
        self._stdout_lines.put(None)

    def _tail(self) -> str:
        try:
            with open(self._stderr_path, encoding="utf-8", errors="replace") as f:
                text = f.read()[-1500:]
        except OSError:
            text = ""
        return f"stderr tail: {text!r}"

    def stop(self) -> None:
        """SIGTERM, wait up to 60 s, then SIGKILL what is left of the process group we started."""
        if self._proc is not None:
            t0 = time.perf_counter()
            if self._proc.poll() is None:
                self._proc.send_signal(signal.SIGTERM)
                try:
                    self._proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    self._log(f"sharedsub serve (pid {self._proc.pid}) ignored SIGTERM for 60 s: killing its group")
            self.stop_s = time.perf_counter() - t0
            # Spark's JVM and Python workers live in the same session/process group.
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if self._proc.poll() is None:
                self._proc.wait(timeout=10)
            self._proc = None

    def cleanup(self) -> None:
        """Delete the data dir if this object created it (unless asked to keep it)."""
        if self._owns_dir and not self._keep_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        elif self._owns_dir:
            self._log(f"sharedsub data kept in {self.data_dir}")

    def __enter__(self) -> SharedSubService:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self.cleanup()

    def broker_pid(self) -> int | None:
        """Return the ``sharedsub serve`` pid."""
        return self._proc.pid if self._proc else None

    def route(self, label: str, *, subscribe: bool) -> Route:
        """Return the addresses for topic ``topic_name(label)`` (created before start)."""
        topic = topic_name(label)
        return Route(publish_address=topic, subscribe_address=topic if subscribe else None)

    def subscription_counts(self, name: str) -> tuple[int, int]:
        """Return (messages routed, messages not yet acknowledged for good) of the current
        generation of subscription ``name`` (``<namespace>:<name>``), read from the data dir
        (read-only, no Spark; serve may keep running)."""
        from sharedsub.runtime import inspection  # the project under test; only this helper needs it

        status = inspection.subscription_status(self.data_dir, name)
        return status.routed, status.messages

    def release(self, route: Route) -> None:
        """Nothing to clean: each run has its own topic."""

    def rss_parts(self) -> dict[str, int | None]:
        """Return resident bytes of serve's processes by part: ``serve`` (the front end's own
        process alone), ``fanout`` (the fan-out job's process, ``python -m jobs.fanout``, with its
        Spark JVM and Python workers), ``fanout_jvm`` (the ``java`` processes among those),
        ``other`` (the rest of the tree: the append child process) and ``total``; all None when
        serve is not running."""
        pid = self.broker_pid()
        if pid is None:
            return {"serve": None, "fanout": None, "fanout_jvm": None, "other": None, "total": None}
        tree = procstat.tree_pids(pid)
        fanout_root = next((p for p in tree if p != pid and "jobs.fanout" in _cmdline(p)), None)
        fanout = procstat.tree_pids(fanout_root) if fanout_root is not None else []
        serve, total = _rss(pid), sum(_rss(p) for p in tree)
        fanout_rss = sum(_rss(p) for p in fanout)
        return {
            "serve": serve, "fanout": fanout_rss,
            "fanout_jvm": sum(_rss(p) for p in fanout if _comm(p) == "java"),
            "other": total - serve - fanout_rss, "total": total,
        }

    def subscription_tables(self, topic: str) -> dict[str, int]:
        """Return, read from the data dir (read-only; serve may keep running): the active
        subscriptions of ``topic`` in the catalog, how many of their current generations have a
        table (a ``_delta_log``), and every generation table under ``subscriptions/`` of any topic."""
        from sharedsub.core import layout  # the project under test; only this helper needs it
        from sharedsub.storage.catalog import load_catalog

        records = [r for r in load_catalog(self.data_dir).values() if r.active and r.topic == topic]
        with_table = sum(os.path.isdir(os.path.join(self.data_dir, r.table, "_delta_log")) for r in records)
        root = os.path.join(self.data_dir, layout.SUBSCRIPTIONS_DIR)
        every = 0
        for key in os.listdir(root) if os.path.isdir(root) else []:
            for entry in os.listdir(os.path.join(root, key)):
                every += entry[:1] == "g" and entry[1:].isdigit()
        return {"catalog_subscriptions": len(records), "subscription_tables": with_table,
                "generation_tables_all_topics": every}


def _rss(pid: int) -> int:
    """Resident bytes of process ``pid`` alone (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""


def topic_name(label: str) -> str:
    """Map a measurement label to a valid topic name (``[A-Za-z0-9][A-Za-z0-9._-]*``)."""
    return "bench-" + label.replace("/", "-")


class SharedSubS3Service(SharedSubService):
    """The same ``sharedsub serve`` on an ``s3://`` data dir: a bucket of a versitygw (the test
    suite's S3 server, tests/s3_server.py) that this object starts on 127.0.0.1 over a directory
    of its own when entered, and stops and deletes (unless ``keep_data``) when left, together
    with this host's state directory of the data dir (``_service.json``, the fan-out's Spark
    checkpoint). serve, the CLI and this process reach the bucket with the server's AWS
    variables; nothing else changes, so a run with both gives the cost of object storage as
    ratios. The S3 server's CPU is not the broker's (it stands for the disk).

    With ``store_delay_ms`` > 0 the server is reached through a delay proxy (bench/delay_proxy.py,
    started and stopped with it: tests/s3_server.py) that hands every answer back that late, a
    remote store's latency: serve, the CLI and this process all go through it.
    """

    def __init__(
        self, *, log: Callable[[str], None], log_path: str, server_log_path: str, keep_data: bool = False,
        name: str = "sharedsub-s3", access_log: str | None = None, store_delay_ms: float = 0.0,
    ) -> None:
        self.s3_root = tempfile.mkdtemp(prefix="sharedsub-bench-s3-")
        self.server = S3Server(
            Path(self.s3_root) / "buckets", Path(server_log_path), Path(access_log) if access_log else None,
            delay_ms=store_delay_ms,
        )
        bucket = f"bench-{os.urandom(4).hex()}"  # its own host state directory, whatever else runs
        # serve's AWS variables are set once the server (and its proxy, which has the endpoint) runs.
        super().__init__(log=log, log_path=log_path, data_dir=f"s3://{bucket}/data", keep_data=keep_data,
                         name=name)
        self.bucket = bucket

    def __enter__(self) -> SharedSubS3Service:
        from sharedsub.storage.objects import locations  # the project under test

        try:
            self.server.start()
        except BaseException:
            self.cleanup()
            raise
        self._env = self.server.env()
        self.server.bucket(self.bucket)
        # This process reads the bucket too (subscription_counts reads the subscription tables).
        locations.register(self.data_dir, self.server.env())
        return self

    def cleanup(self) -> None:
        """Stop the S3 server; delete its directory and the data dir's host state directory
        (unless asked to keep them)."""
        from sharedsub.core import layout
        from sharedsub.runtime.discovery import state_home

        self.server.stop()
        # <state home>/sharedsub/stores/s3/<bucket>/data: the bucket's name is this object's own.
        state = os.path.dirname(layout.host_state_dir(self.data_dir, state_home()))
        if self._keep_data:
            self._log(f"sharedsub-s3 data kept in {self.s3_root} (bucket {self.bucket}), host state in {state}")
            return
        shutil.rmtree(self.s3_root, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)
