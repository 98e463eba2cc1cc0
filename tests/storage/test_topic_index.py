"""The payload index over a topic table: overlapping seq ranges (compaction bins files that were not
neighbours) and files that vanished since the index was loaded (compaction or retention, then vacuum)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from sharedsub.core import layout
from sharedsub.storage import payload_index, schemas
from sharedsub.storage.delta.appender import DeltaAppender
from sharedsub.storage.delta.commit_log import read_commit
from sharedsub.storage.delta.table_maintenance import compact, vacuum
from sharedsub.storage.delta.table_reads import read_files
from tests import builders as b


def _append(path: str, seqs: list[int]) -> None:
    rows = [{"seq": s, "published_at": b.T0, "message": f"m{s}".encode()} for s in seqs]
    DeltaAppender(path, schemas.TOPIC).append(pa.Table.from_pylist(rows, schema=schemas.TOPIC))


def test_a_seq_in_overlapping_ranges_is_read_from_the_file_that_holds_it(tmp_path: Path) -> None:
    root = str(tmp_path)
    path = b.topic(root, "t")
    _append(path, [0, 1, 2, 3, 4, 10, 11, 12, 13, 14])  # range 0..14
    _append(path, [5, 6, 7, 8, 9])  # range 5..9, inside it
    _append(path, [15, 16])
    index = payload_index.TableIndex(path)
    candidates = index.files_for(range(17))
    assert sorted(len(seqs) for seqs in candidates.values()) == [2, 5, 15]  # 5..9 may be in either file
    assert payload_index.read_messages(index, range(17)) == {s: f"m{s}".encode() for s in range(17)}
    assert payload_index.read_messages(index, [99]) == {}


def test_files_that_vanished_since_the_index_loaded_are_looked_up_again(tmp_path: Path) -> None:
    root = str(tmp_path)
    for _ in range(4):
        b.publish(root, "t", ["k"] * 5)
    path = layout.topic_table(root, "t")
    index = payload_index.TableIndex(path)
    index.refresh()
    assert compact(path) == 4
    vacuum(path, 0)  # the four files the index names are deleted
    assert payload_index.read_messages(index, range(20)) == {s: f"m{s}".encode() for s in range(20)}


def test_only_the_row_groups_that_may_hold_a_wanted_seq_are_read(tmp_path: Path) -> None:
    """A file of many row groups (as compaction writes them), application properties (a nested
    column) before seq: the wanted seqs come back, and exactly them."""
    import pyarrow.parquet as pq

    path = tmp_path / "part-0.parquet"
    rows = [
        {"seq": s, "published_at": b.T0, "message": f"m{s}".encode(),
         "application_properties": [("k", {"type": "long", "long": s, "double": None, "string": None, "bool": None})]}
        for s in range(100)
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema=schemas.TOPIC), path, row_group_size=10)
    assert pq.ParquetFile(path).metadata.num_row_groups == 10
    got = payload_index._read_seqs(str(path), [3, 42, 43, 99])
    assert dict(zip(got.column("seq").to_pylist(), got.column("message").to_pylist(), strict=True)) == {
        3: b"m3", 42: b"m42", 43: b"m43", 99: b"m99"}
    assert payload_index._read_seqs(str(path), [100, 101]).num_rows == 0


def test_seqs_read_ahead_come_only_from_the_row_groups_read_for_the_wanted_ones(tmp_path: Path) -> None:
    """``also``: a reader's next seqs, taken where they share a row group with a wanted seq, never
    from another row group or file (that would be a read it did not need yet)."""
    import pyarrow.parquet as pq

    path = tmp_path / "part-0.parquet"
    rows = [{"seq": s, "published_at": b.T0, "message": f"m{s}".encode()} for s in range(100)]
    pq.write_table(pa.Table.from_pylist(rows, schema=schemas.TOPIC), path, row_group_size=10)
    got = payload_index._read_seqs(str(path), [3, 4], also=[5, 9, 10, 55])
    assert got.column("seq").to_pylist() == [3, 4, 5, 9]  # 10 and 55: other row groups
    table = b.topic(str(tmp_path), "t")
    _append(table, list(range(0, 50)))
    _append(table, list(range(50, 100)))
    index = payload_index.TableIndex(table)
    assert payload_index.read_messages(index, [48], also=[49, 50, 51]) == {48: b"m48", 49: b"m49"}
    assert payload_index.read_messages(index, [48, 50], also=[49, 51, 99]) == {s: f"m{s}".encode() for s in (48, 49, 50, 51, 99)}


def test_a_table_of_several_chunks_is_stored_in_its_row_order(tmp_path: Path) -> None:
    """delta-rs may write the record batches of a many-chunk table out of order; the appender
    writes one chunk, so the fan-out's parked rows and later rows stay in seq order."""
    schema = pa.schema([schemas.SUBSCRIPTION.field("seq")])
    first = pa.Table.from_pylist([{"seq": s} for s in range(3)], schema=schema)
    later = pa.Table.from_pylist([{"seq": s} for s in range(3, 5)], schema=schema)
    path = str(tmp_path / "t")
    appender = DeltaAppender(path, schema)
    for _ in range(10):
        appender.append(pa.concat_tables([first, later]))
    for version in range(10):
        commit = read_commit(path, version)
        assert commit is not None
        assert read_files(list(commit.added)).column("seq").to_pylist() == [0, 1, 2, 3, 4]
