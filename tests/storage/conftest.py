"""Fixtures of the storage tier: an object store of each implementation, and an S3 server whose
access log counts requests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sharedsub.storage.objects import open_store
from sharedsub.storage.objects.local_store import LocalStore
from sharedsub.storage.objects.store import ObjectStore
from tests.s3_server import S3Server


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """An empty store: a local directory, then a bucket of the session's S3 server (versitygw)
    with the AWS variables set for the test."""
    if request.param == "local":
        return LocalStore(str(tmp_path / "data"))
    server: S3Server = request.getfixturevalue("s3_server")
    request.getfixturevalue("s3_env")
    return open_store(server.url())


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
def counted_root(counted: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """A data dir on ``counted``, with its AWS variables set for the test."""
    for name, value in counted.env().items():
        monkeypatch.setenv(name, value)
    return counted.url("data")


def requests_since(server: S3Server, start: int) -> list[tuple[str, str]]:
    """(S3 operation, key) of every request logged after offset ``start``."""
    assert server.access_log is not None
    with open(server.access_log, "rb") as fh:
        fh.seek(start)
        lines = fh.read().decode("utf-8", errors="replace").splitlines()
    # OWNER BUCKET [DAY:TIME ZONE] IP REQUESTER ID OPERATION KEY ... (bench/s3_access_log.py)
    return [(fields[7], fields[8]) for fields in (line.split(" ") for line in lines) if len(fields) > 8]


def access_mark(server: S3Server) -> int:
    """Where the access log ends now (for :func:`requests_since`)."""
    assert server.access_log is not None
    return server.access_log.stat().st_size if server.access_log.exists() else 0
