"""The direct Delta log reader (sharedsub.storage.delta.log_snapshot) against delta-rs, on real tables.

delta-rs is the oracle: after every step of a sequence of operations, the snapshot read from the
log (directly, through a cache kept across the steps, and through topic_files / snapshot_files /
latest_version) must have the version, id, protocol and files — in the same order, with the same
sizes and ``seq`` / ``published_at`` statistics — that ``DeltaTable`` and
``get_add_actions(flatten=True)`` give.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import threading
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, TableFeatures, write_deltalake
from deltalake.exceptions import DeltaError, TableNotFoundError

from sharedsub.storage import schemas
from sharedsub.storage.delta.appender import COMMIT_MARK, DeltaAppender
from sharedsub.storage.delta.blind_append import FastPathAppender
from sharedsub.storage.delta.commit_log import latest_version
from sharedsub.storage.delta.log_snapshot import Snapshot, SnapshotCache, UnsupportedLog, read_snapshot
from sharedsub.storage.delta.table_reads import snapshot_files
from sharedsub.storage.delta.tables import log_file
from sharedsub.storage.topics import SeqFile, topic_files

T0 = dt.datetime(2026, 11, 24, 13, 0, 0, 123456, tzinfo=dt.UTC)
ZERO_RETENTION = {"delta.logRetentionDuration": "interval 0 seconds"}

FileView = tuple[str, int, Any, Any, Any]
View = tuple[int, str, int, int, list[FileView]]


def _rows(seqs: range, *, distinct: bool = False) -> pa.Table:
    """Topic rows; ``published_at`` has microseconds (the statistics keep milliseconds).
    ``distinct``: publishers that do not compress (large files)."""
    n = len(seqs)
    data = pa.table({f.name: pa.nulls(n, f.type) for f in schemas.TOPIC})
    data = data.set_column(0, "seq", pa.array(list(seqs), pa.int64()))
    stamps = [T0 + dt.timedelta(seconds=s, microseconds=s * 7) for s in seqs]
    data = data.set_column(1, "published_at", pa.array(stamps, schemas.TIMESTAMP))
    publishers = [uuid.uuid4().hex if distinct else "p" for _ in seqs]
    return data.set_column(data.schema.get_field_index("publisher"), "publisher", pa.array(publishers, pa.string()))


def _oracle(table: str, version: int | None = None) -> View:
    """What delta-rs says of ``table`` at ``version``, in this module's terms (written out here,
    not taken from the module under test)."""
    loaded = DeltaTable(table, version=version) if version is not None else DeltaTable(table)
    actions = pa.table(loaded.get_add_actions(flatten=True))

    def column(name: str) -> list[Any]:
        return actions.column(name).to_pylist() if name in actions.column_names else [None] * actions.num_rows

    files = [
        (os.path.join(table, urllib.parse.unquote(p)), size, lo, hi, int(ts.timestamp() * 1000) if ts is not None else None)
        for p, size, lo, hi, ts in zip(
            column("path"), column("size_bytes"), column("min.seq"), column("max.seq"), column("max.published_at"), strict=True
        )
    ]
    assert [f[0] for f in files] == loaded.file_uris()  # the two delta-rs listings agree, in order
    protocol = loaded.protocol()
    return loaded.version(), loaded.metadata().id, protocol.min_reader_version, protocol.min_writer_version, files


def _view(snapshot: Snapshot) -> View:
    files = [(f.path, f.size, f.first_seq, f.last_seq, f.newest_published_ms) for f in snapshot.files]
    return snapshot.version, snapshot.table_id, snapshot.min_reader_version, snapshot.min_writer_version, files


def _check(table: str, cache: SnapshotCache) -> View:
    """Every reader of the latest snapshot agrees with delta-rs, and so does every version delta-rs
    can still load (those it cannot, the direct reader refuses and snapshot_files raises as
    delta-rs does). Returns delta-rs's view."""
    expected = _oracle(table)
    assert _view(read_snapshot(table)) == expected
    assert _view(cache.latest(table)) == expected
    version, _, _, _, files = expected
    assert topic_files(table) == (version, [SeqFile(p, lo, hi, ms) for p, _, lo, hi, ms in files])
    assert snapshot_files(table) == [f[0] for f in files]
    assert latest_version(table) == version
    for at in range(version + 1):
        try:
            old = _oracle(table, at)
        except DeltaError as exc:
            with pytest.raises(UnsupportedLog):
                read_snapshot(table, at)
            with pytest.raises(type(exc)):
                snapshot_files(table, at)
            continue
        assert _view(read_snapshot(table, at)) == old
        assert [f.path for f in read_snapshot(table, at, stats=False).files] == [f[0] for f in old[4]]
        assert snapshot_files(table, at) == [f[0] for f in old[4]]
    return expected


