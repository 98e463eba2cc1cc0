"""A synced blind append's files made ahead (sharedsub.storage.delta.prepared_commit), on real
tables: what a commit that uses them syncs and in which order, what is left beside the table,
when they are not used, and the append child making them after it answered."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from sharedsub.core import layout
from sharedsub.storage import retention, schemas
from sharedsub.storage.commits.append_process import MAX_AHEAD, AppendProcess
from sharedsub.storage.commits.py_columns import PyColumns, as_table
from sharedsub.storage.delta import blind_append, prepared_commit
from sharedsub.storage.delta.appender import COMMIT_MARK, DeltaAppender
from sharedsub.storage.delta.blind_append import FastPathAppender
from sharedsub.storage.delta.commit_log import read_log_entry
from sharedsub.storage.delta.table_reads import read_table
from tests.amqp_peer import wait_for

T0 = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)


def _acks(seqs: range) -> pa.Table:
    n = len(seqs)
    return pa.table(
        {"seq": list(seqs), "outcome": ["accepted"] * n, "acked_at": [T0] * n, "consumer": [None] * n}, schema=schemas.ACK
    )


def _table(tmp_path: Path) -> str:
    table = str(tmp_path / "acks")
    write_deltalake(table, _acks(range(0, 2)))  # version 0, made by delta-rs
    return table


def _beside(table: str) -> tuple[list[str], list[str]]:
    """(data files of no bytes in the table's directory, temporary commit files beside its log)."""
    empty = [n for n in os.listdir(table) if n.endswith(".parquet") and os.path.getsize(os.path.join(table, n)) == 0]
    temps = [n for n in os.listdir(os.path.join(table, "_delta_log")) if n.endswith(prepared_commit.TEMP_SUFFIX)]
    return empty, temps


def _seqs(table: str) -> list[int]:
    data = read_table(table, ["seq"])
    return sorted(data.column("seq").to_pylist()) if data is not None else []


def test_a_commit_made_ahead_syncs_its_two_files_before_its_version_and_leaves_nothing_beside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The data file's name is made durable when it is made (its directory fsynced then); the
    commit writes into both files, forces both to disk, and only then links its version; the
    log directory after the link, as every synced commit. The real calls are made."""
    table = _table(tmp_path)
    calls: list[tuple[str, object]] = []
    real_fsync, real_together, real_link = prepared_commit.fsync_path, blind_append.fsync_together, os.link

    def fsync(path: str, *, directory: bool = False) -> None:
        calls.append(("fsync", os.path.relpath(path, table)))
        real_fsync(path, directory=directory)

    def together(first: int, second: int) -> None:
        names = {os.path.relpath(os.readlink(f"/proc/self/fd/{fd}"), table) for fd in (first, second)}
        calls.append(("fsync together", names))
        real_together(first, second)

    def link(src: str, dst: str) -> None:
        calls.append(("link", os.path.relpath(dst, table)))
        real_link(src, dst)

    monkeypatch.setattr(prepared_commit, "fsync_path", fsync)
    monkeypatch.setattr(blind_append, "fsync_path", fsync)
    monkeypatch.setattr("sharedsub.storage.delta.appender.fsync_path", fsync)
    monkeypatch.setattr(blind_append, "fsync_together", together)
    monkeypatch.setattr(blind_append.os, "link", link)
    appender = DeltaAppender(table, schemas.ACK, fsync=True)
    appender.prepare()
    assert calls == [("fsync", ".")]
    empty, temps = _beside(table)
    assert len(empty) == 1 and len(temps) == 1

    version = appender.append(_acks(range(2, 5)))
    entry = read_log_entry(table, version)
    assert version == 1 and entry is not None and [os.path.basename(p) for p in entry.added] == empty
    assert calls[1:] == [
        ("fsync together", {empty[0], f"_delta_log/{temps[0]}"}),
        ("link", "_delta_log/00000000000000000001.json"),
        ("fsync", "_delta_log"),
    ]
    assert _beside(table) == ([], [])
    assert _seqs(table) == list(range(5)) and DeltaTable(table).version() == 1
    # An append without files made ahead takes the usual path (four syncs).
    appender.append(_acks(range(5, 7)))
    assert [c[0] for c in calls[4:]] == ["fsync", "fsync", "fsync", "link", "fsync"]
    assert _seqs(table) == list(range(7))


def test_files_made_ahead_are_not_used_once_stale_or_removed_and_go_with_finish(tmp_path: Path) -> None:
    table = _table(tmp_path)
    appender = FastPathAppender(table, schemas.ACK, commit_mark=COMMIT_MARK, sync=True)

    # Stale: removed, and the commit makes its own files.
    appender.prepare()
    (stale,), _ = _beside(table)
    assert appender._prepared is not None
    appender._prepared = dataclasses.replace(appender._prepared, made=time.monotonic() - prepared_commit.FRESH_FOR - 1)
    version = appender.append(_acks(range(2, 4)), "m1")
    entry = read_log_entry(table, version)
    assert entry is not None and os.path.basename(entry.added[0]) != stale
    assert not os.path.exists(os.path.join(table, stale)) and _beside(table) == ([], [])

    # Removed under it (as a vacuum with no retention would): not written, the commit's own file named.
    appender.prepare()
    (gone,), _ = _beside(table)
    os.unlink(os.path.join(table, gone))
    version = appender.append(_acks(range(4, 6)), "m2")
    entry = read_log_entry(table, version)
    assert entry is not None and os.path.exists(entry.added[0]) and os.path.basename(entry.added[0]) != gone
    assert _beside(table) == ([], [])
    assert _seqs(table) == list(range(6))

    # finish removes them; the appender appends after it as before.
    appender.prepare()
    assert _beside(table) != ([], [])
    appender.finish()
    assert _beside(table) == ([], [])
    appender.append(_acks(range(6, 7)), "m3")
    assert _seqs(table) == list(range(7))


def test_nothing_is_made_ahead_without_sync_or_for_a_table_not_there(tmp_path: Path) -> None:
    table = _table(tmp_path)
    FastPathAppender(table, schemas.ACK, commit_mark=COMMIT_MARK).prepare()
    assert _beside(table) == ([], [])
    missing = str(tmp_path / "none")
    FastPathAppender(missing, schemas.ACK, commit_mark=COMMIT_MARK, sync=True).prepare()
    assert not os.path.exists(missing)


def test_a_synced_writer_removes_temporary_commit_files_left_long_ago(tmp_path: Path) -> None:
    table = _table(tmp_path)
    log_dir = os.path.join(table, "_delta_log")
    old, fresh = (os.path.join(log_dir, prepared_commit.temp_name()) for _ in range(2))
    other = os.path.join(log_dir, "_commit_not_ours.json")
    for path in (old, fresh, other):
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("{}")
    long_ago = time.time() - prepared_commit.STALE_TEMP_AFTER - 60
    os.utime(old, (long_ago, long_ago))
    os.utime(other, (long_ago, long_ago))
    FastPathAppender(table, schemas.ACK, commit_mark=COMMIT_MARK).ready()  # not synced: makes none, sweeps none
    assert os.path.exists(old)
    assert FastPathAppender(table, schemas.ACK, commit_mark=COMMIT_MARK, sync=True).ready() == 0
    assert not os.path.exists(old) and os.path.exists(fresh) and os.path.exists(other)


def test_retention_skips_an_empty_data_file_and_reads_it_once_written(tmp_path: Path) -> None:
    """A file made ahead is in the table's directory before its rows: it holds nothing then, and
    what it holds once written counts (it is not remembered as empty)."""
    table = str(tmp_path / "sub")
    write_deltalake(table, _acks(range(10, 12)))
    appender = FastPathAppender(table, schemas.ACK, commit_mark=COMMIT_MARK, sync=True)
    appender.prepare()
    assert len(_beside(table)[0]) == 1
    assert retention.lowest_retained_seqs(table) == {layout.partition_of_seq(10): 10}
    appender.append(_acks(range(3, 4)), "m")  # into the file made ahead
    assert _beside(table) == ([], [])
    assert retention.lowest_retained_seqs(table) == {layout.partition_of_seq(3): 3}


def test_column_lists_become_the_table_from_pydict_makes() -> None:
    """The committer's rows: columns of nulls alone are made without converting their values;
    the table is the one ``from_pydict`` makes, and a misfit value is refused as by it."""
    columns: dict[str, list[object]] = {name: [None, None] for name in schemas.TOPIC.names}
    columns["seq"] = [1, 2]
    columns["published_at"] = [T0, T0]
    columns["partition"] = [0, 0]
    columns["message"] = [b"a", b"b"]
    columns["application_properties"] = [{"k": {"type": "long", "long": 1}}, None]
    made = as_table(PyColumns(schemas.TOPIC, columns))
    assert made.equals(pa.Table.from_pydict(columns, schema=schemas.TOPIC)) and made.schema == schemas.TOPIC
    columns["seq"] = ["x", 2]
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError)):
        as_table(PyColumns(schemas.TOPIC, columns))
    columns["seq"] = [1]
    with pytest.raises(pa.ArrowInvalid):
        as_table(PyColumns(schemas.TOPIC, columns))


@pytest.fixture
def appends() -> Iterator[AppendProcess]:
    proc = AppendProcess()
    yield proc
    proc.stop()


def test_the_append_child_makes_the_next_commits_files_after_answering(tmp_path: Path, appends: AppendProcess) -> None:
    table = _table(tmp_path)
    appender = appends.appender(table, schemas.ACK, fsync=True)
    appender.append(_acks(range(2, 4)), commit_id="a")
    # Made after the answer: wait for them.
    wait_for(lambda: len(_beside(table)[0]) == 1 and len(_beside(table)[1]) == 1, 10, "the next commit's files")
    (ahead,), _ = _beside(table)
    version = appender.append(_acks(range(4, 6)), commit_id="b")
    entry = read_log_entry(table, version)
    assert entry is not None and [os.path.basename(p) for p in entry.added] == [ahead]
    assert _seqs(table) == list(range(6))
    # A child that ends (its pipe closed) removes the files it made ahead.
    wait_for(lambda: _beside(table)[0] != [], 10, "the following commit's files")
    appends.stop()
    assert _beside(table) == ([], [])


def test_a_killed_childs_files_made_ahead_do_not_stop_the_next(tmp_path: Path) -> None:
    """kill -9 leaves an empty data file and a temporary commit file behind; a new child appends
    beside them, every reader reads the table, and no version names the empty file."""
    table = str(tmp_path / "acks")
    write_deltalake(table, _acks(range(0, 2)))
    first = AppendProcess()
    first.appender(table, schemas.ACK, fsync=True).append(_acks(range(2, 3)), commit_id="a")
    wait_for(lambda: _beside(table) != ([], []), 10, "the next commit's files")
    left = _beside(table)
    pid = first.pid
    assert pid is not None
    os.kill(pid, 9)
    first.stop()
    assert _beside(table) == left
    second = AppendProcess()
    try:
        second.appender(table, schemas.ACK, fsync=True).append(_acks(range(3, 5)), commit_id="b")
    finally:
        second.stop()
    assert _seqs(table) == list(range(5))
    named: set[str] = set()
    for version in range(DeltaTable(table).version() + 1):
        entry = read_log_entry(table, version)
        assert entry is not None
        named.update(os.path.basename(p) for p in entry.added)
    assert not set(left[0]) & named
    assert DeltaTable(table).to_pyarrow_table().num_rows == 5  # delta-rs loads it


def test_the_child_keeps_files_ahead_for_the_tables_it_appended_to_last(tmp_path: Path, appends: AppendProcess) -> None:
    """The child keeps files made ahead for the MAX_AHEAD tables it appended to last, and removes
    the others' (a child appends to every topic)."""
    tables = []
    for i in range(MAX_AHEAD + 2):
        table = str(tmp_path / f"t{i}")
        write_deltalake(table, _acks(range(0, 1)))
        appends.appender(table, schemas.ACK, fsync=True).append(_acks(range(1, 2)), commit_id=f"c{i}")
        tables.append(table)
    appends.appender(tables[0], schemas.ACK, fsync=True).append(_acks(range(2, 3)), commit_id="again")

    def holding() -> list[int]:
        return [i for i, t in enumerate(tables) if _beside(t) != ([], [])]

    wait_for(lambda: holding() == [0, *range(3, MAX_AHEAD + 2)], 10, "the files ahead of the last tables only")
    assert _seqs(tables[0]) == [0, 1, 2]
