"""Spark tier fixtures: ONE local SparkSession for the whole session (start-up costs 4-9 s here).

Test data builders live in tests/builders.py (no pyspark there, any tier can use them).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyspark.sql import SparkSession

from jobs.fanout import build_fanout_query
from jobs.fanout_sink import FanoutSink
from jobs.session import build_session
from sharedsub.core.config import Settings, parse_settings


def make_settings(root: str, **fanout: Any) -> Settings:
    """Settings for a data dir ``root``; ``fanout`` overrides [fanout] keys."""
    return parse_settings({"storage": {"data_dir": root}, "fanout": fanout}, environ={})


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    # S3A's jars asked for: tests/spark/test_s3a_reads.py reads a bucket beside a local data dir.
    session = build_session(make_settings("unused"), app_name="sharedsub-tests", s3a=True)
    yield session
    session.stop()


@pytest.fixture
def root(tmp_path: Any) -> str:
    """An empty data dir."""
    return str(tmp_path / "data")


def run_available_now(
    spark: SparkSession,
    settings: Settings,
    *,
    sink: FanoutSink | None = None,
    checkpoint: str | None = None,
    timeout: int = 120,
) -> None:
    """Run the fan-out query with Trigger.AvailableNow until it stops; raise if it failed."""
    sink = sink or FanoutSink(settings.data_dir)
    query = build_fanout_query(spark, settings, checkpoint=checkpoint, available_now=True, sink=sink)
    try:
        assert query.awaitTermination(timeout), f"available-now query still running after {timeout} s"
    finally:
        if query.isActive:
            query.stop()
        sink.close()


def wait_until(condition: Callable[[], Any], timeout: float = 60.0, interval: float = 0.1, what: str = "") -> Any:
    """Poll ``condition`` until it returns something truthy; return it, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what or condition}")
        time.sleep(interval)
