"""The one module that performs Delta Lake I/O (delta-rs ``deltalake`` + ``pyarrow``).

Everything that creates, appends to, or reads sharedsub's tables goes through here, so the rest
of the code never imports ``deltalake``. Reads avoid ``DeltaTable.to_pyarrow_table()`` (it can
abort the interpreter at exit, delta-rs #2184); they read the Parquet files the log names.

Local data dirs are read by tailing ``_delta_log/<version>.json`` directly, which costs one
``stat`` per probe and no table reload (docs/feasibility.md §2).
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import os
import shutil
import urllib.parse
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Transaction, WriterProperties, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from sharedsub.core import layout
from sharedsub.core.errors import TopicExists, TopicNotFound
from sharedsub.storage import schemas
from sharedsub.storage.private import ensure_data_dir

# commitInfo key marking the commits sharedsub's maintenance makes (value: what it did). It is in
# the logs of every table written so far: never change it (tests/storage/test_log_marks.py).
MAINTENANCE_MARK = "sharedsub.maintenance"

# commitInfo key of the id TableAppender gives each commit (finds a commit that landed although
# the append raised).
COMMIT_MARK = "sharedsub.commit"

# History kept for time travel and replay; the log is cleaned at checkpoints after this.
DEFAULT_TABLE_CONFIG = {
    "delta.logRetentionDuration": "interval 7 days",
    "delta.deletedFileRetentionDuration": "interval 7 days",
}


def _local(path: str) -> str:
    return path[len("file://") :] if path.startswith("file://") else path


def log_file(table: str, version: int) -> str:
    """Path of the commit file of ``version`` in ``table``."""
    return os.path.join(_local(table), "_delta_log", f"{version:020d}.json")


def table_exists(table: str) -> bool:
    """True when ``table`` has a Delta log with at least version 0 (or a checkpoint)."""
    log = os.path.join(_local(table), "_delta_log")
    if not os.path.isdir(log):
        return False
    return any(n.endswith(".json") or n.endswith(".parquet") for n in os.listdir(log))


# --------------------------------------------------------------------------- topics


def create_topic(root: str, name: str) -> str:
    """Create the empty Delta table of topic ``name``; raise TopicExists if it is there."""
    path = layout.topic_table(root, name)
    if table_exists(path):
        raise TopicExists(name)
    ensure_data_dir(root)  # 0700 when this creates it
    os.makedirs(_local(path), exist_ok=True)
    try:
        DeltaTable.create(path, schemas.TOPIC, mode="error", name=name, configuration=DEFAULT_TABLE_CONFIG)
    except Exception as exc:  # delta-rs reports an existing table with a generic error
        if table_exists(path):
            raise TopicExists(name) from exc
        raise
    return path


def list_topics(root: str) -> list[str]:
    """Names of every topic under ``root``, sorted."""
    base = _local(layout.join(root, layout.TOPICS_DIR))
    if not os.path.isdir(base):
        return []
    return sorted(n for n in os.listdir(base) if table_exists(os.path.join(base, n)))


def topic_exists(root: str, name: str) -> bool:
    """True when topic ``name`` exists under ``root``."""
    return layout.is_valid_topic_name(name) and table_exists(layout.topic_table(root, name))


def require_topic(root: str, name: str) -> str:
    """Path of topic ``name``; raise TopicNotFound when it does not exist."""
    if not topic_exists(root, name):
        raise TopicNotFound(name)
    return layout.topic_table(root, name)


# --------------------------------------------------------------------------- appends


_APPEND_ATTEMPTS = 5


def _fsync_path(path: str, *, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def find_commit(table: str, commit_id: str, *, after: int) -> int | None:
    """The version after ``after`` whose commit carries ``commit_id`` (:data:`COMMIT_MARK`), or
    None. Reads the log entries from ``after + 1`` to the latest (local tables)."""
    latest = latest_version(table, after) if after >= 0 else latest_version(table)
    for version in range(max(after + 1, 0), latest + 1):
        entry = _read_log_entry(table, version)
        if entry is not None and entry.info.get(COMMIT_MARK) == commit_id:
            return version
    return None


def sync_commit(table: str, version: int) -> None:
    """Force commit ``version`` of a local ``table`` to disk: the data files it added, its log
    entry, and the directories that name them.

    delta-rs makes a commit atomic and visible (the log entry appears whole or not at all) but
    does not fsync it, so a power loss could take back a commit a publisher was told about. A
    caller that settles publishers after this has them on disk. Other storage: nothing to do.
    """
    if "://" in table and not table.startswith("file://"):
        return
    entry = _read_log_entry(table, version)
    if entry is None:
        return
    dirs = {os.path.dirname(log_file(table, version))}
    for path in entry.added:
        _fsync_path(path)
        dirs.add(os.path.dirname(path))
    _fsync_path(log_file(table, version))
    for directory in dirs:
        _fsync_path(directory, directory=True)


class CommitNotSynced(Exception):
    """An append's commit landed (its rows are visible) but forcing it to disk failed. Retry the
    append with the same commit id: it syncs again and does not write the rows twice."""

    def __init__(self, table: str, version: int, cause: BaseException) -> None:
        super().__init__(f"version {version} of {table} is committed but not forced to disk: {cause}")
        self.table = table
        self.version = version


class TableAppender:
    """Appends Arrow tables to one Delta table, reusing the loaded ``DeltaTable``.

    The table object is re-opened every ``reopen_every`` commits because a long-lived one gets
    slower as the log grows: measured by bench/append_cost.py (bench/RESULTS.md), an appender
    that kept its object past delta-rs's checkpoint (every 100 commits) appended about 40%
    slower until it re-opened; every 100 commits (the default) or 50 keeps it flat. With ``fsync``, each commit is forced to disk
    before :meth:`append` returns (:func:`sync_commit`).

    Each commit carries a commit id (:data:`COMMIT_MARK` in its commitInfo), so that an append
    that raised can tell whether its commit landed anyway: delta-rs can fail *after* the log
    entry is in place (seen: the post-commit checkpoint on a full disk raised ENOSPC for a commit
    that was visible). Retrying such an append blindly would store its rows twice.
    """

    def __init__(
        self, path: str, schema: pa.Schema, *, reopen_every: int = 100, fsync: bool = False, evolve: bool = False
    ) -> None:
        self.path = path
        self.schema = schema
        self._fsync = fsync
        # Merge columns ``schema`` has and the table lacks into the table's schema (a table made
        # by an older release); a column the table has and ``schema`` lacks is still refused.
        self._evolve = evolve
        self._reopen_every = reopen_every
        self._commits = 0
        self._table: DeltaTable | None = None
        # (commit id, version known before its first try) of the last append that raised: a
        # retry with that id looks for its commit after that version before writing again.
        self._tried: tuple[str, int] | None = None

    def _open(self) -> DeltaTable | None:
        if self._table is None or self._commits >= self._reopen_every:
            self._commits = 0
            self._table = DeltaTable(self.path) if table_exists(self.path) else None
        return self._table

    def append(
        self,
        data: pa.Table,
        *,
        app_transaction: tuple[str, int] | None = None,
        commit_id: str | None = None,
        tried_after: int | None = None,
    ) -> int:
        """Commit ``data`` as one Delta commit; return the new table version.

        ``app_transaction`` records ``(app_id, version)`` in the same commit (Delta ``txn``).
        ``commit_id`` names this data: a caller retrying an append that raised passes the same id
        again, and gets the version of the earlier try's commit when that one landed (the rows
        are not written twice; only the fsync is done again). Without it a fresh id is used. An
        append that raises has not committed, or committed and was not synced (retry it with its
        id). ``tried_after``: ``commit_id`` may have been tried by another appender (a process that
        died) when the table was at this version or later; its commit is looked for from there.
        """
        marker = commit_id or uuid.uuid4().hex
        if tried_after is not None and (self._tried is None or self._tried[0] != marker):
            self._tried = (marker, tried_after)
        version = self._landed(marker)
        if version is None:
            version = self._commit(data, marker, app_transaction)
        if self._fsync:
            try:
                sync_commit(self.path, version)
            except Exception as exc:  # _tried is kept: a retry with the id syncs again
                raise CommitNotSynced(self.path, version, exc) from exc
        self._tried = None
        return version

    def _landed(self, marker: str) -> int | None:
        """Version of the commit an earlier, failed try of ``marker`` made; None when it made none."""
        if self._tried is None or self._tried[0] != marker:
            return None
        return find_commit(self.path, marker, after=self._tried[1])

    def _commit(self, data: pa.Table, marker: str, app_transaction: tuple[str, int] | None) -> int:
        props = CommitProperties(
            custom_metadata={COMMIT_MARK: marker},
            app_transactions=[Transaction(app_transaction[0], app_transaction[1])] if app_transaction else None,
        )
        table = self._open()
        target: Any = table if table is not None else self.path
        if self._tried is None or self._tried[0] != marker:
            self._tried = (marker, table.version() if table is not None else -1)
        try:
            for attempt in range(_APPEND_ATTEMPTS):
                try:
                    write_deltalake(
                        target,
                        # One chunk: delta-rs may write the record batches of a many-chunk table
                        # into the file out of order (seen: a parked part of seqs 0-2 and a later
                        # one of 3-4 stored as 3, 4, 0, 1, 2), and rows must stay in seq order.
                        data.cast(self.schema).combine_chunks(),
                        mode="append",
                        commit_properties=props,
                        configuration=DEFAULT_TABLE_CONFIG if table is None else None,
                        schema_mode="merge" if self._evolve and table is not None else None,
                    )
                    break
                except CommitFailedError:
                    # A maintenance commit (delete of acknowledged rows, compaction) landed since this
                    # table object was loaded; delta-rs refuses the append against the old snapshot.
                    # An append does not depend on what it read: reload and commit again.
                    if table is None or attempt + 1 == _APPEND_ATTEMPTS:
                        raise
                    table.update_incremental()
        except Exception:
            self._table = None  # its state after a failed write is not trusted: reload next time
            landed = find_commit(self.path, marker, after=self._tried[1])
            if landed is None:
                raise
            return landed
        self._commits += 1
        if table is None:
            self._table = table = DeltaTable(self.path)
        return table.version()

    def transaction_version(self, app_id: str) -> int | None:
        """Last version recorded for ``app_id`` in this table, or None."""
        table = self._open()
        if table is None:
            return None
        table.update_incremental()
        return table.transaction_version(app_id)


def last_seq(path: str) -> int:
    """Highest ``seq`` stored in a topic table, or -1 when it is empty."""
    table = DeltaTable(path)
    actions = pa.table(table.get_add_actions(flatten=True))
    if actions.num_rows == 0:
        return -1
    highest = -1
    for value in actions.column("max.seq").to_pylist():
        if value is not None:
            highest = max(highest, int(value))
    if highest < 0 and actions.num_rows:
        # No stats: fall back to reading the seq column.
        for uri in table.file_uris():
            col = pq.read_table(uri, columns=["seq"]).column("seq")
            if len(col):
                highest = max(highest, int(pa.compute.max(col).as_py()))
    return highest


# --------------------------------------------------------------------------- log tailing


@dataclasses.dataclass(frozen=True, slots=True)
class Commit:
    """The data-changing files one commit added, and its app transactions."""

    version: int
    added: tuple[str, ...]  # absolute file paths
    transactions: dict[str, int]


@dataclasses.dataclass(frozen=True, slots=True)
class _LogEntry:
    """What one ``_delta_log/<version>.json`` says, as far as sharedsub's readers care."""

    info: dict[str, Any]  # commitInfo ({} when absent)
    added: tuple[str, ...]  # absolute paths of the data files added with dataChange
    removed: int  # data files removed with dataChange
    transactions: dict[str, int]  # app id -> version
    mtime_ms: int
    rewritten: tuple[str, ...] = ()  # absolute paths of the data files added without dataChange
    removed_quietly: int = 0  # data files removed without dataChange (compaction)


