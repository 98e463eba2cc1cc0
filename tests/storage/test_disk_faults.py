"""Writes on a full or read-only data dir: a real tmpfs (tests/tmpfs.py), real Delta tables.

TableAppender: a commit that did not make it into the log is not a version and its retry stores
its rows once; a commit that landed although delta-rs raised is found, not made again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from sharedsub.storage import delta, schemas
from tests.tmpfs import Tmpfs

PAGE = 4096


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Tmpfs]:
    with Tmpfs(tmp_path / "mnt", size="16m") as fs:
        yield fs


def _rows(first: int, n: int = 5, size: int = 20000) -> pa.Table:
    cols: dict[str, list[object]] = {name: [None] * n for name in schemas.TOPIC.names}
    cols.update(
        seq=list(range(first, first + n)),
        published_at=[dt.datetime(2025, 1, 1, tzinfo=dt.UTC)] * n,
        message=[bytes([i % 256]) * size for i in range(first, first + n)],
        routing_key=[""] * n,
        publisher=[""] * n,
        partition=[0] * n,
        size=[size] * n,
    )
    return pa.Table.from_pydict(cols, schema=schemas.TOPIC)


def _seqs(table: str) -> list[int]:
    data = delta.read_table(table, ["seq"])
    return sorted(data.column("seq").to_pylist()) if data is not None else []


def _data_files(table: str) -> int:
    return sum(1 for name in Path(table).iterdir() if name.suffix == ".parquet")


def test_a_commit_whose_log_entry_did_not_fit_is_no_version_and_its_retry_stores_its_rows_once(disk: Tmpfs) -> None:
    # Leave 0, 1, 2, ... pages free: with few, the data file does not fit; with some more the data
    # file is written and the log entry is not (the partial commit); with enough, it commits.
    outcomes = []
    for pages in range(8):
        table = delta.create_topic(str(disk.path / f"d{pages}"), "t")
        appender = delta.TableAppender(table, schemas.TOPIC, fsync=True)
        appender.append(_rows(0))
        disk.fill(leave=pages * PAGE)
        try:
            appender.append(_rows(5), commit_id="c1")
            outcomes.append("committed")
        except Exception:
            partial = _data_files(table) == 2  # the new data file is there, its commit is not
            outcomes.append("partial" if partial else "nothing written")
            assert delta.latest_version(table) == 1, "a failed commit must not be a version"
            assert delta.last_seq(table) == 4, "the next seq comes from committed versions only"
            disk.release()
            assert appender.append(_rows(5), commit_id="c1") == 2
        disk.release()
        assert _seqs(table) == list(range(10)), pages  # each row once, seqs as assigned
    assert "partial" in outcomes, outcomes  # the case under test did happen
    assert outcomes[-1] == "committed", outcomes


def test_a_commit_that_landed_although_delta_rs_raised_is_not_made_again(disk: Tmpfs) -> None:
    """delta-rs (1.6.6) checkpoints after every 100th commit, after the log entry is in place;
    with no space for the checkpoint the append raises for a commit that is visible. Blindly
    retried, its rows would be stored twice; the commit id finds it instead."""
    table = delta.create_topic(str(disk.path / "d"), "t")
    appender = delta.TableAppender(table, schemas.TOPIC, fsync=True)
    for i in range(98):
        before = disk.free_bytes()
        appender.append(_rows(5 * i, size=100))
        used = before - disk.free_bytes()
    disk.fill(leave=used)  # room for one more commit, not for a checkpoint besides
    assert appender.append(_rows(5 * 98, size=100), commit_id="c99") == 99
    disk.release()
    assert _seqs(table) == list(range(5 * 99))
    assert appender.append(_rows(5 * 99, size=100)) == 100  # and the appender goes on