def _added_in(table: str, version: int) -> int:
    with open(log_file(table, version), encoding="utf-8") as fh:
        return sum('"add"' in line[:8] for line in fh)


def test_every_step_of_a_tables_life_reads_as_delta_rs_reads_it(tmp_path: Path) -> None:
    table = str(tmp_path.resolve() / "topic")
    cache = SnapshotCache()
    appender = DeltaAppender(table, schemas.TOPIC)
    blind = FastPathAppender(table, schemas.TOPIC, commit_mark=COMMIT_MARK)
    steps: list[tuple[str, Any]] = [
        ("create (delta-rs)", lambda: write_deltalake(table, _rows(range(0, 3)))),
        ("append (delta-rs)", lambda: write_deltalake(table, _rows(range(3, 6)), mode="append")),
        ("append (DeltaAppender, blind)", lambda: appender.append(_rows(range(6, 9)))),
        ("append with a txn (FastPathAppender)", lambda: blind.append(_rows(range(9, 12)), "m", [("fanout", 1)])),
        ("append of several files in one commit", lambda: write_deltalake(
            table, _rows(range(12, 20012), distinct=True), mode="append", target_file_size=200_000)),
        ("delete", lambda: DeltaTable(table).delete("seq <= 4 or (seq >= 100 and seq < 200)")),
        ("compact", lambda: DeltaTable(table).optimize.compact()),
        ("checkpoint", lambda: DeltaTable(table).create_checkpoint()),
        ("append after the checkpoint", lambda: appender.append(_rows(range(20012, 20015)))),
        ("delete after the checkpoint", lambda: DeltaTable(table).delete("seq = 7")),
        ("overwrite", lambda: write_deltalake(table, _rows(range(30000, 30004)), mode="overwrite")),
        ("append after the overwrite", lambda: appender.append(_rows(range(30004, 30006)))),
        ("log retention 0 (metaData)", lambda: DeltaTable(table).alter.set_table_properties(ZERO_RETENTION)),
        ("checkpoint again", lambda: DeltaTable(table).create_checkpoint()),
        ("log cleanup", lambda: DeltaTable(table).cleanup_metadata()),
        ("vacuum", lambda: DeltaTable(table).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)),
        ("append after the cleanup", lambda: appender.append(_rows(range(30006, 30009)))),
        ("delete everything", lambda: DeltaTable(table).delete("seq >= 0")),
        ("append to the empty table", lambda: blind.append(_rows(range(30009, 30010)), "n")),
    ]
    for name, step in steps:
        step()
        try:
            version = _check(table, cache)[0]
        except AssertionError as exc:
            raise AssertionError(f"after {name}: {exc}") from exc
        if name.startswith("append of several"):
            assert _added_in(table, version) > 1, "the commit was to add several files"
    assert not os.path.exists(log_file(table, 0)), "the early commits were to be cleaned from the log"
    assert cache.delta_rs_reads == 0  # never fell back