def _read_log_entry(table: str, version: int) -> _LogEntry | None:
    """Parse one commit file; None when that version is not (or no longer) in the log."""
    path = log_file(table, version)
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
        mtime_ms = int(os.stat(path).st_mtime * 1000)
    except FileNotFoundError:
        return None
    base = _local(table)
    info: dict[str, Any] = {}
    added: list[str] = []
    rewritten: list[str] = []
    removed = quiet = 0
    txns: dict[str, int] = {}
    for line in lines:
        if not line:
            continue
        action = json.loads(line)
        if "add" in action:
            path = os.path.join(base, urllib.parse.unquote(action["add"]["path"]))
            (added if action["add"].get("dataChange", True) else rewritten).append(path)
        elif "remove" in action:
            if action["remove"].get("dataChange", True):
                removed += 1
            else:
                quiet += 1
        elif "txn" in action:
            txns[action["txn"]["appId"]] = int(action["txn"]["version"])
        elif "commitInfo" in action:
            info = action["commitInfo"]
    return _LogEntry(info, tuple(added), removed, txns, mtime_ms, tuple(rewritten), quiet)


def read_commit(table: str, version: int) -> Commit | None:
    """The rows-adding files and app transactions of ``version``; None when not (yet) committed.

    A maintenance delete re-adds the rows it keeps (with dataChange, as Delta requires): they
    are not new rows, so a commit marked :data:`MAINTENANCE_MARK` adds nothing here.
    """
    entry = _read_log_entry(table, version)
    if entry is None:
        return None
    added = () if MAINTENANCE_MARK in entry.info else entry.added
    return Commit(version, added, entry.transactions)


