"""A real S3 server for the tests: versitygw (Apache-2.0) over a local directory, on 127.0.0.1.

``python3 bootstrap.py test`` builds it once from the Go module proxy into a cache outside the
repository (bootstrap.ensure_s3_server) and names the binary in ``SHAREDSUB_S3_SERVER``. It is a
real implementation of the S3 API (SigV4, ``If-None-Match: *`` and ``If-Match`` on PutObject,
412 otherwise), not a mock: what passes here passes against the protocol.

The benchmarks start their own (bench/sharedsub_service.py, bench/idle_requests.py,
bench/object_commit_cost.py, bench/batch_requests.py), with its access log when they count
requests.

A remote store's latency (issue 42): on loopback a request costs well under a millisecond, a real
S3 answers in 10–30 ms. ``S3Server(..., delay_ms=20)`` puts a delay proxy (bench/delay_proxy.py)
in front of the server, started and stopped with it, and :meth:`S3Server.env` points clients at
the proxy: every answer comes 20 ms late. The suite's ``slow_s3_env`` (tests/conftest.py) is the
session's server behind such a proxy (:meth:`S3Server.delayed`).

One server serves a whole pytest session (tests/conftest.py: ``s3_server``); each test takes a
bucket of its own (:meth:`S3Server.bucket`). Faults: :meth:`S3Server.kill` (SIGKILL),
:meth:`S3Server.stop_for` (SIGSTOP, then SIGCONT), :meth:`S3Server.start` again on the same
port and directory (the objects survive, as a restarted S3 endpoint's do).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.delay_proxy import DelayProxy, end_process

ENV = "SHAREDSUB_S3_SERVER"
DEFAULT_BINARY = Path.home() / ".cache" / "sharedsub" / "gobin" / "versitygw"
ACCESS_KEY = "sharedsub-test"
SECRET_KEY = "sharedsub-test-secret"  # a test server's key: bound to 127.0.0.1 and a temp dir
REGION = "us-east-1"


def binary() -> Path:
    """The versitygw binary (``SHAREDSUB_S3_SERVER``, else the bootstrap cache).

    Raises:
        FileNotFoundError: not built; the message says how to build it.
    """
    path = Path(os.environ.get(ENV) or DEFAULT_BINARY)
    if not path.is_file():
        raise FileNotFoundError(
            f"the test S3 server (versitygw) is not at {path}: `python3 bootstrap.py test` builds it "
            f"(once, from the Go module proxy), or name a binary in {ENV}"
        )
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def client_env(endpoint: str) -> dict[str, str]:
    """The standard AWS variables that point a client (obstore, delta-rs, the service) at
    ``endpoint`` with the test server's credentials."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ADDRESSING_STYLE": "path",
    }


class S3Server:
    """One versitygw process serving the directory ``root`` (a bucket is a sub-directory); with
    ``delay_ms`` > 0, reached through a delay proxy that hands every answer back that late."""

    def __init__(self, root: Path, log: Path, access_log: Path | None = None, *, delay_ms: float = 0.0) -> None:
        self.root = root
        self.log_path = log
        # versitygw's S3 server access log (one line per request: operation, key, status, user
        # agent, ms): what bench/idle_requests.py and bench/object_commit_cost.py count.
        self.access_log = access_log
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.delay_ms = delay_ms
        self.proxy: DelayProxy | None = None  # in front of the server while it runs, with delay_ms > 0

    @property
    def endpoint(self) -> str:
        """The server's own address (not the proxy's)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def client_endpoint(self) -> str:
        """Where clients are pointed: the proxy when there is one, else the server."""
        return self.proxy.endpoint if self.proxy is not None else self.endpoint

    def env(self) -> dict[str, str]:
        """The standard AWS variables that point a client (obstore, delta-rs, the service) here,
        through the proxy when there is one."""
        return client_env(self.client_endpoint)

    def delayed(self, delay_ms: float, log: Path | None = None) -> DelayProxy:
        """A delay proxy to this server (not started): every answer ``delay_ms`` late. It outlives
        :meth:`kill` and :meth:`start` (same port): clients through it see the outage."""
        return DelayProxy(f"127.0.0.1:{self.port}", delay_ms, log=log)

    def start(self, timeout: float = 30.0) -> S3Server:
        """Start (or start again, on the same port and directory) and wait until it answers."""
        self.root.mkdir(parents=True, exist_ok=True)
        cmd = [
            str(binary()), "--port", f"127.0.0.1:{self.port}", "--access", ACCESS_KEY, "--secret", SECRET_KEY,
            "--region", REGION, "--quiet",
            *(["--access-log", str(self.access_log)] if self.access_log is not None else []),
            "posix", str(self.root),
        ]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"versitygw exited with {self.proc.returncode}:\n{self.log()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"versitygw did not listen on {self.port} within {timeout:.0f} s") from None
                time.sleep(0.05)
        if self.delay_ms > 0 and self.proxy is None:
            self.proxy = self.delayed(self.delay_ms, self.log_path.with_name(self.log_path.name + ".proxy")).start()
        return self

    def bucket(self, name: str | None = None) -> str:
        """A new empty bucket (a directory of the root); returns its name."""
        name = name or f"b-{uuid.uuid4().hex[:12]}"
        (self.root / name).mkdir()
        return name

    def url(self, prefix: str = "data") -> str:
        """``s3://<new bucket>/<prefix>``: a data dir of its own for one test."""
        return f"s3://{self.bucket()}/{prefix}"

    def access_mark(self) -> int:
        """Where the access log ends now (for :meth:`requests_since`; needs ``access_log``)."""
        assert self.access_log is not None
        return self.access_log.stat().st_size if self.access_log.exists() else 0

    def requests_since(self, start: int, bucket: str | None = None) -> list[tuple[str, str]]:
        """(S3 operation, key) of every request logged after offset ``start`` of the access log
        (to ``bucket`` only, when given: a test's own data dir, whatever else lands in the log
        meanwhile, such as an earlier test's requests logged late)."""
        assert self.access_log is not None
        with open(self.access_log, "rb") as fh:
            fh.seek(start)
            lines = fh.read().decode("utf-8", errors="replace").splitlines()
        # OWNER BUCKET [DAY:TIME ZONE] IP REQUESTER ID OPERATION KEY ... (bench/s3_access_log.py)
        return [
            (fields[7], fields[8])
            for fields in (line.split(" ") for line in lines)
            if len(fields) > 8 and (bucket is None or fields[1] == bucket)
        ]

    def kill(self) -> None:
        """SIGKILL the server (a crashed S3 endpoint); :meth:`start` brings it back."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    @contextmanager
    def stopped(self) -> Iterator[None]:
        """SIGSTOP the server for the block (a hung S3 endpoint), SIGCONT after."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        """Stop for good (SIGTERM, then SIGKILL), the proxy in front of it too."""
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None
        if self.proc is not None and self.proc.poll() is None:
            end_process(self.proc)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
