"""Fixtures every tier may ask for: the one S3 server of the session (tests/s3_server.py), and the
same server behind a delay proxy (a remote store's latency, ``slow_s3_env``); and,
for every test, the proton thread check (connectors/amqp/wire/reactor_thread.py) in every
``sharedsub serve``/``frontend`` the suite starts: a proton call or release off the reactor
thread fails the test that was running."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.delay_proxy import DelayProxy
from connectors.amqp.wire.reactor_thread import ENV as PROTON_THREAD_CHECK
from connectors.amqp.wire.reactor_thread import REPORT_PREFIX
from tests.s3_server import S3Server, client_env
from tests.service import ServeProcess

SLOW_S3_DELAY_MS = 20.0  # what the proxy adds to each answer: a stand-in for S3 Standard (issue 42)


@pytest.fixture(scope="session", autouse=True)
def proton_thread_reports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The directory every service the suite starts reports proton thread violations to (set in
    this process's environment, which each service inherits)."""
    reports = Path(os.environ.get(PROTON_THREAD_CHECK) or tmp_path_factory.mktemp("proton-thread"))
    reports.mkdir(parents=True, exist_ok=True)
    before = os.environ.get(PROTON_THREAD_CHECK)
    os.environ[PROTON_THREAD_CHECK] = str(reports)
    try:
        yield reports
    finally:
        if before is None:
            os.environ.pop(PROTON_THREAD_CHECK, None)


@pytest.fixture(autouse=True)
def no_proton_thread_violation(proton_thread_reports: Path) -> Iterator[None]:
    """Fail the test during which a service reported a proton object touched off its reactor thread."""
    seen = set(proton_thread_reports.glob(f"{REPORT_PREFIX}*"))
    yield
    new = sorted(set(proton_thread_reports.glob(f"{REPORT_PREFIX}*")) - seen)
    if new:
        reports = "\n\n".join(p.read_text(encoding="utf-8", errors="replace") for p in new[:3])
        pytest.fail(f"{len(new)} proton thread violation(s) reported by a service:\n{reports}", pytrace=False)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A real S3 server (versitygw) on 127.0.0.1, started once for the session when a test asks.
    Tests that kill or stop it start it again before they end (the next test finds it up)."""
    root = tmp_path_factory.mktemp("s3")
    server = S3Server(root / "buckets", root / "versitygw.log").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def client_tier_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """The session's default ``sharedsub serve`` on a local data dir: the e2e tier's shared
    ``service`` (tests/e2e/conftest.py) and the one the client tiers' full runs drive
    (tests/jms/test_jms_tier.py::test_qpid_jms_tier, tests/rhea/test_rhea_tier.py::test_rhea_tier).
    Their tests make their own topics, subscription names and ClientIDs (as they do within a
    tier), so one service takes all three and two serve starts (~10 s each) are saved. The
    client tiers check it is still running after their runs; it must stop cleanly when the
    session ends."""
    data = tmp_path_factory.mktemp("client-tier-data")
    proc = ServeProcess(data).start()
    try:
        yield proc
    finally:
        code = proc.stop()
        assert code == 0, f"the client tiers' serve exited with {code}:\n" + "\n".join(proc.stderr_lines[-40:])


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """An S3 server of the asking module's own, with its access log (one line per request): a
    test counts what reached the store, every client's requests (delta-rs's too)."""
    root = tmp_path_factory.mktemp("s3-counted")
    server = S3Server(root / "buckets", root / "versitygw.log", access_log=root / "access.log").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The AWS variables of the session's S3 server, set in this process for the test."""
    env = s3_server.env()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture(scope="session")
def slow_s3_proxy(s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DelayProxy]:
    """A delay proxy (bench/delay_proxy.py) in front of the session's S3 server, started once for
    the session when a test asks: every answer ``SLOW_S3_DELAY_MS`` late. It stays up while a test
    kills and restarts the server (same port)."""
    log = tmp_path_factory.mktemp("slow-s3") / "delay_proxy.log"
    with s3_server.delayed(SLOW_S3_DELAY_MS, log) as proxy:
        yield proxy


@pytest.fixture
def slow_s3_env(slow_s3_proxy: DelayProxy, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The AWS variables that reach the session's S3 server through the delay proxy, set in this
    process for the test (as ``s3_env``; a bucket made with ``s3_server.url()`` is reached both ways)."""
    env = client_env(slow_s3_proxy.endpoint)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env