@dataclasses.dataclass(frozen=True, slots=True)
class FileChanges:
    """Every data file one commit added, and whether it removed any, whatever the actions'
    ``dataChange`` flags or the commit's mark (maintenance reasons about files, not rows)."""

    version: int
    added: tuple[str, ...]  # absolute paths, with and without dataChange
    removes: bool


def file_changes(table: str, version: int) -> FileChanges | None:
    """The files commit ``version`` added and whether it removed files; None when that version
    is not (or no longer) in the log."""
    entry = _read_log_entry(table, version)
    if entry is None:
        return None
    return FileChanges(version, entry.added + entry.rewritten, bool(entry.removed or entry.removed_quietly))


def latest_version(table: str, known: int = -1) -> int:
    """Highest committed version of ``table`` at or after ``known`` (-1 when none).

    Probes successive log files from ``known + 1``: O(new commits), no table load.
    """
    if known < 0:
        if not table_exists(table):
            return -1
        try:
            return DeltaTable(table).version()
        except TableNotFoundError:
            return -1
    version = known
    while os.path.exists(log_file(table, version + 1)):
        version += 1
    return version


# --------------------------------------------------------------------------- table identity
# A table dropped and created again under the same path restarts at version 0; its Delta
# ``metaData.id`` (a UUID chosen at creation) tells the two apart.


