"""Reading the Delta log of a table: commits, their marks, versions, table identity.

Local data dirs are read by tailing ``_delta_log/<version>.json`` directly, which costs one
``stat`` per probe and no table reload (docs/feasibility.md §2); a data dir on object storage
the same way through its store (a HEAD per probe, a GET per commit read).
"""

from __future__ import annotations

import dataclasses
import json
import os
import urllib.parse
from typing import Any

from deltalake.exceptions import TableNotFoundError

from sharedsub.core.layout import local_path
from sharedsub.storage.delta.log_snapshot import latest_snapshot
from sharedsub.storage.delta.tables import delta_table, log_file, object_exists, read_object, table_exists
from sharedsub.storage.objects import prefetch
from sharedsub.storage.objects.locations import locate

# commitInfo key marking the commits sharedsub's maintenance makes (value: what it did). It is in
# the logs of every table written so far: never change it (tests/storage/test_log_marks.py).
MAINTENANCE_MARK = "sharedsub.maintenance"


@dataclasses.dataclass(frozen=True, slots=True)
class Commit:
    """The data-changing files one commit added, and its app transactions."""

    version: int
    added: tuple[str, ...]  # absolute file paths
    transactions: dict[str, int]
    added_rows: tuple[int | None, ...] = ()  # rows of each added file (its stats), None when unknown


@dataclasses.dataclass(frozen=True, slots=True)
class LogEntry:
    """What one ``_delta_log/<version>.json`` says, as far as sharedsub's readers care."""

    info: dict[str, Any]  # commitInfo ({} when absent). Any: json.loads's values, read by key
    added: tuple[str, ...]  # absolute paths of the data files added with dataChange
    removed: int  # data files removed with dataChange
    transactions: dict[str, int]  # app id -> version
    mtime_ms: int
    rewritten: tuple[str, ...] = ()  # absolute paths of the data files added without dataChange
    removed_quietly: int = 0  # data files removed without dataChange (compaction)
    added_rows: tuple[int | None, ...] = ()  # rows of each of ``added`` (numRecords), None when unknown


def read_log_entry(table: str, version: int) -> LogEntry | None:
    """Parse one commit file; None when that version is not (or no longer) in the log."""
    found = read_object(log_file(table, version))
    if found is None:
        return None
    data, mtime_ms = found
    return _parse_entry(table, data.decode("utf-8").splitlines(), mtime_ms)


def _data_path(table: str, relative: str) -> str:
    """A data file's location from its log path (URL-encoded, relative to the table)."""
    name = urllib.parse.unquote(relative)
    local = local_path(table)
    return os.path.join(local, name) if local is not None else f"{table.rstrip('/')}/{name}"


def _parse_entry(table: str, lines: list[str], mtime_ms: int) -> LogEntry:
    info: dict[str, Any] = {}  # Any: as LogEntry.info
    added: list[str] = []
    added_rows: list[int | None] = []
    rewritten: list[str] = []
    removed = quiet = 0
    txns: dict[str, int] = {}
    for line in lines:
        if not line:
            continue
        action = json.loads(line)
        if "add" in action:
            path = _data_path(table, action["add"]["path"])
            if action["add"].get("dataChange", True):
                added.append(path)
                added_rows.append(_records(action["add"].get("stats")))
            else:
                rewritten.append(path)
        elif "remove" in action:
            if action["remove"].get("dataChange", True):
                removed += 1
            else:
                quiet += 1
        elif "txn" in action:
            txns[action["txn"]["appId"]] = int(action["txn"]["version"])
        elif "commitInfo" in action:
            info = action["commitInfo"]
    return LogEntry(info, tuple(added), removed, txns, mtime_ms, tuple(rewritten), quiet, tuple(added_rows))


def _records(stats: str | None) -> int | None:
    """``numRecords`` of an add action's statistics (a JSON string); None when absent."""
    if not stats:
        return None
    try:
        value = json.loads(stats).get("numRecords")
    except (ValueError, AttributeError):
        return None
    return int(value) if isinstance(value, int) else None


