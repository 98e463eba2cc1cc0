"""Snapshots of local Delta tables read straight from ``_delta_log``, and a cache of the latest.

Why: loading a table with delta-rs stats every entry of ``_delta_log`` on a local file system,
so a reader's cost grows with the log (5-9 ms for 30 commits); readers on hot paths (a consumer
attaching, the payload index, retention) need the active files and their ``seq`` statistics only.

Contract of :func:`read_snapshot` (and of what :class:`SnapshotCache` returns): the same answer
as ``DeltaTable(table, version=...)`` — the version, ``metaData.id``, the protocol versions, and
the active files, each with its size and, from its ``add`` statistics, the min/max of ``seq`` and
the max of ``published_at`` as ``get_add_actions(flatten=True)`` gives them (the ms value is
``int(ts.timestamp() * 1000)`` of delta-rs's timestamp). Files come in delta-rs's order: the
newest commit's adds first, each commit's adds in the order its log entry lists them, then the
checkpoint's adds in its row order (delta-rs writes checkpoints in that same order, so the order
does not change when a checkpoint is written; ``read_table``'s row order follows it).

How: the newest single-file checkpoint at or below the target (named by ``_last_checkpoint``, else
found by listing ``_delta_log``), then the JSON commits after it, in order; an ``add`` adds its
path (a later add of the same path replaces the earlier one), a ``remove`` removes it. The latest
version is the last of the JSON commits found by opening ``<version>.json`` until one is missing.

Only what is certain to match is answered; anything else raises :class:`UnsupportedLog` and the
caller asks delta-rs (:class:`SnapshotCache` does so itself): a protocol with reader version > 1
or any reader/writer feature, deletion vectors, multi-part or v2 (sidecar) checkpoints, a commit
missing between the checkpoint and the target, a log with neither version 0 nor a checkpoint,
absolute file paths, and statistics of another shape than the writers here produce (delta-rs
drops a file's whole statistics when one value does not fit its column, so values are checked
against the schema; ``seq``/``published_at`` outside the columns delta-rs keeps statistics of).
A table that is not there raises delta-rs's own ``TableNotFoundError``, as ``DeltaTable`` does.

Local tables only (sharedsub.core.layout.local_path): :meth:`SnapshotCache.latest` answers a
table on object storage through delta-rs.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import functools
import json
import os
import re
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake.exceptions import TableNotFoundError

from sharedsub.core.layout import local_path
from sharedsub.storage.delta.tables import delta_table, os_path

CACHED_TABLES = 256
"""Tables :data:`DEFAULT_CACHE` keeps (least recently used ones go first)."""


class UnsupportedLog(Exception):
    """The log holds something this reader does not handle: ask delta-rs."""


@dataclasses.dataclass(frozen=True, slots=True)
class ActiveFile:
    """One data file of a snapshot, with what its ``add`` statistics say."""

    path: str  # os.path.join(table path as given, unquoted log path): absolute for an absolute table path
    size: int
    first_seq: int | None  # min of ``seq``; None without statistics for it
    last_seq: int | None  # max of ``seq``
    newest_published_ms: int | None  # max of ``published_at``, ms since the epoch


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    """A table at one version: identity, protocol and active files (in delta-rs's order)."""

    version: int
    table_id: str  # the Delta ``metaData.id``
    min_reader_version: int
    min_writer_version: int
    files: tuple[ActiveFile, ...]


# --------------------------------------------------------------------------- log entries

_CLASSIC_CHECKPOINT = re.compile(r"(\d{20})\.checkpoint\.parquet")
_ANY_CHECKPOINT = re.compile(r"(\d{20})\.checkpoint\..+")  # multi-part, v2 (uuid), classic
_VERSIONED = re.compile(r"(\d{20})\.")  # any log entry of a version: commit, checkpoint, checksum

_Stamp = tuple[int, int, int]  # (inode, size, mtime ns) of a log file

# A protocol, metaData, add or remove action of the log as json.loads (or a checkpoint's to_pylist())
# gives it: read by key, and a missing key or value of another type refuses the log (UnsupportedLog).
_Action = dict[str, Any]  # Any: json.loads's and pyarrow's to_pylist()'s values are untyped


@dataclasses.dataclass(slots=True)
class _Commit:
    """The actions of one JSON commit that a snapshot depends on."""

    adds: list[tuple[str, int, str | None]]  # (log path, size, stats JSON), in log order
    removes: list[str]  # log paths
    protocol: _Action | None
    metadata: _Action | None
    stamp: _Stamp


def _log_dir(table_dir: str) -> str:
    return os.path.join(table_dir, "_delta_log")


def _commit_path(log_dir: str, version: int) -> str:
    return os.path.join(log_dir, f"{version:020d}.json")


def _stamp_of(st: os.stat_result) -> _Stamp:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def file_stamp(path: str) -> _Stamp | None:
    """(inode, size, mtime in ns) of a file, or None when it is not there: whether a log file is
    still the one read before (a table made again under the same path has new files)."""
    try:
        return _stamp_of(os.stat(path))
    except FileNotFoundError:
        return None


def _no_deletion_vector(action: Mapping[str, object]) -> None:
    # A file with a deletion vector is only part of a file: its rows need the vector.
    if action.get("deletionVector") is not None:
        raise UnsupportedLog("deletion vectors")


def _relative(path: str) -> str:
    """``path`` of an add or remove, checked to be relative to the table (absolute paths and URIs
    would need delta-rs's resolution)."""
    if not isinstance(path, str) or not path or ":" in path or urllib.parse.unquote(path).startswith("/"):
        raise UnsupportedLog(f"file path {path!r}")
    return path


def _read_commit(log_dir: str, version: int) -> _Commit | None:
    """The actions of commit ``version``; None when its file is not there."""
    try:
        fh = open(_commit_path(log_dir, version), "rb")  # (closed below: its stamp is taken while open)
    except (FileNotFoundError, IsADirectoryError):
        # A directory under a commit's name is no commit: delta-rs lists files only, and a
        # table whose next entry is blocked that way still reads at its last version.
        return None
    with fh:
        data = fh.read()
        stamp = _stamp_of(os.fstat(fh.fileno()))
    commit = _Commit([], [], None, None, stamp)
    try:
        for line in data.splitlines():
            if line.strip():
                _take_action(commit, json.loads(line))
    except (ValueError, KeyError, TypeError) as exc:  # not a log entry this reader understands
        raise UnsupportedLog(f"commit {version}: {exc}") from exc
    return commit


def _take_action(commit: _Commit, action: _Action) -> None:
    if "add" in action:
        add = action["add"]
        _no_deletion_vector(add)
        commit.adds.append((_relative(add["path"]), int(add["size"]), add.get("stats")))
    elif "remove" in action:
        _no_deletion_vector(action["remove"])
        commit.removes.append(_relative(action["remove"]["path"]))
    elif "protocol" in action:
        commit.protocol = action["protocol"]
    elif "metaData" in action:
        commit.metadata = action["metaData"]
    # commitInfo, txn, cdc, domainMetadata: no part of the active files.


def _check_protocol(protocol: _Action | None) -> tuple[int, int]:
    """(min reader, min writer) of a protocol this reader may read."""
    if protocol is None:
        raise UnsupportedLog("no protocol action")
    reader, writer = int(protocol["minReaderVersion"]), int(protocol["minWriterVersion"])
    if reader > 1 or protocol.get("readerFeatures") or protocol.get("writerFeatures"):
        raise UnsupportedLog(f"protocol {reader}/{writer} with features {protocol}")
    return reader, writer


# --------------------------------------------------------------------------- statistics

_INDEXED_COLUMNS = 32  # delta.dataSkippingNumIndexedCols's default: delta-rs keeps stats of these
_TIMESTAMP = re.compile(r"(\d{4}-\d{2}-\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})?")
_EPOCH_DAY = dt.date(1970, 1, 1).toordinal()
_JSON = json.JSONDecoder()


class _NoValue:
    """The type no statistics value has: columns whose values this reader does not check."""


# (type a min/max value must have exactly, lowest, highest) by Delta primitive type: the values
# delta-rs surely reads as they are. Other types (nested, decimal, date, float, binary): none.
_Spec = tuple[type, int | None, int | None]
_SPECS: dict[str, _Spec] = {
    "byte": (int, -(2**7), 2**7 - 1),
    "short": (int, -(2**15), 2**15 - 1),
    "integer": (int, -(2**31), 2**31 - 1),
    "long": (int, -(2**63), 2**63 - 1),
    "string": (str, None, None),
    "boolean": (bool, None, None),
    "timestamp": (str, None, None),  # an unreadable one is null for delta-rs, its file's others stay
    "timestamp_ntz": (str, None, None),
}
_NO_SPEC: _Spec = (_NoValue, None, None)


@dataclasses.dataclass(frozen=True, slots=True)
class _StatsLayout:
    """How statistics are checked and read under one table schema."""

    specs: dict[str, _Spec]  # every top-level column: what its min/max values must be
    seq: bool  # the table has a ``seq`` column whose statistics delta-rs reads
    published_at: bool


def _stats_layout(metadata: _Action) -> _StatsLayout:
    """The layout of ``metadata``'s schema; UnsupportedLog when delta-rs may read ``seq`` or
    ``published_at`` statistics otherwise than the plain way (fewer indexed columns, partition
    columns, nested columns before them, other types)."""
    fields = json.loads(metadata["schemaString"])["fields"]
    config = metadata.get("configuration") or {}
    if "delta.dataSkippingNumIndexedCols" in config or "delta.dataSkippingStatsColumns" in config:
        raise UnsupportedLog("statistics columns configured")
    if metadata.get("partitionColumns"):
        raise UnsupportedLog("partition columns (statistics exclude them)")
    specs: dict[str, _Spec] = {}
    nested_before = False
    wanted = {"seq": ("byte", "short", "integer", "long"), "published_at": ("timestamp",)}
    for index, field in enumerate(fields):
        name, delta_type = field["name"], field["type"]
        if name in wanted and (nested_before or index >= _INDEXED_COLUMNS or delta_type not in wanted[name]):
            raise UnsupportedLog(f"column {name!r}: {delta_type} at {index}")
        nested_before = nested_before or not isinstance(delta_type, str)  # leaves of its own
        specs[name] = _SPECS.get(delta_type, _NO_SPEC) if isinstance(delta_type, str) else _NO_SPEC
    return _StatsLayout(specs, "seq" in specs, "published_at" in specs)


def _check_values(values: object, specs: dict[str, _Spec]) -> None:
    """Raise unless every min/max value of a known column is one delta-rs surely reads as is
    (columns not in the schema are ignored by delta-rs too)."""
    if type(values) is not dict:
        raise UnsupportedLog(f"statistics values {values!r}")
    for column, value in values.items():
        if value is None or (spec := specs.get(column)) is None:
            continue
        if type(value) is not spec[0] or (spec[1] is not None and not spec[1] <= value <= spec[2]):  # type: ignore[operator]
            raise UnsupportedLog(f"statistic {column}: {value!r}")


def _check_counts(counts: object, specs: dict[str, _Spec]) -> None:
    if type(counts) is not dict:
        raise UnsupportedLog(f"statistics nullCount {counts!r}")
    for column, count in counts.items():
        if type(count) is not int and count is not None and column in specs:
            raise UnsupportedLog(f"statistics nullCount.{column}: {count!r}")


def _parse_stats(text: str | None, layout: _StatsLayout) -> tuple[int | None, int | None, int | None]:
    """(min seq, max seq, max published_at ms) of an add's statistics, as delta-rs reads them.

    One value delta-rs cannot read makes it drop all of a file's statistics (or refuse the
    table), so every value of a known column is checked, not only the ones used.
    """
    if text is None:
        return None, None, None
    try:
        stats, end = _JSON.raw_decode(text)  # json.loads less its wrapping: this runs once per file
    except ValueError as exc:
        raise UnsupportedLog(f"statistics {text!r}") from exc
    if type(stats) is not dict or end != len(text):
        raise UnsupportedLog(f"statistics {text!r}")
    # Any: statistics values as json decodes them (_check_values checked their types)
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}  # Any: as mins
    for key, value in stats.items():
        if value is None:
            continue
        if key == "minValues" or key == "maxValues":
            _check_values(value, layout.specs)
            if key == "minValues":
                mins = value
            else:
                maxs = value
        elif key == "nullCount":
            _check_counts(value, layout.specs)
        elif not (key == "numRecords" and type(value) is int or key == "tightBounds" and type(value) is bool):
            raise UnsupportedLog(f"statistics {key}: {value!r}")
    first = mins.get("seq") if layout.seq else None
    last = maxs.get("seq") if layout.seq else None
    newest = maxs.get("published_at") if layout.published_at else None
    return first, last, None if newest is None else _timestamp_ms(newest)