def table_id(table: str) -> str | None:
    """The Delta ``metaData.id`` of ``table``; None when there is no table there.

    Read from the version-0 commit file when it is still in the log (one small file parse),
    else through delta-rs (the checkpoint holds the metadata once log cleanup removed it).
    """
    try:
        with open(log_file(table, 0), encoding="utf-8") as fh:
            for line in fh:
                if '"metaData"' in line:
                    return str(json.loads(line)["metaData"]["id"])
    except FileNotFoundError:
        pass
    if not table_exists(table):
        return None
    try:
        return str(DeltaTable(table).metadata().id)
    except TableNotFoundError:  # dropped while we looked
        return None


def _first_commit_stamp(table: str) -> tuple[int, int] | None:
    """``(inode, mtime ns)`` of ``table``'s version-0 commit file; None when it is absent."""
    try:
        st = os.stat(log_file(table, 0))
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns)


class TableIds:
    """Cached :func:`table_id` of tables that are polled often (one ``stat`` per lookup).

    An id is re-read when the table's version-0 commit file changes (a table created again has
    a new one) or when the caller says so (``reload``: e.g. the table's version went backwards,
    which is how a new table shows when neither has its version-0 file any more).
    """

    def __init__(self) -> None:
        self._ids: dict[str, tuple[tuple[int, int] | None, str | None]] = {}

    def get(self, table: str, *, reload: bool = False) -> str | None:
        """The id of ``table`` (None when there is no table), from the cache when still valid."""
        stamp = _first_commit_stamp(table)
        cached = self._ids.get(table)
        if not reload and cached is not None and cached[0] == stamp and (stamp is not None or cached[1] is not None):
            return cached[1]
        found = table_id(table)
        self._ids[table] = (stamp, found)
        return found


