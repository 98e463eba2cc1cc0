"""Fixtures of the storage tier: an object store of each implementation, and a data dir on an S3
server whose access log counts requests (``counted``, tests/conftest.py)."""

from __future__ import annotations

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


@pytest.fixture
def counted_root(counted: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """A data dir on ``counted``, with its AWS variables set for the test."""
    for name, value in counted.env().items():
        monkeypatch.setenv(name, value)
    return counted.url("data")