def test_timestamps_as_delta_rs_reads_them_whoever_wrote_them(tmp_path: Path) -> None:
    """delta-rs and the blind appender write milliseconds; other writers may write micro- or
    nanoseconds, offsets, no zone; instants before the epoch round differently (int truncates)."""
    table = str(tmp_path.resolve() / "t")
    write_deltalake(table, _rows(range(0, 3)))  # delta-rs: ms
    FastPathAppender(table, schemas.TOPIC, commit_mark=COMMIT_MARK).append(_rows(range(3, 5)), "b")  # ms
    spellings = [
        "2026-11-24T13:00:00.123456Z", "2026-11-24T13:00:00.123456789Z", "2026-11-24T13:00:00Z",
        "2026-11-24T13:00:00.1Z", "2026-11-24T13:00:00.123+02:00", "2026-11-24T13:00:00.123-05:30",
        "2026-11-24T13:00:00.123", "1969-12-31T23:59:59.9985Z", "1969-12-31T23:59:59.999999Z",
        "1900-01-01T00:00:00.000001Z", "2026-11-24T13:00:00.999999Z",
    ]
    for i, text in enumerate(spellings):
        stats = {"numRecords": 1, "minValues": {"seq": i}, "maxValues": {"seq": i, "published_at": text}}
        _hand_commit(table, f"h{i}.parquet", stats)
    cache = SnapshotCache()
    expected = _check(table, cache)
    newest = {os.path.basename(f[0]): f[4] for f in expected[4]}
    assert newest["h7.parquet"] == -1  # -1.5 ms: truncated towards zero, as int() does
    assert cache.delta_rs_reads == 0


def _hand_commit(table: str, name: str, stats: Any, extra: dict[str, Any] | None = None) -> int:
    """Commit a copy of one of the table's data files as ``name`` with the given statistics."""
    source = next(n for n in sorted(os.listdir(table)) if n.endswith(".parquet"))
    shutil.copy(os.path.join(table, source), os.path.join(table, name))
    version = DeltaTable(table).version() + 1
    add = {"path": name, "partitionValues": {}, "size": os.path.getsize(os.path.join(table, name)),
           "modificationTime": 1, "dataChange": True, "stats": stats if isinstance(stats, str) else json.dumps(stats)}
    add.update(extra or {})
    with open(log_file(table, version), "x", encoding="utf-8") as fh:
        fh.write(json.dumps({"commitInfo": {"timestamp": 1}}) + "\n" + json.dumps({"add": add}) + "\n")
    return version


@pytest.mark.parametrize(
    "stats",
    [
        {"minValues": {"seq": 1, "publisher": 5}},  # a number for a string column
        {"minValues": {"seq": 1, "publisher": {"a": 1}}},  # delta-rs then drops all the file's stats
        {"minValues": {"seq": 1}, "nullCount": {"seq": "a"}},
        {"numRecords": "a", "minValues": {"seq": 1}},
        {"minValues": {"seq": 1, "partition": 2**40}},  # out of int32
        {"minValues": {"seq": 5.0}, "maxValues": {"seq": 5.5}},
        {"maxValues": {"seq": 1, "published_at": "garbage"}},
        {"maxValues": {"seq": 1, "published_at": "2026-11-24T13:00Z"}},
        {"maxValues": {"seq": 1, "published_at": "2026-11-24T13:00:60Z"}},
        {"maxValues": {"seq": 1, "published_at": 1795525200123}},
        {"minValues": {"seq": 1}, "tightBounds": "x"},
        "not json",
    ],
)
def test_statistics_of_another_shape_are_left_to_delta_rs(tmp_path: Path, stats: Any) -> None:
    """delta-rs drops a file's statistics, or one value, or refuses the table: whichever it does,
    the readers here do the same, because they leave such statistics to it."""
    table = str(tmp_path.resolve() / "t")
    write_deltalake(table, _rows(range(0, 3)))
    _hand_commit(table, "odd.parquet", stats)
    with pytest.raises(UnsupportedLog):
        read_snapshot(table)
    assert [os.path.basename(f.path) for f in read_snapshot(table, stats=False).files][0] == "odd.parquet"
    cache = SnapshotCache()
    try:
        expected = _oracle(table)
    except DeltaError as exc:
        for read in (cache.latest, topic_files, latest_version):
            with pytest.raises(type(exc)):
                read(table)
    else:
        assert _view(cache.latest(table)) == expected
        assert topic_files(table) == (1, [SeqFile(p, lo, hi, ms) for p, _, lo, hi, ms in expected[4]])
    assert cache.delta_rs_reads == 1


