"""Fixtures for the end-to-end tier: one real ``sharedsub serve`` shared by the module's tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sharedsub.storage.topics import create_topic
from tests.service import ServeProcess


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """A running ``sharedsub serve`` on a free port, shared across the e2e session."""
    data = tmp_path_factory.mktemp("serve-data")
    proc = ServeProcess(data).start()
    try:
        yield proc
    finally:
        code = proc.stop()
        assert code == 0, f"serve exited with {code}:\n{proc.log()[-4000:]}"


@pytest.fixture
def topic(service: ServeProcess) -> str:
    """A fresh topic created while the service runs (it must pick it up without a restart)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    create_topic(str(service.data_dir), name)
    return name


@pytest.fixture
def data_dir(service: ServeProcess) -> Path:
    """The shared service's data dir."""
    return service.data_dir