def read_files(paths: Sequence[str], columns: Sequence[str] | None = None) -> pa.Table | None:
    """Concatenate the given Parquet files (None when there are none)."""
    tables = [_plain_types(pq.read_table(p, columns=list(columns) if columns else None)) for p in paths]
    if not tables:
        return None
    return pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0]


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
    """Absolute paths of the data files of ``table`` at ``version`` (latest when None)."""
    dt = DeltaTable(table, version=version) if version is not None else DeltaTable(table)
    return [_local(u) for u in dt.file_uris()]


def read_table(table: str, columns: Sequence[str] | None = None, version: int | None = None) -> pa.Table | None:
    """Whole ``table`` (at ``version``) as Arrow; None when it does not exist."""
    if not table_exists(table):
        return None
    return read_files(snapshot_files(table, version), columns)


def iter_rows(data: pa.Table | None) -> Iterator[dict[str, Any]]:
    """Rows of an Arrow table as dicts (nothing for None)."""
    if data is None:
        return iter(())
    return iter(data.to_pylist())


# --------------------------------------------------------------------------- payload lookup


@dataclasses.dataclass(frozen=True, slots=True)
class SeqFile:
    """One data file of a topic table's snapshot, from its add action's statistics."""

    path: str  # absolute
    first_seq: int | None  # None when the file has no statistics
    last_seq: int | None
    newest_published_ms: int | None  # max ``published_at``, ms since the epoch


def topic_files(table: str) -> tuple[int, list[SeqFile]]:
    """``(version, files)`` of ``table``'s latest snapshot, with their seq and publish-time ranges."""
    dt = DeltaTable(table)
    actions = pa.table(dt.get_add_actions(flatten=True))
    base = _local(table)

    def column(name: str) -> list[Any]:
        return actions.column(name).to_pylist() if name in actions.column_names else [None] * actions.num_rows

    files = []
    for path, lo, hi, newest in zip(
        column("path"), column("min.seq"), column("max.seq"), column("max.published_at"), strict=True
    ):
        ms = int(newest.timestamp() * 1000) if newest is not None else None
        files.append(SeqFile(os.path.join(base, urllib.parse.unquote(path)), lo, hi, ms))
    return dt.version(), files