def read_commit(table: str, version: int) -> Commit | None:
    """The rows-adding files and app transactions of ``version``; None when not (yet) committed.

    A maintenance delete re-adds the rows it keeps (with dataChange, as Delta requires): they
    are not new rows, so a commit marked :data:`MAINTENANCE_MARK` adds nothing here.
    """
    entry = read_log_entry(table, version)
    if entry is None:
        return None
    if MAINTENANCE_MARK in entry.info:
        return Commit(version, (), entry.transactions)
    return Commit(version, entry.added, entry.transactions, entry.added_rows)


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
    entry = read_log_entry(table, version)
    if entry is None:
        return None
    return FileChanges(version, entry.added + entry.rewritten, bool(entry.removed or entry.removed_quietly))


def latest_version(table: str, known: int = -1) -> int:
    """Highest committed version of ``table`` at or after ``known`` (-1 when none).

    Probes successive log files from ``known + 1``: O(new commits), no table load. Without
    ``known``, a local table's latest version comes from the process's snapshot cache
    (sharedsub.storage.delta.log_snapshot: O(new commits) once the table is cached).
    """
    if known < 0:
        if local_path(table) is None:
            if not table_exists(table):
                return -1
            try:
                return delta_table(table).version()
            except TableNotFoundError:
                return -1
        try:
            return latest_snapshot(table).version
        except TableNotFoundError:
            return -1
    version = known
    if local_path(table) is None:
        return _latest_listed(table, known)
    while object_exists(log_file(table, version + 1)):
        version += 1
    return version


def _latest_listed(table: str, known: int) -> int:
    """:func:`latest_version` on object storage: a HEAD of the next entry (an idle table costs
    that one request), then of the one after it (a table probed every 0.1 s under light traffic
    has one new commit), then, when that is there too, one LIST of the entries after it, not a
    HEAD each (a busy topic has a few new ones, each a round trip of 10-30 ms). A LIST is billed
    as a PUT, twelve GETs or HEADs (S3's list prices): it is made only for a third new entry.
    Inside a prefetch (sharedsub.storage.objects.prefetch) the HEADs are answered from memory."""
    if not object_exists(log_file(table, known + 1)):
        return known
    if not object_exists(log_file(table, known + 2)):
        return known + 1
    store, key = locate(table)
    prefix = f"{key.rstrip('/')}/_delta_log/"
    version = known + 2
    for meta in store.list(prefix, after=f"{prefix}{version:020d}.json"):
        stem, _, ext = meta.key[len(prefix) :].partition(".")
        if ext != "json" or not stem.isdigit():
            continue  # checkpoints, _last_checkpoint
        if int(stem) != version + 1:
            break  # versions are consecutive; a gap is an entry not listed yet
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
    first = read_object(log_file(table, 0))
    if first is not None:
        for line in first[0].decode("utf-8").splitlines():
            if '"metaData"' in line:
                return str(json.loads(line)["metaData"]["id"])
    if not table_exists(table):
        return None
    try:
        return str(delta_table(table).metadata().id)
    except TableNotFoundError:  # dropped while we looked
        return None


def _first_commit_stamp(table: str) -> tuple[int, int] | str | None:
    """``(inode, mtime ns)`` of ``table``'s version-0 commit file (its tag on object storage);
    None when it is absent."""
    local = local_path(table)
    if local is None:
        found = prefetch.meta(log_file(table, 0))  # (from memory inside a prefetch)
        return found.etag if found is not None else None
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
        self._ids: dict[str, tuple[tuple[int, int] | str | None, str | None]] = {}

    def get(self, table: str, *, reload: bool = False) -> str | None:
        """The id of ``table`` (None when there is no table), from the cache when still valid."""
        stamp = _first_commit_stamp(table)
        cached = self._ids.get(table)
        if not reload and cached is not None and cached[0] == stamp and (stamp is not None or cached[1] is not None):
            return cached[1]
        found = table_id(table)
        self._ids[table] = (stamp, found)
        return found
