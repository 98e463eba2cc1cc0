"""sharedsub.runtime.process.memprofile: off without its variable; counters lines, and snapshots when tracing."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

from sharedsub.runtime.process import memprofile


def _lines(directory: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (directory / "memory.jsonl").read_text().splitlines()]


def test_off_without_the_variable() -> None:
    assert memprofile.start_from_env({"SHAREDSUB_OTHER": "x"}) is None
    assert not tracemalloc.is_tracing()


def test_counters_only_with_zero_frames(tmp_path: Path) -> None:
    env = {memprofile.ENV_DIR: str(tmp_path), memprofile.ENV_FRAMES: "0", memprofile.ENV_INTERVAL: "3600"}
    profiler = memprofile.start_from_env(env)
    assert profiler is not None
    try:
        assert not tracemalloc.is_tracing()
        profiler.take()
    finally:
        profiler.stop()
    [line] = _lines(tmp_path)
    assert isinstance(line["rss"], int) and line["rss"] > 0
    assert "snapshot" not in line and "traced" not in line
    assert list(tmp_path.glob("*.tracemalloc")) == []


def test_snapshots_when_tracing(tmp_path: Path) -> None:
    env = {memprofile.ENV_DIR: str(tmp_path), memprofile.ENV_FRAMES: "4", memprofile.ENV_INTERVAL: "3600"}
    profiler = memprofile.start_from_env(env)
    assert profiler is not None
    try:
        profiler.take()
    finally:
        profiler.stop()
        tracemalloc.stop()
    [line] = _lines(tmp_path)
    assert line["snapshot"] == "snap-000.tracemalloc"
    assert isinstance(line["traced"], int) and line["traced"] > 0
    snapshot = tracemalloc.Snapshot.load(str(tmp_path / "snap-000.tracemalloc"))
    assert snapshot.traceback_limit == 4