class TopicIndex:
    """Finds the files that may hold a topic seq, from the add actions' ``seq`` statistics.

    Appends give files with disjoint seq ranges, but compaction (sharedsub.runtime.maintenance) may bin
    files that were not neighbours, so ranges can overlap: a seq then has several candidate
    files, and the reader keeps the one that holds it.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._ranges: list[tuple[int, int, str]] = []
        self._starts: list[int] = []  # first seq of each range, for bisect
        self._reach: list[int] = []  # highest last seq of the ranges up to each one

    def refresh(self) -> None:
        """Reload the file ranges from the latest snapshot."""
        _, files = topic_files(self.path)
        ranges = sorted(
            (int(f.first_seq), int(f.last_seq), f.path) for f in files if f.first_seq is not None and f.last_seq is not None
        )
        reach, highest = [], -1
        for _, hi, _ in ranges:
            highest = max(highest, hi)
            reach.append(highest)
        self._ranges = ranges
        self._starts = [r[0] for r in ranges]
        self._reach = reach

    def files_for(self, seqs: Iterable[int]) -> dict[str, list[int]]:
        """Map each candidate file to the wanted seqs it may hold; reloads once if a seq is unknown."""
        wanted = sorted(set(seqs))
        out, missing = self._assign(wanted)
        if missing:
            self.refresh()
            out, missing = self._assign(wanted)
        return out

    def _assign(self, wanted: list[int]) -> tuple[dict[str, list[int]], list[int]]:
        out: dict[str, list[int]] = {}
        missing = []
        for s in wanted:
            i = bisect.bisect_right(self._starts, s) - 1
            hit = False
            # Ranges starting at or below s, newest start first, while one of them may reach s.
            while i >= 0 and self._reach[i] >= s:
                lo, hi, path = self._ranges[i]
                if lo <= s <= hi:
                    out.setdefault(path, []).append(s)
                    hit = True
                i -= 1
            if not hit:
                missing.append(s)
        return out, missing


def _leaf_column(metadata: pq.FileMetaData, name: str) -> int | None:
    """Index of the Parquet leaf column ``name`` (leaf indices differ from the Arrow schema's
    once a nested column, such as ``application_properties``, comes before it)."""
    if metadata.num_row_groups == 0:
        return None
    group = metadata.row_group(0)
    for i in range(group.num_columns):
        if group.column(i).path_in_schema == name:
            return i
    return None


def _read_seqs(path: str, wanted: list[int]) -> pa.Table:
    """``seq`` and ``message`` of the rows of one topic file whose seq is in ``wanted`` (ascending).

    Reads only the row groups whose ``seq`` statistics overlap ``wanted`` (compacted files hold
    many small row groups), without the dataset layer (a filtered ``pq.read_table`` builds a
    dataset per call: most of the cost of resolving a few hundred payloads, profiled)."""
    if "://" in path:
        return pq.read_table(path, columns=["seq", "message"], filters=[("seq", "in", wanted)])
    pf = pq.ParquetFile(path)
    meta = pf.metadata
    leaf = _leaf_column(meta, "seq")
    lo, hi = wanted[0], wanted[-1]
    groups = []
    for i in range(meta.num_row_groups):
        stats = meta.row_group(i).column(leaf).statistics if leaf is not None else None
        if stats is None or not stats.has_min_max or (stats.max >= lo and stats.min <= hi):
            groups.append(i)
    data = pf.read_row_groups(groups, columns=["seq", "message"])
    return data.filter(pc.is_in(data.column("seq"), value_set=pa.array(wanted, pa.int64())))


def read_messages(index: TopicIndex, seqs: Iterable[int]) -> dict[int, bytes]:
    """Encoded messages for the given seqs of one topic (a seq the topic no longer holds is left out).

    The index may name a file that compaction or topic retention removed from the table and
    vacuum then deleted (sharedsub.runtime.maintenance): the seqs it was asked for are looked up again
    in a refreshed index, once. Only the row groups whose ``seq`` statistics cover a wanted seq
    are read (compacted topic files hold many small row groups for this).
    """
    found: dict[int, bytes] = {}
    wanted = sorted(set(seqs))
    for attempt in range(2):
        vanished: list[int] = []
        for path, part in index.files_for(wanted).items():
            try:
                data = _read_seqs(path, part)
            except FileNotFoundError:
                vanished.extend(part)
                continue
            found.update(zip(data.column("seq").to_pylist(), data.column("message").to_pylist(), strict=True))
        if not vanished or attempt:
            break
        index.refresh()
        wanted = vanished
    return found


# --------------------------------------------------------------------------- history (read-only)
# For inspection (sharedsub.runtime.inspection, the CLI, notebooks): what each retained commit added and
# when. Nothing below writes.


@dataclasses.dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One retained commit of a table: its version, commit time and the data files it added."""

    version: int
    timestamp_ms: int  # commitInfo.timestamp (ms since the epoch); the log file's mtime if absent
    operation: str
    added: tuple[str, ...]  # absolute paths of the data files the commit added (dataChange)
    removed: int  # data files it removed (dataChange): a delete or rewrite, not a plain append

    @property
    def is_append(self) -> bool:
        """True when the commit only added rows: its ``added`` files hold new rows only (a
        delete or compaction re-adds the rows it keeps, which are not new)."""
        return self.removed == 0


