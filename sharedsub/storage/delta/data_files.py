"""Data files written before their commit: the fan-out's executors write a subscription's
routed rows as Parquet files into its table, and the driver commits them (jobs/executor_routing.py).

A :class:`DataFile` is what a commit's ``add`` action needs of a file, plus the seq range the
committer checks against the table's app transaction. A file no commit names is an orphan:
readers never see it (Delta reads only what the log adds), and vacuum removes it. The writers
here never overwrite: every file gets a new name, so a retried or speculative task's files are
other files, never a change to one a commit named.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import time
import urllib.parse
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sharedsub.core.layout import local_path
from sharedsub.storage.delta.table_reads import read_files
from sharedsub.storage.objects.locations import locate


@dataclasses.dataclass(frozen=True, slots=True)
class DataFile:
    """One Parquet file in a table's directory, not yet (or already) named by a commit."""

    name: str  # relative to the table, as the log's ``add.path`` (not URL-encoded: names here are plain)
    size: int  # bytes
    rows: int
    min_seq: int  # -1 for rows without a ``seq`` column (a table other than a topic or subscription)
    max_seq: int
    stats: str  # the add action's statistics (JSON)
    modified_ms: int  # when it was written (the add action's modificationTime)


def _iso_ms(value: dt.datetime) -> str:
    """A timestamp statistic as Delta writers store it: UTC, truncated to milliseconds."""
    value = value.astimezone(dt.UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


# Up to this many rows a column's bounds are found in Python: a vectorised min_max costs ~40 µs a
# column whatever the rows, and a fan-out batch spread over a thousand subscription tables
# writes a few rows per file (issue 41).
_SMALL = 64

# Up to this many rows a file is written lean (write_data_file).
_LEAN_ROWS = 1000


def _bounds(column: pa.ChunkedArray) -> tuple[Any, Any]:  # Any: the column's Python values
    """The least and greatest non-null value of ``column`` (None, None: none)."""
    if len(column) <= _SMALL:
        values = [v for v in column.to_pylist() if v is not None]
        return (min(values), max(values)) if values else (None, None)
    bounds = pc.min_max(column)
    return bounds["min"].as_py(), bounds["max"].as_py()


def file_stats(data: pa.Table) -> str:
    """An ``add`` action's statistics: row count, and min/max/null count of the integer and UTC
    timestamp columns (``seq`` for the readers here, ``published_at`` for topic retention),
    timestamps truncated to milliseconds as delta-rs writes them."""
    mins: dict[str, object] = {}
    maxs: dict[str, object] = {}
    nulls: dict[str, int] = {}
    for field in data.schema:
        timestamp = pa.types.is_timestamp(field.type) and field.type.tz is not None
        if not (pa.types.is_integer(field.type) or timestamp):
            continue
        column = data.column(field.name)
        nulls[field.name] = column.null_count
        low, high = _bounds(column)
        if low is not None:
            mins[field.name], maxs[field.name] = (_iso_ms(low), _iso_ms(high)) if timestamp else (low, high)
    return json.dumps(
        {"numRecords": data.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}, separators=(",", ":")
    )


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write all of ``data`` at ``fd``'s offset (os.write may write less than asked)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def new_file_name() -> str:
    """A data file name no writer used before (as delta-rs names its files)."""
    return f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"


def file_location(table: str, name: str) -> str:
    """The location of data file ``name`` of ``table`` (a path, or a URI)."""
    local = local_path(table)
    return os.path.join(local, name) if local is not None else f"{table.rstrip('/')}/{name}"


def write_data_file(table: str, data: pa.Table, *, into: tuple[str, int] | None = None) -> DataFile:
    """Write ``data`` (already in the table's schema, in seq order when it has ``seq``) as a new
    Parquet file in ``table``'s directory; return its description. Durable on object storage
    when this returns (the PUT was answered); a local file is not fsynced here (the commit that
    names it syncs what it needs, as delta-rs's own writes). ``into``: the name and open
    descriptor of an empty file already made in a local ``table``'s directory, written instead
    of a new one (sharedsub.storage.delta.prepared_commit)."""
    name = new_file_name() if into is None else into[0]
    location = file_location(table, name)
    local = local_path(location)
    # A file of up to _LEAN_ROWS rows (a fan-out batch spread over many subscription tables) is written without
    # dictionaries, and with statistics of ``seq`` alone (payload_index and retention read
    # those; the log's statistics are what other readers here prune by): for a few rows the
    # rest cost ~40% of the write and save nothing. One buffer, one write: pyarrow's file sink
    # cost ~0.5 ms more per file than a plain write of the same bytes; an Arrow buffer, ~35 us
    # less than a BytesIO for a one-row topic commit (bench/RESULTS.md, issue 43, "files made ahead").
    lean = data.num_rows <= _LEAN_ROWS
    stats: bool | list[str] = True if not lean else (["seq"] if "seq" in data.column_names else False)
    sink = pa.BufferOutputStream()
    pq.write_table(data, sink, compression="snappy", use_dictionary=not lean, write_statistics=stats)
    body = memoryview(sink.getvalue())
    if into is not None and local is not None:
        write_all(into[1], body)
        size = len(body)
    elif local is not None:
        os.makedirs(os.path.dirname(local), exist_ok=True)  # a table not created yet (its first commit is the driver's)
        with open(local, "xb") as fh:  # never an existing file (a new name each time)
            fh.write(body)
        size = len(body)
    else:
        store, key = locate(location)
        store.put(key, bytes(body))
        size = len(body)
    low = high = -1
    if "seq" in data.column_names and data.num_rows:
        first, last = _bounds(data.column("seq"))
        low, high = int(first), int(last)  # (seq is int64, never all null in a file)
    return DataFile(
        name=name,
        size=size,
        rows=data.num_rows,
        min_seq=low,
        max_seq=high,
        stats=file_stats(data),
        modified_ms=int(time.time() * 1000),
    )


def read_data_files(table: str, files: Sequence[DataFile]) -> pa.Table | None:
    """The rows of ``files`` (in the given order); None for no files."""
    return read_files([file_location(table, f.name) for f in files])


def remove_data_files(table: str, files: Iterable[DataFile]) -> None:
    """Delete files no commit names (orphans this process decided not to commit); one that is
    gone already is no error."""
    for f in files:
        location = file_location(table, f.name)
        local = local_path(location)
        if local is not None:
            try:
                os.unlink(local)
            except FileNotFoundError:
                pass
        else:
            store, key = locate(location)
            store.delete(key)


def add_action(f: DataFile) -> dict[str, object]:
    """The log's ``add`` action of ``f`` (as JSON values)."""
    return {
        "path": urllib.parse.quote(f.name),
        "partitionValues": {},
        "size": f.size,
        "modificationTime": f.modified_ms,
        "dataChange": True,
        "stats": f.stats,
    }
