"""Fixtures every tier may ask for: the one S3 server of the session (tests/s3_server.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.s3_server import S3Server


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


@pytest.fixture
def s3_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The AWS variables of the session's S3 server, set in this process for the test."""
    env = s3_server.env()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env