def _retained_versions(table: str) -> list[int]:
    log = os.path.join(_local(table), "_delta_log")
    if not os.path.isdir(log):
        return []
    out = []
    for name in os.listdir(log):
        stem, _, ext = name.partition(".")
        if ext == "json" and stem.isdigit():
            out.append(int(stem))
    return sorted(out)


def history(table: str) -> list[HistoryEntry]:
    """Every commit of ``table`` still in its log, oldest first (empty when there is no table).

    Local tables only (it reads ``_delta_log/*.json``, like :func:`read_commit`). When log
    cleanup removed the first commits, the oldest retained entry stands for everything before
    it too: its ``added`` is the whole snapshot at that version (and it counts as an append).
    """
    entries: list[HistoryEntry] = []
    for version in _retained_versions(table):
        entry = _read_log_entry(table, version)
        if entry is None:  # cleaned up between listing and reading
            continue
        added, removed = entry.added, entry.removed
        if not entries and version > 0:
            added, removed = tuple(snapshot_files(table, version)), 0
        timestamp = int(entry.info.get("timestamp", entry.mtime_ms))
        entries.append(HistoryEntry(version, timestamp, str(entry.info.get("operation", "")), added, removed))
    return entries


# --------------------------------------------------------------------------- maintenance (writes)
# Used by sharedsub.runtime.maintenance only. Every commit made here carries MAINTENANCE_MARK, so that
# read_commit knows its added files hold no new rows.


def _mark(what: str) -> CommitProperties:
    return CommitProperties(custom_metadata={MAINTENANCE_MARK: what})


def read_seqs(table: str) -> pa.Array:
    """The ``seq`` column of ``table``'s current snapshot (int64; empty when there is no table)."""
    data = read_table(table, ["seq"]) if table_exists(table) else None
    if data is None:
        return pa.array([], pa.int64())
    return data.column("seq").combine_chunks()


def delete_rows(table: str, predicate: str, what: str) -> int:
    """Delete the rows matching the SQL ``predicate``; return how many went.

    Concurrent appends (the fan-out, the committer) are fine: delta-rs re-checks and commits
    after them; a conflicting commit raises ``CommitFailedError`` (the caller retries later).
    """
    metrics = DeltaTable(table).delete(predicate, commit_properties=_mark(what))
    return int(metrics.get("num_deleted_rows", 0))


def data_file_count(table: str) -> int:
    """Data files in ``table``'s current snapshot (0 when there is no table)."""
    return len(snapshot_files(table)) if table_exists(table) else 0


def compact(
    table: str, *, version: int | None = None, target_size: int | None = None, row_group_rows: int | None = None
) -> int:
    """Rewrite small files into fewer large ones (``dataChange`` false); return files removed.

    ``version``: compact only the files of the snapshot at that version (commits after it are
    left as they are; a later commit that removed one of those files makes this one fail with
    ``CommitFailedError``). ``target_size`` (bytes) and ``row_group_rows`` bound the files and
    their row groups (delta-rs defaults otherwise).
    """
    dt = DeltaTable(table, version=version) if version is not None else DeltaTable(table)
    props = WriterProperties(max_row_group_size=row_group_rows) if row_group_rows else None
    metrics = dt.optimize.compact(target_size=target_size, writer_properties=props, commit_properties=_mark("compact"))
    return int(metrics.get("numFilesRemoved", 0))