@functools.lru_cache(maxsize=4096)
def _epoch_day(date: str) -> int:
    """Days from 1970-01-01 to ``YYYY-MM-DD`` (files' timestamps share few dates)."""
    try:
        return dt.date.fromisoformat(date).toordinal() - _EPOCH_DAY
    except ValueError as exc:
        raise UnsupportedLog(f"date {date!r}") from exc


def _timestamp_ms(text: str) -> int:
    """``int(ts.timestamp() * 1000)`` of the timestamp delta-rs reads from a statistic: UTC when
    it has no offset, digits past microseconds dropped. Other spellings: UnsupportedLog."""
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        raise UnsupportedLog(f"timestamp statistic {text!r}")
    date, hour, minute, second, fraction, zone = match.groups()
    hour, minute, second = int(hour), int(minute), int(second)
    if hour > 23 or minute > 59 or second > 59:  # (delta-rs rolls a second 60 over)
        raise UnsupportedLog(f"timestamp statistic {text!r}")
    offset = 0
    if zone is not None and zone != "Z":
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if hours > 23 or minutes > 59:
            raise UnsupportedLog(f"timestamp statistic {text!r}")
        offset = (1 if zone[0] == "+" else -1) * (hours * 3600 + minutes * 60)
    seconds = _epoch_day(date) * 86400 + hour * 3600 + minute * 60 + second - offset
    micros = seconds * 1_000_000 + (int(fraction[:6].ljust(6, "0")) if fraction else 0)
    # Exactly datetime.timestamp()'s float (µs / 10**6, one rounding), then ×1000 and truncated.
    return int(micros / 1_000_000 * 1000)


