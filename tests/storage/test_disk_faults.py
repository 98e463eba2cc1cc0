"""Writes on a full or read-only data dir: a real tmpfs (tests/tmpfs.py), real Delta tables.

DeltaAppender: a commit that did not make it into the log is not a version and its retry stores
its rows once; a commit that landed although delta-rs raised is found, not made again. Committer:
held writes go through once space returns (nothing lost, seqs gap-free and assigned once);
past full_disk_timeout publishes are refused with StorageUnavailable and settlement records
are parked, then written once the data dir takes writes again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import proton
import pyarrow as pa
import pytest

from sharedsub.core import layout
from sharedsub.core.errors import StorageUnavailable
from sharedsub.runtime.commit_requests import Ack, Barrier, Publish
from sharedsub.runtime.committer import Committer
from sharedsub.runtime.payloads import PayloadCache
from sharedsub.storage import schemas
from sharedsub.storage.commits.append_process import AppendProcess
from sharedsub.storage.commits.commit_store import DeltaStore
from sharedsub.storage.delta.appender import DeltaAppender
from sharedsub.storage.delta.commit_log import latest_version
from sharedsub.storage.delta.table_reads import read_table
from sharedsub.storage.topics import create_topic, last_seq
from tests.amqp_peer import wait_for
from tests.builders import publish_request
from tests.storage.test_committer import Collector
from tests.tmpfs import Tmpfs

PAGE = 4096
ACKS = "subscriptions/k/acks-g1"


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
    data = read_table(table, ["seq"])
    return sorted(data.column("seq").to_pylist()) if data is not None else []


def _data_files(table: str) -> int:
    return sum(1 for name in Path(table).iterdir() if name.suffix == ".parquet")


def test_a_commit_whose_log_entry_did_not_fit_is_no_version_and_its_retry_stores_its_rows_once(disk: Tmpfs) -> None:
    # Leave 0, 1, 2, ... pages free: with few, the data file does not fit; with some more the data
    # file is written and the log entry is not (the partial commit); with enough, it commits.
    outcomes = []
    for pages in range(8):
        table = create_topic(str(disk.path / f"d{pages}"), "t")
        appender = DeltaAppender(table, schemas.TOPIC, fsync=True)
        appender.append(_rows(0))
        disk.fill(leave=pages * PAGE)
        try:
            appender.append(_rows(5), commit_id="c1")
            outcomes.append("committed")
        except Exception:
            partial = _data_files(table) == 2  # the new data file is there, its commit is not
            outcomes.append("partial" if partial else "nothing written")
            assert latest_version(table) == 1, "a failed commit must not be a version"
            assert last_seq(table) == 4, "the next seq comes from committed versions only"
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
    table = create_topic(str(disk.path / "d"), "t")
    appender = DeltaAppender(table, schemas.TOPIC, fsync=True)
    for i in range(98):
        before = disk.free_bytes()
        appender.append(_rows(5 * i, size=100))
        used = before - disk.free_bytes()
    disk.fill(leave=used)  # room for one more commit, not for a checkpoint besides
    assert appender.append(_rows(5 * 98, size=100), commit_id="c99") == 99
    disk.release()
    assert _seqs(table) == list(range(5 * 99))
    assert appender.append(_rows(5 * 99, size=100)) == 100  # and the appender goes on


# --------------------------------------------------------------------------- committer


def _publish(i: int) -> Publish:
    return publish_request("t", proton.Message(body=f"m{i}"), i)


@pytest.fixture(params=["in-thread", "append-process"])
def appends(request: pytest.FixtureRequest) -> AppendProcess | None:
    """The committer's two ways to commit: on its thread, or in the append child process."""
    return AppendProcess() if request.param == "append-process" else None


def _committer(root: Path, done: Collector, timeout: float, appends: AppendProcess | None = None) -> Committer:
    create_topic(str(root), "t")
    c = Committer(
        DeltaStore(str(root), fsync=True, appends=appends), cache=PayloadCache(1 << 20), on_done=done, full_disk_timeout=timeout
    )
    c.start()
    return c


