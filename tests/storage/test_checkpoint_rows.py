"""Checkpoints made from the previous checkpoint and the log entries after it
(sharedsub.storage.delta.checkpoint_rows) hold the rows delta-rs's own ``create_checkpoint``
writes for the same version, in its file order, and delta-rs reads a table through them.

Each case is a local table changed by delta-rs itself (appends with and without app
transactions, deletes, a compaction, a schema change); the checkpoint is made from delta-rs's
checkpoint at an earlier version (or from version 0) and compared with the one delta-rs writes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from sharedsub.storage.delta.checkpoint_rows import CannotCheckpoint, last_checkpoint, next_checkpoint, retention_ms
from sharedsub.storage.delta.object_checkpoint import checkpoint_schema

Step = Callable[[str, int], None]


def _append(path: str, i: int, app: str | None = None, **kw: object) -> None:
    props = CommitProperties(app_transactions=[Transaction(app_id=app, version=i)]) if app else None
    data = pa.table({"seq": pa.array([i, i + 1000], pa.int64()), "body": pa.array([b"a", b"b"])})
    write_deltalake(path, data, mode="append", commit_properties=props, **kw)  # type: ignore[arg-type]


def _appends(path: str, i: int) -> None:
    _append(path, i)


def _with_txns(path: str, i: int) -> None:
    _append(path, i, "fanout" if i % 3 else "acks")


def _deletes(path: str, i: int) -> None:
    _append(path, i, "fanout")
    if i % 4 == 3:
        DeltaTable(path).delete(f"seq = {i - 1}")


def _compaction(path: str, i: int) -> None:
    _append(path, i)
    if i == 9:
        DeltaTable(path).optimize.compact()


def _schema_change(path: str, i: int) -> None:
    if i >= 8:  # a column more from here on
        data = pa.table({"seq": pa.array([i], pa.int64()), "body": pa.array([b"c"]), "extra": pa.array(["x"])})
        write_deltalake(path, data, mode="append", schema_mode="merge")
    else:
        _append(path, i)


def _log(path: str, version: int) -> str:
    return Path(path, "_delta_log", f"{version:020d}.json").read_text(encoding="utf-8")


def _checkpoint(path: str, version: int) -> pa.Table:
    return pq.read_table(Path(path, "_delta_log", f"{version:020d}.checkpoint.parquet"))


def _rows(table: pa.Table) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())


def _add_order(table: pa.Table) -> list[str]:
    return [r["add"]["path"] for r in table.to_pylist() if r["add"]]


CASES: list[tuple[str, Step, int]] = [
    # name, what each step does, the version of delta-rs's earlier checkpoint (-1: none)
    ("appends", _appends, 4),
    ("appends from version 0", _appends, -1),
    ("app transactions", _with_txns, 5),
    ("deletes leave tombstones", _deletes, 4),
    ("a compaction", _compaction, 2),
    ("a schema change", _schema_change, 5),
]


@pytest.mark.parametrize(("name", "step", "earlier"), CASES, ids=[c[0] for c in CASES])
def test_the_rows_are_delta_rs_rows_in_its_file_order(tmp_path: Path, name: str, step: Step, earlier: int) -> None:
    path = str(tmp_path / "t")
    for i in range(14):
        step(path, i)
        if DeltaTable(path).version() == earlier:
            DeltaTable(path).create_checkpoint()
    version = DeltaTable(path).version()
    previous = _checkpoint(path, earlier) if earlier >= 0 else None
    ours = next_checkpoint(
        previous,
        [(v, _log(path, v)) for v in range(earlier + 1, version + 1)],
        now_ms=int(time.time() * 1000),
        schema=checkpoint_schema(),
    )
    DeltaTable(path).create_checkpoint()
    theirs = _checkpoint(path, version)
    assert ours.schema.equals(theirs.schema)
    assert _rows(ours) == _rows(theirs)
    assert _add_order(ours) == _add_order(theirs)

    # delta-rs reads the table through ours as through its own
    expected = DeltaTable(path).to_pyarrow_table().sort_by("seq")
    pq.write_table(ours, Path(path, "_delta_log", f"{version:020d}.checkpoint.parquet"))
    reread = DeltaTable(path)
    assert reread.version() == version
    assert reread.to_pyarrow_table().sort_by("seq").equals(expected)
    assert reread.transaction_version("fanout") == DeltaTable(path, version=version).transaction_version("fanout")


def test_a_checkpoint_written_and_read_back_keeps_its_column_layout(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    for i in range(3):
        _append(path, i, "fanout")
    first = next_checkpoint(None, [(v, _log(path, v)) for v in range(3)], now_ms=0, schema=checkpoint_schema())
    pq.write_table(first, tmp_path / "cp.parquet")
    again = pq.read_table(tmp_path / "cp.parquet")
    assert again.schema.equals(checkpoint_schema())
    _append(path, 3)
    second = next_checkpoint(again, [(3, _log(path, 3))], now_ms=0, schema=checkpoint_schema())
    assert second.num_rows == first.num_rows + 1
    assert json.loads(last_checkpoint(3, second, 1234)) == {"version": 3, "size": 7, "sizeInBytes": 1234, "numOfAddFiles": 4}


def test_tombstones_older_than_the_retention_are_dropped(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    for i in range(4):
        _append(path, i)
    DeltaTable(path).delete("seq = 1")
    entries = [(v, _log(path, v)) for v in range(5)]
    now = int(time.time() * 1000)
    kept = next_checkpoint(None, entries, now_ms=now, schema=checkpoint_schema())
    assert kept.column("remove").drop_null().to_pylist()[0]["path"]
    expired = next_checkpoint(None, entries, now_ms=now + retention_ms(None) + 60_000, schema=checkpoint_schema())
    assert expired.column("remove").null_count == expired.num_rows
    assert _add_order(expired) == _add_order(kept)


@pytest.mark.parametrize(
    ("setting", "ms"),
    [
        (None, 7 * 86_400_000),
        ("interval 7 days", 7 * 86_400_000),
        ("interval 1 day", 86_400_000),
        ("interval 12 hours", 12 * 3_600_000),
        ("interval 2 weeks", 14 * 86_400_000),
        ("interval 30 seconds", 30_000),
        ("7 days", 7 * 86_400_000),  # not Delta's form: the default
        ("interval 3 fortnights", 7 * 86_400_000),
    ],
)
def test_the_tombstone_retention_setting(setting: str | None, ms: int) -> None:
    assert retention_ms({"delta.deletedFileRetentionDuration": setting} if setting else {}) == ms


def _first(tmp_path: Path) -> tuple[str, list[tuple[int, str]]]:
    path = str(tmp_path / "t")
    for i in range(3):
        _append(path, i)
    return path, [(v, _log(path, v)) for v in range(3)]


@pytest.mark.parametrize(
    ("what", "change"),
    [
        ("entries with a gap", lambda e: [e[0], e[2]]),
        ("no previous checkpoint, not from version 0", lambda e: e[1:]),
        ("no entries", lambda e: []),
        ("a deletion vector", lambda e: [*e[:2], (2, '{"add":{"path":"x","deletionVector":{"storageType":"u"}}}\n')]),
        ("domain metadata", lambda e: [*e[:2], (2, '{"domainMetadata":{"domain":"d","configuration":"{}","removed":false}}\n')]),
        (
            "table features",
            lambda e: [*e[:2], (2, '{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["x"]}}\n')],
        ),
    ],
)
def test_what_it_does_not_write_is_left_to_delta_rs(
    tmp_path: Path, what: str, change: Callable[[list[tuple[int, str]]], list[tuple[int, str]]]
) -> None:
    _, entries = _first(tmp_path)
    with pytest.raises(CannotCheckpoint):
        next_checkpoint(None, change(entries), now_ms=0, schema=checkpoint_schema())


def test_a_previous_checkpoint_of_another_layout_is_left_to_delta_rs(tmp_path: Path) -> None:
    _, entries = _first(tmp_path)
    mine = next_checkpoint(None, entries[:2], now_ms=0, schema=checkpoint_schema())
    with pytest.raises(CannotCheckpoint):
        next_checkpoint(mine.drop_columns(["sidecar"]), entries[2:], now_ms=0, schema=checkpoint_schema())