def version_readable(table: str, version: int) -> bool:
    """True when the snapshot at ``version`` can be loaded from the log as it is now: its commit
    file is there, and so is the first commit or a checkpoint at or before it (log cleanup
    removes old commit files up to a checkpoint)."""
    log = os.path.join(_local(table), "_delta_log")
    if not os.path.exists(log_file(table, version)):
        return False
    if os.path.exists(log_file(table, 0)):
        return True
    try:
        names = os.listdir(log)
    except FileNotFoundError:
        return False
    return any(".checkpoint." in n and n.split(".", 1)[0].isdigit() and int(n.split(".", 1)[0]) <= version for n in names)


def vacuum(table: str, retention_hours: int) -> int:
    """Delete files no version newer than ``retention_hours`` needs; return how many."""
    removed = DeltaTable(table).vacuum(
        retention_hours=retention_hours, dry_run=False, enforce_retention_duration=False, commit_properties=_mark("vacuum")
    )
    return len(removed)


def checkpoint_and_clean_log(table: str, retention_hours: int, *, version: int | None = None) -> None:
    """Write a checkpoint at the current version (or at ``version``) and drop the log files
    before it that are older than ``retention_hours``.

    The table's ``delta.logRetentionDuration`` is set to the retention first (one metadata
    commit, only when it differs), so log cleanup never removes history that vacuum keeps.
    With ``version``, the commit files from that version on stay whatever their age (a reader
    that has read up to it, like the fan-out, still finds every commit after it).
    """
    dt = DeltaTable(table)
    wanted = f"interval {int(retention_hours)} hours"
    if dt.metadata().configuration.get("delta.logRetentionDuration") != wanted:
        dt.alter.set_table_properties({"delta.logRetentionDuration": wanted}, commit_properties=_mark("retention"))
        dt.update_incremental()
    if version is not None and version < dt.version():
        dt = DeltaTable(table, version=version)
    dt.create_checkpoint()
    dt.cleanup_metadata()


def remove_table(table: str) -> None:
    """Delete a local table directory and everything in it (no-op when absent)."""
    shutil.rmtree(_local(table), ignore_errors=True)


# --------------------------------------------------------------------------- replay (sharedsub.core.replay)
# Reads a subscription table's past for a replay, and appends back the rows a replay restores.
# The restore commit carries MAINTENANCE_MARK too: its rows were routed before, they are not new.


class HistoryMissing(Exception):
    """A version's log entry or one of the data files it needs is gone (log cleanup, vacuum)."""


def read_since(table: str, version: int, columns: Sequence[str] | None = None) -> tuple[pa.Table | None, pa.Table | None, int]:
    """``(rows as of version, rows the commits after it appended, latest version)`` of ``table``.

    ``version`` -1 means before the first commit (no rows as of it). The appended rows are those
    :func:`read_commit` calls new (a maintenance rewrite adds none). Either table is None when
    empty.

    Raises:
        HistoryMissing: the log entry of a version from ``version`` on, or a data file one of
            them needs, no longer exists.
    """
    latest = latest_version(table)
    try:
        at = None
        if version >= 0:
            at = read_files(snapshot_files(table, version), columns)
        files: list[str] = []
        for v in range(version + 1, latest + 1):
            commit = read_commit(table, v)
            if commit is None:
                raise HistoryMissing(f"{table}: the log entry of version {v} is gone")
            files.extend(commit.added)
        after = read_files(files, columns)
    except HistoryMissing:
        raise
    except (OSError, DeltaError) as exc:  # a vacuumed file, or a version delta-rs cannot load
        raise HistoryMissing(f"{table}: version {version} cannot be read: {exc}") from exc
    return at, after, latest


def append_restored(table: str, data: pa.Table, what: str) -> None:
    """Append rows a replay restores (marked: readers tailing the log take them for old rows)."""
    for attempt in range(_APPEND_ATTEMPTS):
        try:
            write_deltalake(table, data, mode="append", commit_properties=_mark(what))
            return
        except CommitFailedError:  # a concurrent maintenance commit: an append may simply retry
            if attempt + 1 == _APPEND_ATTEMPTS:
                raise