# --------------------------------------------------------------------------- replay

_V = TypeVar("_V")


def _apply(files: dict[str, _V], removes: Iterable[str], adds: list[tuple[str, _V]]) -> None:
    """Apply one commit to ``files`` (log path -> file), kept so that ``reversed(files)`` is
    delta-rs's order: a commit's adds are inserted last to first, after everything older."""
    for path in removes:
        files.pop(path, None)
    for path, value in reversed(adds):
        files.pop(path, None)  # a later add of a path replaces the earlier one, at its place
        files[path] = value


def _metadata_key(metadata: _Action) -> tuple[object, ...]:
    """What of a metaData action a cached snapshot depends on: the table's id, and what decides
    how statistics are read (schema, partitioning, configuration)."""
    config = tuple(sorted((metadata.get("configuration") or {}).items()))
    return (metadata["id"], metadata["schemaString"], tuple(metadata.get("partitionColumns") or ()), config)


@dataclasses.dataclass(slots=True)
class _Loaded:
    """A snapshot with what :class:`SnapshotCache` needs to carry it forward."""

    snapshot: Snapshot
    files: dict[str, ActiveFile]  # log path -> file (see _apply)
    layout: _StatsLayout | None  # None: read without statistics
    metadata_key: tuple[object, ...]
    stamp_path: str  # the log file whose stamp tells the table is still the one read
    stamp: _Stamp | None


