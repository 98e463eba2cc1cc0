"""Fixtures for the end-to-end tier: one real ``sharedsub serve`` shared by the module's tests."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from sharedsub.storage.topics import create_topic
from tests.service import ServeProcess


@pytest.fixture(scope="session")
def service(client_tier_serve: ServeProcess) -> ServeProcess:
    """A running ``sharedsub serve`` on a free port, shared across the e2e session: the session's
    default serve on a local data dir (tests/conftest.py), which the client tiers drive after the
    e2e tier; it must stop cleanly when the session ends."""
    return client_tier_serve


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