def test_a_table_dropped_and_created_again_is_read_again(tmp_path: Path) -> None:
    table = str(tmp_path.resolve() / "t")
    cache = SnapshotCache()

    def create(commits: int, first: int) -> None:
        shutil.rmtree(table, ignore_errors=True)
        for i in range(commits):
            write_deltalake(table, _rows(range(first + i, first + i + 1)), mode="append")

    create(5, 0)
    assert _view(cache.latest(table)) == _oracle(table)
    create(2, 100)  # fewer commits: the cached version's log file is gone
    assert _view(cache.latest(table)) == _oracle(table)
    create(2, 200)  # as many commits: the cached version's log file is another file
    assert _view(cache.latest(table)) == _oracle(table)
    create(6, 300)  # more commits: the new table's later commits must not be laid on the old snapshot
    assert _view(cache.latest(table)) == _oracle(table)
    shutil.rmtree(table)
    with pytest.raises(TableNotFoundError):
        cache.latest(table)
    assert latest_version(table) == -1
    assert cache.delta_rs_reads == 0 and cache.full_reads == 5  # the last one found no table


def test_no_table(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    empty = tmp_path / "empty"
    (empty / "_delta_log").mkdir(parents=True)
    for table in (missing, str(empty)):
        with pytest.raises(TableNotFoundError):
            read_snapshot(table)
        with pytest.raises(TableNotFoundError):
            SnapshotCache().latest(table)
        with pytest.raises(TableNotFoundError):
            topic_files(table)
        with pytest.raises(TableNotFoundError):
            snapshot_files(table)
        assert latest_version(table) == -1


def test_a_directory_under_the_next_commits_name_is_no_commit(tmp_path: Path) -> None:
    """As delta-rs (which lists files only) reads it: the table stays at its last version, cold
    and cached (tests/e2e/test_fanout_faults.py blocks a table's commits this way)."""
    cache = SnapshotCache()
    table = str(tmp_path.resolve() / "blocked")
    write_deltalake(table, _rows(range(0, 3)))
    _check(table, cache)
    os.mkdir(log_file(table, 1))
    assert _check(table, cache)[0] == 0
    assert _view(SnapshotCache().latest(table)) == _oracle(table)
    os.rmdir(log_file(table, 1))
    write_deltalake(table, _rows(range(3, 6)), mode="append")
    assert _check(table, cache)[0] == 1


def test_a_protocol_the_reader_refuses_is_read_by_delta_rs(tmp_path: Path) -> None:
    cache = SnapshotCache()
    table = str(tmp_path.resolve() / "dv")
    write_deltalake(table, _rows(range(0, 3)), configuration={"delta.enableDeletionVectors": "true"})
    write_deltalake(table, _rows(range(3, 6)), mode="append")
    DeltaTable(table).delete("seq = 4")
    with pytest.raises(UnsupportedLog):
        read_snapshot(table)
    for _ in range(2):  # the second call does not try the direct read again
        assert _view(cache.latest(table)) == _oracle(table)
    assert (cache.full_reads, cache.delta_rs_reads) == (1, 2)
    assert topic_files(table)[0] == 2 and snapshot_files(table) == DeltaTable(table).file_uris()
    assert latest_version(table) == 2

    # Created again without deletion vectors: read directly again (delta-rs once, to notice).
    shutil.rmtree(table)
    write_deltalake(table, _rows(range(0, 3)))
    assert _view(cache.latest(table)) == _oracle(table)
    assert _view(cache.latest(table)) == _oracle(table)
    assert (cache.full_reads, cache.delta_rs_reads) == (2, 3)

    # A table the cache holds whose protocol is raised later on.
    DeltaTable(table).alter.add_feature([TableFeatures.DeletionVectors], allow_protocol_versions_increase=True)
    write_deltalake(table, _rows(range(3, 6)), mode="append")
    assert _view(cache.latest(table)) == _oracle(table)
    assert cache.latest(table).min_reader_version == 3 and cache.delta_rs_reads == 5

    # A deletion vector on an add of a table that claims none: refused too.
    plain = str(tmp_path.resolve() / "plain")
    write_deltalake(plain, _rows(range(0, 3)))
    vector = {"storageType": "i", "pathOrInlineDv": "abc", "sizeInBytes": 1, "cardinality": 1}
    _hand_commit(plain, "dv.parquet", {"numRecords": 1}, {"deletionVector": vector})
    with pytest.raises(UnsupportedLog, match="deletion vectors"):
        read_snapshot(plain)


def test_the_cache_reads_only_the_commits_after_the_cached_version(tmp_path: Path) -> None:
    table = str(tmp_path.resolve() / "t")
    write_deltalake(table, _rows(range(0, 1)))
    appender = FastPathAppender(table, schemas.TOPIC, commit_mark=COMMIT_MARK)
    for v in range(1, 6):
        appender.append(_rows(range(v, v + 1)), f"m{v}")
    cache = SnapshotCache()
    before = cache.latest(table)
    assert cache.full_reads == 1 and before.version == 5
    # Without its earlier commits (and no checkpoint) the log can no longer be read from the
    # start: only a reader that carries the cached snapshot forward still answers.
    for v in range(0, 5):
        os.unlink(log_file(table, v))
    assert appender.append(_rows(range(6, 8)), "m6") == 6
    third = next(f for f in before.files if f.first_seq == 3)
    with open(log_file(table, 7), "x", encoding="utf-8") as fh:  # delta-rs cannot load the table now
        fh.write(json.dumps({"remove": {"path": os.path.basename(third.path), "dataChange": True}}) + "\n")
    after = cache.latest(table)
    assert cache.full_reads == 1 and cache.delta_rs_reads == 0
    with pytest.raises(UnsupportedLog, match="no version 0"):
        read_snapshot(table)
    assert after.version == 7
    assert after.table_id == before.table_id
    seqs = sorted((f.first_seq, f.last_seq) for f in after.files)
    assert seqs == [(0, 0), (1, 1), (2, 2), (4, 4), (5, 5), (6, 7)]
    assert cache.latest(table) is after  # nothing new: the same snapshot


def _checkpointed(table: str) -> None:
    """A table with checkpoints at versions 2 and 5 and commits up to 7."""
    for v in range(8):
        write_deltalake(table, _rows(range(v, v + 1)), mode="append")
        if v in (2, 5):
            DeltaTable(table).create_checkpoint()


def test_checkpoints_found_with_and_without_last_checkpoint(tmp_path: Path) -> None:
    table = str(tmp_path.resolve() / "t")
    _checkpointed(table)
    log = os.path.join(table, "_delta_log")
    hint = os.path.join(log, "_last_checkpoint")
    expected = _oracle(table)
    assert json.load(open(hint))["version"] == 5 and _view(read_snapshot(table)) == expected

    os.unlink(hint)  # found by listing
    _check(table, SnapshotCache())
    with open(hint, "w") as fh:  # stale: names the older checkpoint
        json.dump({"version": 2, "size": 3}, fh)
    _check(table, SnapshotCache())

    with open(hint, "w") as fh:  # a multi-part checkpoint
        json.dump({"version": 5, "size": 3, "parts": 2}, fh)
    with pytest.raises(UnsupportedLog, match="checkpoint"):
        read_snapshot(table)
    cache = SnapshotCache()
    assert _view(cache.latest(table)) == expected and cache.delta_rs_reads == 1
    os.unlink(hint)
    part = os.path.join(log, f"{6:020d}.checkpoint.0000000001.0000000002.parquet")
    shutil.copy(os.path.join(log, f"{5:020d}.checkpoint.parquet"), part)
    with pytest.raises(UnsupportedLog, match="multi-part"):
        read_snapshot(table)
    assert _view(read_snapshot(table, 5)) == _oracle(table, 5)  # below it, the classic one serves


def test_a_stale_hint_after_log_cleanup_is_not_taken_for_the_latest_version(tmp_path: Path) -> None:
    table = str(tmp_path.resolve() / "t")
    _checkpointed(table)
    log = os.path.join(table, "_delta_log")
    old = os.path.join(log, f"{2:020d}.checkpoint.parquet")
    kept = str(tmp_path / "kept.parquet")
    shutil.copy(old, kept)
    DeltaTable(table).alter.set_table_properties(ZERO_RETENTION)  # version 8
    DeltaTable(table).create_checkpoint()
    DeltaTable(table).cleanup_metadata()
    assert not os.path.exists(log_file(table, 7))
    shutil.copy(kept, old)  # the checkpoint at 2 back, and the hint naming it: commit 3 is gone
    with open(os.path.join(log, "_last_checkpoint"), "w") as fh:
        json.dump({"version": 2, "size": 3}, fh)
    with pytest.raises(UnsupportedLog):
        read_snapshot(table)
    cache = SnapshotCache()
    assert _view(cache.latest(table)) == _oracle(table) and cache.latest(table).version == 8


def test_partitioned_tables_and_quoted_paths(tmp_path: Path) -> None:
    """Partition values delta-rs quotes in paths (twice in the log): the paths are the files'.
    Statistics of partitioned tables are left to delta-rs."""
    table = str(tmp_path.resolve() / "p")
    values = ["a b", "x:y", "\u00fc", "50%", "q=r/s", "plain"]
    for k in range(3):
        data = _rows(range(6 * k, 6 * k + 6)).append_column("part", pa.array(values))
        write_deltalake(table, data, partition_by=["part"], mode="append")
    DeltaTable(table).delete("seq = 7")
    paths = [f.path for f in read_snapshot(table, stats=False).files]
    assert paths == DeltaTable(table).file_uris() and all(os.path.exists(p) for p in paths)
    assert snapshot_files(table) == paths and snapshot_files(table, 1) == DeltaTable(table, version=1).file_uris()
    cache = SnapshotCache()
    assert _view(cache.latest(table)) == _oracle(table) and cache.delta_rs_reads == 1
    assert topic_files(table)[1] == [SeqFile(p, lo, hi, ms) for p, _, lo, hi, ms in _oracle(table)[4]]


def test_a_table_reached_through_a_symlink(tmp_path: Path) -> None:
    """snapshot_files gives the real paths, as delta-rs does; topic_files the paths under the
    path it was given, as it did."""
    real = str(tmp_path.resolve() / "real")
    link = str(tmp_path.resolve() / "link")
    write_deltalake(real, _rows(range(0, 3)))
    write_deltalake(real, _rows(range(3, 6)), mode="append")
    os.symlink(real, link)
    assert snapshot_files(link) == DeltaTable(link).file_uris() == [f[0] for f in _oracle(real)[4]]
    assert snapshot_files(link, 0) == DeltaTable(link, version=0).file_uris()
    assert [f.path for f in topic_files(link)[1]] == [os.path.join(link, os.path.basename(f[0])) for f in _oracle(real)[4]]


def test_a_metadata_change_after_caching_is_read_as_delta_rs_reads_it(tmp_path: Path) -> None:
    """Statistics are read under the table's latest schema and configuration: a cached snapshot
    whose table changed either is read again (here: fewer indexed columns, which delta-rs then
    drops ``published_at``'s statistics for; left to delta-rs)."""
    table = str(tmp_path.resolve() / "t")
    write_deltalake(table, _rows(range(0, 3)))
    write_deltalake(table, _rows(range(3, 6)), mode="append")
    cache = SnapshotCache()
    assert _view(cache.latest(table)) == _oracle(table)
    DeltaTable(table).alter.set_table_properties({"delta.dataSkippingNumIndexedCols": "1"})
    expected = _oracle(table)
    assert all(f[4] is None for f in expected[4])  # what the change does in delta-rs
    assert _view(cache.latest(table)) == expected
    assert topic_files(table)[1][0].newest_published_ms is None


def test_threads_sharing_a_cache_see_whole_snapshots(tmp_path: Path) -> None:
    """Readers racing appends, deletes and a checkpoint each get some version's exact snapshot."""
    table = str(tmp_path.resolve() / "t")
    write_deltalake(table, _rows(range(0, 1)))
    cache = SnapshotCache()
    seen: list[Snapshot] = []
    done = threading.Event()
    errors: list[BaseException] = []

    def read() -> None:
        try:
            while not done.is_set():
                seen.append(cache.latest(table))
        except BaseException as exc:  # reported below
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(3)]
    for reader in readers:
        reader.start()
    appender = DeltaAppender(table, schemas.TOPIC)
    for v in range(1, 30):
        appender.append(_rows(range(v, v + 1)))
        if v % 10 == 0:
            DeltaTable(table).delete(f"seq = {v - 3}")
        if v == 15:
            DeltaTable(table).create_checkpoint()
    done.set()
    for reader in readers:
        reader.join()
    assert not errors and len({s.version for s in seen}) > 1
    for snapshot in {s.version: s for s in seen}.values():
        assert _view(snapshot) == _oracle(table, snapshot.version)