def _snapshot(version: int, table_id: str, protocol: tuple[int, int], files: dict[str, ActiveFile]) -> Snapshot:
    return Snapshot(version, table_id, protocol[0], protocol[1], tuple(reversed(files.values())))


def _file_prefix(table_dir: str) -> str:
    """What :func:`os.path.join` puts before a relative path under ``table_dir`` (joined once
    per file, this runs for thousands of them)."""
    return table_dir if not table_dir or table_dir.endswith("/") else table_dir + "/"


def _active_file(prefix: str, path: str, size: int, stats: str | None, layout: _StatsLayout | None) -> ActiveFile:
    """The file of an add (``prefix``: :func:`_file_prefix` of the table; ``path`` relative)."""
    first, last, newest = _parse_stats(stats, layout) if layout is not None else (None, None, None)
    return ActiveFile(prefix + urllib.parse.unquote(path), size, first, last, newest)


def _listing(log_dir: str) -> list[str]:
    try:
        with os.scandir(log_dir) as entries:
            return [e.name for e in entries]
    except (FileNotFoundError, NotADirectoryError):
        raise TableNotFoundError(f"no Delta table at {os.path.dirname(log_dir)}") from None


def _hinted_checkpoint(log_dir: str, version: int | None) -> int | None:
    """The checkpoint ``_last_checkpoint`` names when it is a single-file one at or below
    ``version`` and is there; None when it cannot be used (the log is listed instead)."""
    try:
        with open(os.path.join(log_dir, "_last_checkpoint"), encoding="utf-8") as fh:
            hint = json.load(fh)
        at = int(hint["version"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None
    if hint.get("parts") not in (None, 1) or hint.get("v2Checkpoint") is not None:
        raise UnsupportedLog(f"checkpoint {at}: {hint}")
    if version is not None and at > version:
        return None
    if not os.path.exists(os.path.join(log_dir, f"{at:020d}.checkpoint.parquet")):
        return None
    return at


def _listed_checkpoint(names: Iterable[str], version: int | None) -> int | None:
    """The newest classic checkpoint at or below ``version`` in a listing of the log."""
    classic = -1
    other = -1
    for name in names:
        found = _ANY_CHECKPOINT.fullmatch(name)
        if found is None:
            continue
        at = int(found.group(1))
        if version is not None and at > version:
            continue
        if _CLASSIC_CHECKPOINT.fullmatch(name):
            classic = max(classic, at)
        else:
            other = max(other, at)
    if other >= 0 and other >= classic:
        raise UnsupportedLog(f"multi-part or v2 checkpoint at version {other}")
    return classic if classic >= 0 else None


def _read_checkpoint(path: str) -> tuple[_Action, _Action, list[tuple[str, int, str | None]]]:
    """(protocol, metaData, adds in row order) of a single-file checkpoint; its remove rows are
    tombstones for vacuum, and no path is both added and removed in one checkpoint."""
    try:
        file = pq.ParquetFile(path)
        schema = file.schema_arrow
        add_fields = schema.field("add").type.names
        columns = ["add.path", "add.size", "add.stats", "protocol", "metaData.id", "metaData.schemaString",
                   "metaData.partitionColumns", "metaData.configuration"]
        if "deletionVector" in add_fields:
            columns.append("add.deletionVector.storageType")
        columns += [v2 for v2 in ("sidecar", "checkpointMetadata") if v2 in schema.names]  # v2 checkpoints' rows
        data = file.read(columns=columns)
    except FileNotFoundError:
        raise UnsupportedLog(f"checkpoint {path} is gone") from None
    except (KeyError, pa.ArrowException) as exc:  # not a checkpoint of the form read here
        raise UnsupportedLog(f"checkpoint {path}: {exc}") from exc
    for v2 in ("sidecar", "checkpointMetadata"):
        if v2 in data.column_names and data.column(v2).null_count != data.num_rows:
            raise UnsupportedLog(f"{v2} actions in checkpoint {path}")
    protocols = data.column("protocol").drop_null().to_pylist()
    metadatas = data.column("metaData").drop_null().to_pylist()
    if len(protocols) != 1 or len(metadatas) != 1:
        raise UnsupportedLog(f"checkpoint {path}: {len(protocols)} protocol, {len(metadatas)} metaData rows")
    metadata = metadatas[0]
    metadata["configuration"] = dict(metadata["configuration"] or [])
    return protocols[0], metadata, _checkpoint_adds(data.column("add"), "stats_parsed" in add_fields)


def _checkpoint_adds(column: pa.ChunkedArray, has_parsed_stats: bool) -> list[tuple[str, int, str | None]]:
    adds = column.combine_chunks()
    adds = adds.filter(adds.is_valid())
    if "deletionVector" in adds.type.names and adds.field("deletionVector").null_count != len(adds):
        raise UnsupportedLog("deletion vectors")
    stats = adds.field("stats")
    if has_parsed_stats and stats.null_count:
        raise UnsupportedLog("statistics only as stats_parsed")  # delta-rs would read those
    paths = [_relative(p) for p in adds.field("path").to_pylist()]
    return list(zip(paths, adds.field("size").to_pylist(), stats.to_pylist(), strict=True))


def _start(log_dir: str, version: int | None) -> tuple[int | None, list[str] | None]:
    """(checkpoint to start from or None, the log listing when one was made)."""
    hinted = _hinted_checkpoint(log_dir, version)
    if hinted is not None:
        return hinted, None
    names = _listing(log_dir)
    return _listed_checkpoint(names, version), names


def _load(table: str, version: int | None, *, stats: bool) -> _Loaded:
    """The snapshot of ``table`` at ``version`` (latest when None), read from the log."""
    if version is not None and version < 0:
        raise UnsupportedLog(f"version {version}")
    table_dir = os_path(table)
    log_dir = _log_dir(table_dir)
    checkpoint, names = _start(log_dir, version)
    raw: dict[str, tuple[int, str | None]] = {}
    protocol: _Action | None = None
    metadata: _Action | None = None
    if checkpoint is not None:
        protocol, metadata, adds = _read_checkpoint(os.path.join(log_dir, f"{checkpoint:020d}.checkpoint.parquet"))
        _apply(raw, (), [(path, (size, text)) for path, size, text in adds])
    at = -1 if checkpoint is None else checkpoint
    stamp: _Stamp | None = None
    while version is None or at < version:
        commit = _read_commit(log_dir, at + 1)
        if commit is None:
            break
        at += 1
        protocol = commit.protocol or protocol
        metadata = commit.metadata or metadata
        _check_protocol(protocol)  # a protocol the reader refuses may be met on the way
        _apply(raw, commit.removes, [(path, (size, text)) for path, size, text in commit.adds])
        stamp = commit.stamp
    _check_reached(log_dir, table_dir, version, checkpoint, at, names)
    if metadata is None:
        raise UnsupportedLog("no metaData action")
    reader_writer = _check_protocol(protocol)
    layout = _stats_layout(metadata) if stats else None
    prefix = _file_prefix(table_dir)
    files = {path: _active_file(prefix, path, size, text, layout) for path, (size, text) in raw.items()}
    stamp_path = _commit_path(log_dir, at)
    if stamp is None:  # the snapshot is the checkpoint itself
        stamp = file_stamp(stamp_path)
        if stamp is None:
            stamp_path = os.path.join(log_dir, f"{at:020d}.checkpoint.parquet")
            stamp = file_stamp(stamp_path)
    snapshot = _snapshot(at, str(metadata["id"]), reader_writer, files)
    return _Loaded(snapshot, files, layout, _metadata_key(metadata), stamp_path, stamp)


def _check_reached(
    log_dir: str, table_dir: str, version: int | None, checkpoint: int | None, at: int, names: list[str] | None
) -> None:
    """Raise unless the replay got where it should: to ``version``, or to the table's latest."""
    if at < 0:  # neither a checkpoint nor version 0
        listed = names if names is not None else _listing(log_dir)
        if not any(n.endswith((".json", ".parquet")) for n in listed):
            raise TableNotFoundError(f"no Delta table at {table_dir}")
        raise UnsupportedLog("no version 0 and no checkpoint")
    if version is not None and at < version:
        raise UnsupportedLog(f"commit {at + 1} is missing (asked for version {version})")
    if version is None and names is None and at == checkpoint:
        # The checkpoint came from _last_checkpoint and no commit follows it: a stale hint (a
        # newer checkpoint whose earlier commits were cleaned) would look the same; the
        # listing tells (only right after a checkpoint, so rarely).
        newer = [n for n in _listing(log_dir) if (m := _VERSIONED.match(n)) and int(m.group(1)) > at]
        if newer:
            raise UnsupportedLog(f"log entries after the checkpoint {at} with commit {at + 1} missing")


def read_snapshot(table: str, version: int | None = None, *, stats: bool = True) -> Snapshot:
    """The snapshot of local ``table`` at ``version`` (latest when None), from its log only.

    ``stats=False`` skips the statistics (every file's seq and publish fields are None then):
    for callers that need the file list only.

    Raises:
        UnsupportedLog: the log holds something this reader does not handle (module docstring).
        TableNotFoundError: there is no table at ``table``.
    """
    return _load(table, version, stats=stats).snapshot


# --------------------------------------------------------------------------- delta-rs


def delta_rs_snapshot(table: str, version: int | None = None) -> Snapshot:
    """The same snapshot, loaded by delta-rs (any storage, any protocol delta-rs reads)."""
    loaded = delta_table(table, version)
    actions = pa.table(loaded.get_add_actions(flatten=True))
    base = os_path(table)

    def column(name: str) -> list[Any]:  # Any: pyarrow's to_pylist() values
        return actions.column(name).to_pylist() if name in actions.column_names else [None] * actions.num_rows

    files = []
    for path, size, lo, hi, newest in zip(
        column("path"), column("size_bytes"), column("min.seq"), column("max.seq"), column("max.published_at"), strict=True
    ):
        ms = int(newest.timestamp() * 1000) if newest is not None else None
        files.append(ActiveFile(os.path.join(base, urllib.parse.unquote(path)), size, lo, hi, ms))
    protocol = loaded.protocol()
    return Snapshot(
        loaded.version(), str(loaded.metadata().id), protocol.min_reader_version, protocol.min_writer_version, tuple(files)
    )


# --------------------------------------------------------------------------- cache


@dataclasses.dataclass(frozen=True, slots=True)
class _Refused:
    """A table the direct read refused: delta-rs reads it until a table of another id is there."""

    table_id: str


class SnapshotCache:
    """Latest snapshots of local tables, carried forward by reading only the commits after the
    cached version (a ``stat`` and one failed ``open`` when nothing changed: no listing, no
    delta-rs). Thread-safe; keeps the ``capacity`` most recently used tables.

    A cached snapshot is read again from scratch when the table may no longer be the one read:
    its log file of the cached version changed or is gone (a table dropped and created again
    restarts at version 0; log cleanup removed it), or a new commit carries a metaData action
    of another id, schema, partitioning or configuration. When the direct read raises
    :class:`UnsupportedLog`, delta-rs answers, and goes on answering for that table (no direct
    read is tried again) until the table delta-rs loads has another ``metaData.id``.
    """

    def __init__(self, capacity: int = CACHED_TABLES) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict[str, _Loaded | _Refused] = collections.OrderedDict()
        # What the cache did, for tests and diagnostics (not exact under concurrent calls):
        self.full_reads = 0  # direct reads from scratch tried (checkpoint, then its commits)
        self.delta_rs_reads = 0  # snapshots delta-rs loaded

    def latest(self, table: str) -> Snapshot:
        """The latest snapshot of local ``table``.

        Raises:
            TableNotFoundError: there is no table at ``table``.
        """
        if local_path(table) is None:
            # Object storage: delta-rs reads it (a LIST and the new log entries per load).
            self.delta_rs_reads += 1
            return delta_rs_snapshot(table)
        with self._lock:
            entry = self._entries.get(table)
            if entry is not None:
                self._entries.move_to_end(table)
        try:
            if isinstance(entry, _Refused):
                snapshot = self._delta_rs(table)
                if snapshot.table_id == entry.table_id:
                    return snapshot
                entry = None  # another table now: try the direct read again
            try:
                loaded = self._carried(table, entry) if entry is not None else None
                if loaded is None:
                    loaded = self._full(table)
            except UnsupportedLog:
                snapshot = self._delta_rs(table)
                self._store(table, _Refused(snapshot.table_id))
                return snapshot
        except TableNotFoundError:
            with self._lock:
                self._entries.pop(table, None)
            raise
        self._store(table, loaded)
        return loaded.snapshot

    def forget(self, table: str) -> None:
        """Drop what is cached of ``table``."""
        with self._lock:
            self._entries.pop(table, None)

    def _store(self, table: str, entry: _Loaded | _Refused) -> None:
        with self._lock:
            self._entries[table] = entry
            self._entries.move_to_end(table)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)

    def _full(self, table: str) -> _Loaded:
        self.full_reads += 1
        return _load(table, None, stats=True)

    def _delta_rs(self, table: str) -> Snapshot:
        self.delta_rs_reads += 1
        return delta_rs_snapshot(table)

    def _carried(self, table: str, cached: _Loaded) -> _Loaded | None:
        """``cached`` carried forward over the commits after it; None when the table must be
        read from scratch. ``cached`` is not changed (other threads may hold its snapshot)."""
        if file_stamp(cached.stamp_path) != cached.stamp or cached.stamp is None:
            return None
        log_dir = os.path.dirname(cached.stamp_path)
        prefix = _file_prefix(os_path(table))
        snapshot = cached.snapshot
        version = snapshot.version
        files: dict[str, ActiveFile] | None = None
        protocol = (snapshot.min_reader_version, snapshot.min_writer_version)
        stamp: _Stamp | None = None
        assert cached.layout is not None  # the cache always reads statistics
        while (commit := _read_commit(log_dir, version + 1)) is not None:
            if commit.metadata is not None and _metadata_key(commit.metadata) != cached.metadata_key:
                return None  # another table, or statistics read another way
            if commit.protocol is not None:
                protocol = _check_protocol(commit.protocol)
            files = dict(cached.files) if files is None else files
            layout = cached.layout
            _apply(files, commit.removes, [(p, _active_file(prefix, p, s, t, layout)) for p, s, t in commit.adds])
            version += 1
            stamp = commit.stamp
        if files is None:
            return cached
        return _Loaded(
            _snapshot(version, snapshot.table_id, protocol, files), files, cached.layout, cached.metadata_key,
            _commit_path(log_dir, version), stamp,
        )


DEFAULT_CACHE = SnapshotCache()
"""The process's cache of latest snapshots (topic_files, snapshot_files, latest_version use it)."""


def latest_snapshot(table: str) -> Snapshot:
    """The latest snapshot of local ``table`` through :data:`DEFAULT_CACHE` (delta-rs answers
    what the direct read does not handle).

    Raises:
        TableNotFoundError: there is no table at ``table``.
    """
    return DEFAULT_CACHE.latest(table)
