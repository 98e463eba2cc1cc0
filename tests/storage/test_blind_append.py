"""Blind appends (sharedsub.storage.delta.blind_append) on real tables: what delta-rs, the log readers
and the statistics readers see of them, and how they live beside other writers."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from sharedsub.storage import schemas
from sharedsub.storage.delta import blind_append, log_snapshot
from sharedsub.storage.delta.appender import COMMIT_MARK, DeltaAppender
from sharedsub.storage.delta.blind_append import FastPathAppender, TableChanged
from sharedsub.storage.delta.commit_log import read_log_entry
from sharedsub.storage.delta.table_maintenance import compact, delete_rows
from sharedsub.storage.delta.table_reads import read_table
from sharedsub.storage.delta.tables import log_file
from sharedsub.storage.topics import topic_files

T0 = dt.datetime(2026, 11, 24, 13, 0, 0, 123456, tzinfo=dt.UTC)


def _acks(seqs: range) -> pa.Table:
    n = len(seqs)
    stamps = [T0 + dt.timedelta(seconds=s) for s in seqs]
    return pa.table(
        {"seq": list(seqs), "outcome": ["accepted"] * n, "acked_at": stamps, "consumer": [None] * n}, schema=schemas.ACK
    )


def _entry_actions(table: str, version: int) -> list[dict[str, object]]:
    with open(log_file(table, version), encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def test_appends_are_delta_commits_every_reader_takes(tmp_path: Path) -> None:
    table = str(tmp_path / "acks")
    write_deltalake(table, _acks(range(0, 2)))  # version 0, made by delta-rs
    appender = FastPathAppender(table, schemas.ACK, commit_mark=COMMIT_MARK)

    assert appender.append(_acks(range(2, 5)), "m1") == 1
    assert appender.append(_acks(range(5, 9)), "m2") == 2

    # delta-rs reads the rows, in order, with their types.
    data = read_table(table, ["seq", "acked_at", "consumer"])
    assert data is not None and sorted(data.column("seq").to_pylist()) == list(range(9))
    assert DeltaTable(table).version() == 2
    # The commit file: commitInfo with the marker first, one add with the file's size and stats.
    entry = read_log_entry(table, 2)
    assert entry is not None and entry.info[COMMIT_MARK] == "m2" and len(entry.added) == 1
    assert entry.info["operation"] == "WRITE" and entry.info["isBlindAppend"] is True
    actions = _entry_actions(table, 2)
    assert list(actions[0]) == ["commitInfo"] and list(actions[1]) == ["add"]
    add = actions[1]["add"]
    assert isinstance(add, dict) and add["size"] == os.path.getsize(entry.added[0]) and add["dataChange"] is True
    stats = json.loads(str(add["stats"]))
    assert stats["numRecords"] == 4
    assert stats["minValues"]["seq"] == 5 and stats["maxValues"]["seq"] == 8 and stats["nullCount"]["seq"] == 0
    # Timestamps as delta-rs writes them: UTC, milliseconds.
    assert stats["minValues"]["acked_at"] == "2026-11-24T13:00:05.123Z"
    assert stats["maxValues"]["acked_at"] == "2026-11-24T13:00:08.123Z"
    assert "consumer" not in stats["minValues"]  # strings carry no statistics here


def test_topic_statistics_serve_the_seq_and_age_readers(tmp_path: Path) -> None:
    table = str(tmp_path / "topic")
    first = pa.table({f.name: pa.nulls(1, f.type) for f in schemas.TOPIC})
    first = first.set_column(0, "seq", pa.array([0], pa.int64()))
    write_deltalake(table, first)
    rows = first.set_column(0, "seq", pa.array([7], pa.int64()))
    stamp = pa.array([T0], schemas.TOPIC.field("published_at").type)
    rows = rows.set_column(rows.schema.get_field_index("published_at"), "published_at", stamp)
    FastPathAppender(table, schemas.TOPIC, commit_mark=COMMIT_MARK).append(rows, "m")

    _, files = topic_files(table)
    mine = [f for f in files if f.first_seq == 7]
    assert len(mine) == 1 and mine[0].last_seq == 7
    assert mine[0].newest_published_ms == int(T0.replace(microsecond=123000).timestamp() * 1000)  # truncated to ms


def test_other_writers_commits_are_stepped_over_and_a_metadata_change_is_refused(tmp_path: Path) -> None:
    table = str(tmp_path / "acks")
    write_deltalake(table, _acks(range(0, 10)))
    appender = FastPathAppender(table, schemas.ACK, commit_mark=COMMIT_MARK)
    appender.append(_acks(range(10, 20)), "a")  # version 1
    # Maintenance's kinds of commit meanwhile: a delete (version 2) and a compaction (version 3).
    delete_rows(table, "seq <= 4", "acknowledged")
    compact(table)
    assert DeltaTable(table).version() == 3

    assert appender.append(_acks(range(20, 25)), "b") == 4
    data = read_table(table, ["seq"])
    assert data is not None and sorted(data.column("seq").to_pylist()) == list(range(5, 25))

    # A metadata commit (table properties) meanwhile: this append refuses; DeltaAppender then
    # commits through delta-rs, and the next blind append goes on after it.
    DeltaTable(table).alter.set_table_properties({"delta.logRetentionDuration": "interval 2 hours"})
    with pytest.raises(TableChanged):
        appender.append(_acks(range(25, 26)), "c")
    both = DeltaAppender(table, schemas.ACK)
    assert both.append(_acks(range(25, 27)), commit_id="d") == 6  # delta-rs (after the property commit)
    assert both.append(_acks(range(27, 28)), commit_id="e") == 7  # blind again
    assert read_log_entry(table, 7) is not None and read_log_entry(table, 7).info.get("isBlindAppend") is True  # type: ignore[union-attr]
    data = read_table(table, ["seq"])
    assert data is not None and sorted(data.column("seq").to_pylist()) == list(range(5, 28))


def test_a_checkpoint_every_interval_and_tables_it_cannot_write(tmp_path: Path) -> None:
    table = str(tmp_path / "acks")
    write_deltalake(table, _acks(range(0, 1)))
    appender = FastPathAppender(table, schemas.ACK, commit_mark=COMMIT_MARK)
    for v in range(1, blind_append.CHECKPOINT_INTERVAL + 1):
        assert appender.append(_acks(range(v, v + 1)), f"m{v}") == v
    deadline = time.monotonic() + 60
    while appender.checkpointing():  # written on its own thread
        assert time.monotonic() < deadline, "the checkpoint did not finish in 60 s"
        time.sleep(0.01)
    checkpoint = log_file(table, blind_append.CHECKPOINT_INTERVAL).replace(".json", ".checkpoint.parquet")
    assert os.path.exists(checkpoint)
    assert DeltaTable(table).version() == blind_append.CHECKPOINT_INTERVAL

    partitioned = str(tmp_path / "partitioned")
    write_deltalake(partitioned, _acks(range(0, 2)), partition_by=["outcome"])
    refused = FastPathAppender(partitioned, schemas.ACK, commit_mark=COMMIT_MARK)
    for attempt in ("p1", "p2"):  # the second without looking at the table again
        with pytest.raises(TableChanged):
            refused.append(_acks(range(2, 3)), attempt)
    assert DeltaAppender(partitioned, schemas.ACK).append(_acks(range(2, 4)), commit_id="q") == 1  # delta-rs
    with pytest.raises(TableChanged):  # no table there yet: delta-rs creates it
        FastPathAppender(str(tmp_path / "none"), schemas.ACK, commit_mark=COMMIT_MARK).append(_acks(range(1)), "n")


def test_checkpoints_are_made_from_the_entries_held_as_delta_rs_makes_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    interval = blind_append.CHECKPOINT_INTERVAL
    table = str(tmp_path / "acks")
    write_deltalake(table, _acks(range(0, 4)))
    appender = FastPathAppender(table, schemas.ACK, commit_mark=COMMIT_MARK)
    caplog.set_level(logging.INFO, logger=blind_append.__name__)
    seq = 4
    while (DeltaTable(table).version()) < 2 * interval + 1:
        appender.append(_acks(range(seq, seq + 1)), f"m{seq}")
        seq += 1
        if seq in (interval // 2, interval + 10):  # maintenance's commits, stepped over and held
            delete_rows(table, f"seq <= {seq - 30}", "acknowledged")
            compact(table)
    appender.finish(60)
    assert not [r for r in caplog.records if "through delta-rs" in r.getMessage() or "failed" in r.getMessage()]

    copy = str(tmp_path / "copy")  # the same log, checkpointed by delta-rs
    shutil.copytree(table, copy)
    for version in (interval, 2 * interval):
        ours = pq.read_table(log_file(table, version).replace(".json", ".checkpoint.parquet"))
        for name in os.listdir(os.path.join(copy, "_delta_log")):
            if "checkpoint" in name:
                os.unlink(os.path.join(copy, "_delta_log", name))
        DeltaTable(copy, version=version).create_checkpoint()
        theirs = pq.read_table(log_file(copy, version).replace(".json", ".checkpoint.parquet"))
        assert sorted(map(json.dumps, ours.to_pylist())) == sorted(map(json.dumps, theirs.to_pylist())), version
        adds = [[r["add"]["path"] for r in t.to_pylist() if r["add"]] for t in (ours, theirs)]
        assert adds[0] == adds[1], version
    latest = DeltaTable(table)
    snapshot = log_snapshot.read_snapshot(table, latest.version())
    assert [os.path.basename(f.path) for f in snapshot.files] == [os.path.basename(u) for u in latest.file_uris()]


def test_an_app_transaction_is_recorded_with_the_rows(tmp_path: Path) -> None:
    table = str(tmp_path / "sub")
    appender = DeltaAppender(table, schemas.ACK)
    appender.append(_acks(range(0, 2)), app_transaction=("fanout", 3))  # creates the table: delta-rs
    appender.append(_acks(range(2, 4)), app_transaction=("fanout", 4))  # blind
    entry = read_log_entry(table, 1)
    assert entry is not None and entry.info.get("isBlindAppend") is True and entry.transactions == {"fanout": 4}
    assert DeltaTable(table).transaction_version("fanout") == 4
    assert DeltaAppender(table, schemas.ACK).transaction_version("fanout") == 4
    assert appender.transaction_version("fanout") == 4


def test_with_fsync_what_a_commit_names_is_on_disk_before_its_version_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A power loss between the commit taking its version and the syncs would otherwise leave a
    version whose data file (or content) never reached the disk: a table no reader loads. The
    order of the real calls is recorded (each is made as it would be): the data file, the table
    directory and the commit file's content are synced before the link that takes the version;
    only the log directory after it. Four syncs, as before."""
    table = str(tmp_path / "acks")
    write_deltalake(table, _acks(range(0, 2)))
    calls: list[tuple[str, str]] = []
    real_fsync, real_link = blind_append.fsync_path, os.link

    def fsync(path: str, *, directory: bool = False) -> None:
        calls.append(("fsync", os.path.relpath(path, table)))
        real_fsync(path, directory=directory)

    def link(src: str, dst: str) -> None:
        calls.append(("link", os.path.relpath(dst, table)))
        real_link(src, dst)

    monkeypatch.setattr(blind_append, "fsync_path", fsync)
    monkeypatch.setattr("sharedsub.storage.delta.appender.fsync_path", fsync)
    monkeypatch.setattr(blind_append.os, "link", link)
    version = DeltaAppender(table, schemas.ACK, fsync=True).append(_acks(range(2, 5)))
    entry = read_log_entry(table, version)
    assert version == 1 and entry is not None and len(entry.added) == 1
    data_file = os.path.relpath(entry.added[0], table)
    assert [c[0] for c in calls] == ["fsync", "fsync", "fsync", "link", "fsync"], calls
    assert calls[0] == ("fsync", data_file) and calls[1] == ("fsync", ".")
    assert calls[2][1].startswith("_delta_log/_commit_") and calls[3] == ("link", "_delta_log/00000000000000000001.json")
    assert calls[4] == ("fsync", "_delta_log")