def test_publishes_are_held_while_the_disk_is_full_and_stored_once_when_space_returns(
    disk: Tmpfs, appends: AppendProcess | None
) -> None:
    done = Collector()
    c = _committer(disk.path / "data", done, timeout=3600, appends=appends)
    try:
        disk.fill()
        for i in range(300):
            c.submit(_publish(i))
        wait_for(lambda: c.fault is not None, 60, "the committer to see the full disk")
        status = c.storage_status()
        assert (status["writable"], status["errno"], status["refusing"]) == (False, "ENOSPC", False)
        assert c.write_errors["ENOSPC"] >= 1
        assert done.results == []  # nothing can be committed while full: all held, none refused
        disk.release()
        results = done.wait(300)
    finally:
        c.stop()
    assert [r.error for r in results] == [None] * 300
    assert sorted(r.value for r in results) == list(range(300))  # gap-free, each seq once
    assert _seqs(layout.topic_table(str(disk.path / "data"), "t")) == list(range(300))
    assert c.fault is None and c.storage_status() == {"writable": True, "parked": 0}


def test_past_the_timeout_publishes_are_refused_and_acks_parked_until_space_returns(
    disk: Tmpfs, appends: AppendProcess | None
) -> None:
    done = Collector()
    root = disk.path / "data"
    c = _committer(root, done, timeout=0.5, appends=appends)
    try:
        c.submit(_publish(0))
        done.wait(1)
        disk.read_only()
        c.submit(Ack(ACKS, [0], "accepted", "c1", token="ack"))
        c.submit(Barrier(token="barrier"))  # answers once the ack before it is written
        c.submit(_publish(1))
        refused = done.wait(2)[1]
        assert refused.request.token == 1 and isinstance(refused.error, StorageUnavailable)
        assert str(refused.error.condition) == "amqp:resource-limit-exceeded"
        assert refused.error.description.startswith(f"data dir {root} cannot take writes: Read-only file system (EROFS)")
        assert "storage.full_disk_timeout is 0.5 s" in refused.error.description
        status = c.storage_status()
        assert (status["writable"], status["errno"], status["refusing"], status["parked"]) == (False, "EROFS", True, 2)
        assert len(done.results) == 2  # the ack and the barrier are parked, not failed
        disk.read_write()
        c.submit(_publish(2))
        results = done.wait(5)
    finally:
        c.stop()
    tokens = [r.request.token for r in results[2:]]
    assert tokens.index("ack") < tokens.index("barrier")  # the parked ack went first
    assert all(r.error is None for r in results[2:]), results
    by_token = {r.request.token: r for r in results}
    assert by_token[2].value == 1  # seq 1 was never used by the refused publish
    acks = read_table(layout.join(str(root), ACKS), ["seq", "outcome"])
    assert acks is not None and acks.to_pylist() == [{"seq": 0, "outcome": "accepted"}]
    assert c.fault is None


# --------------------------------------------------------------------------- maintenance


def test_maintenance_on_a_read_only_data_dir_logs_one_line_for_the_run(disk: Tmpfs, caplog: pytest.LogCaptureFixture) -> None:
    from sharedsub.runtime.maintenance import run_once
    from tests.builders import maintenance_policy

    root = disk.path / "data"
    table = create_topic(str(root), "t")
    appender = DeltaAppender(table, schemas.TOPIC)
    for i in range(4):
        appender.append(_rows(5 * i, size=100))
    policy = maintenance_policy(compact_min_files=2, history_retention_hours=0, topic_retention_hours=0)
    disk.read_only()
    with caplog.at_level("WARNING", logger="sharedsub.runtime.maintenance"):
        report = run_once(str(root), policy)
    assert report.storage_fault == "Read-only file system (EROFS)" and report.errors >= 1
    lines = [r.getMessage() for r in caplog.records if r.name == "sharedsub.runtime.maintenance"]
    assert len(lines) == 1 and "takes no writes (Read-only file system (EROFS))" in lines[0], lines
