"""Reading table contents as Arrow: data files, whole snapshots, the ``seq`` column.

Reads avoid ``DeltaTable.to_pyarrow_table()`` (it can abort the interpreter at exit, delta-rs
#2184); they read the Parquet files the log names.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from sharedsub.core.layout import local_path
from sharedsub.storage.delta import log_snapshot
from sharedsub.storage.delta.tables import delta_table, os_path, table_exists
from sharedsub.storage.objects import prefetch


def read_files(paths: Sequence[str], columns: Sequence[str] | None = None) -> pa.Table | None:
    """Concatenate the given Parquet files (None when there are none). A requested column a
    file lacks is left out of its rows (null where files that have it are concatenated)."""
    # ParquetFile.read, not pq.read_table: the dataset layer read_table builds per file cost
    # 2-3x the read itself for the small files commits make (measured on 16 files of 600
    # rows: 7.5 vs 3.2 ms), and a consumer's first delivery waits for such a read.
    wanted = list(columns) if columns else None
    with prefetch.prefetched(paths):  # on object storage: one round trip for all of them
        tables = [_plain_types(_read_file(p, wanted)) for p in paths]
    if not tables:
        return None
    return pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0]


# Rows from which a file's columns are decoded on Arrow's thread pool. Most files read here are
# one commit's: a few to a few hundred rows, whose decoding costs less than handing the columns to
# the pool and waiting for them (a 20-row topic file: 0.44 ms with the pool, 0.33 without; under
# load the wait for a busy pool is most of it). Compacted files and backlogs go to the pool.
_THREADED_ROWS = 65536


def _read_file(path: str, columns: list[str] | None) -> pa.Table:
    if local_path(path) is None:  # on object storage: the whole file in one GET, read from memory
        source: str | pa.BufferReader = pa.BufferReader(prefetch.get(path).data)
    else:
        source = path
    # pre_buffer off: it coalesces the column chunks' reads on the I/O pool, which a local file
    # (or one already in memory) does not need.
    with pq.ParquetFile(source, pre_buffer=False) as parquet:
        return parquet.read(columns=columns, use_threads=parquet.metadata.num_rows >= _THREADED_ROWS)


def _plain(kind: pa.DataType) -> pa.DataType:
    if kind == pa.string_view():
        return pa.string()
    if kind == pa.binary_view():
        return pa.binary()
    if pa.types.is_struct(kind):
        return pa.struct([f.with_type(_plain(f.type)) for f in kind])
    if pa.types.is_map(kind):
        return pa.map_(_plain(kind.key_type), kind.item_field.with_type(_plain(kind.item_type)))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.list_(kind.value_field.with_type(_plain(kind.value_type)))
    return kind


def _plain_types(data: pa.Table) -> pa.Table:
    """``data`` with string/binary *view* columns as plain string/binary.

    Files rewritten by delta-rs' own engine (delete, compaction) record view types in their
    Arrow schema; files sharedsub appends do not. Mixed, they would not concatenate.
    """
    schema = pa.schema([f.with_type(_plain(f.type)) for f in data.schema], metadata=data.schema.metadata)
    return data if schema.equals(data.schema) else data.cast(schema)


def snapshot_files(table: str, version: int | None = None) -> list[str]:
    """Absolute paths of the data files of ``table`` at ``version`` (latest when None), in
    delta-rs's order (sharedsub.storage.delta.log_snapshot: ``read_table``'s rows follow it).

    A local table's snapshot is read from its log (the latest through the process's snapshot
    cache), under the table directory's real path as delta-rs gives it; other storage, and what
    that reader does not handle, through delta-rs.
    """
    local = local_path(table)
    if local is not None:
        real = os.path.realpath(local)  # delta-rs resolves the table's path: relative, symlinks
        if version is None:
            return [f.path for f in log_snapshot.latest_snapshot(real).files]  # (delta-rs when it must)
        try:
            return [f.path for f in log_snapshot.read_snapshot(real, version, stats=False).files]
        except log_snapshot.UnsupportedLog:
            pass  # delta-rs answers, or raises as it did before
    loaded = delta_table(table, version)
    return [os_path(u) for u in loaded.file_uris()]


def read_table(table: str, columns: Sequence[str] | None = None, version: int | None = None) -> pa.Table | None:
    """Whole ``table`` (at ``version``) as Arrow; None when it does not exist."""
    if not table_exists(table):
        return None
    return read_files(snapshot_files(table, version), columns)


def iter_rows(data: pa.Table | None) -> Iterator[dict[str, Any]]:  # Any: pyarrow's to_pylist() values
    """Rows of an Arrow table as dicts (nothing for None)."""
    if data is None:
        return iter(())
    return iter(data.to_pylist())


def read_seqs(table: str) -> pa.Array:
    """The ``seq`` column of ``table``'s current snapshot (int64; empty when there is no table)."""
    data = read_table(table, ["seq"]) if table_exists(table) else None
    if data is None:
        return pa.array([], pa.int64())
    return data.column("seq").combine_chunks()
