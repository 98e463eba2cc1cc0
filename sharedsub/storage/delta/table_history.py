"""A table's retained history: each commit's files and time, reads since a version, restores.

For inspection (sharedsub.runtime.inspection, the CLI, notebooks): what each retained commit added and
when; and for replay (sharedsub.core.ops.replay): a subscription table's past, and appending back the
rows a replay restores. The restore commit carries MAINTENANCE_MARK too: its rows were routed
before, they are not new.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pyarrow as pa
from deltalake import write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError

from sharedsub.storage.delta.appender import APPEND_ATTEMPTS
from sharedsub.storage.delta.commit_log import LogEntry, latest_version, read_commit, read_log_entry
from sharedsub.storage.delta.table_maintenance import marked_commit
from sharedsub.storage.delta.table_reads import read_files, snapshot_files
from sharedsub.storage.delta.tables import log_versions
from sharedsub.storage.objects.locations import storage_options


@dataclasses.dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One retained commit of a table: its version, commit time and the data files it added."""

    version: int
    timestamp_ms: int  # commitInfo.timestamp (ms since the epoch); the log file's mtime if absent
    operation: str
    added: tuple[str, ...]  # absolute paths of the data files the commit added (dataChange)
    removed: int  # data files it removed (dataChange): a delete or rewrite, not a plain append
    rows_added: int | None = None  # rows of ``added`` from the log's statistics (None: some file has none)

    @property
    def is_append(self) -> bool:
        """True when the commit only added rows: its ``added`` files hold new rows only (a
        delete or compaction re-adds the rows it keeps, which are not new)."""
        return self.removed == 0


def history(table: str) -> list[HistoryEntry]:
    """Every commit of ``table`` still in its log, oldest first (empty when there is no table).

    It reads ``_delta_log/*.json`` (like :func:`read_commit`; on object storage through the
    store). When log cleanup removed the first commits, the oldest retained entry stands for everything before
    it too: its ``added`` is the whole snapshot at that version (and it counts as an append).
    """
    entries: list[HistoryEntry] = []
    for version in log_versions(table):
        entry = read_log_entry(table, version)
        if entry is None:  # cleaned up between listing and reading
            continue
        if not entries and version > 0:
            # The oldest retained entry stands for the snapshot: its rows are not the log's count.
            snapshot = tuple(snapshot_files(table, version))
            entries.append(dataclasses.replace(_entry(version, entry), added=snapshot, removed=0, rows_added=None))
        else:
            entries.append(_entry(version, entry))
    return entries


def _entry(version: int, entry: LogEntry) -> HistoryEntry:
    """Log entry ``version`` as a :class:`HistoryEntry` (its rows from the log's statistics)."""
    rows = None if None in entry.added_rows else sum(r for r in entry.added_rows if r is not None)
    timestamp = int(entry.info.get("timestamp", entry.mtime_ms))
    return HistoryEntry(version, timestamp, str(entry.info.get("operation", "")), entry.added, entry.removed, rows)


def recent_history(table: str, limit: int) -> list[HistoryEntry]:
    """The newest ``limit`` commits of ``table`` still in its log, newest first (empty when there
    is no table); each entry as :func:`history` gives it, but the oldest retained one is not
    widened to the snapshot: this is a timeline to look at (the console), not a replay's input.
    Reads the log listing and ``limit`` entries, however long the table's history is."""
    entries: list[HistoryEntry] = []
    for version in sorted(log_versions(table), reverse=True)[:limit]:
        entry = read_log_entry(table, version)
        if entry is None:  # cleaned up between listing and reading
            continue
        entries.append(_entry(version, entry))
    return entries


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
    for attempt in range(APPEND_ATTEMPTS):
        try:
            write_deltalake(
                table, data, mode="append", commit_properties=marked_commit(what), storage_options=storage_options(table)
            )
            return
        except CommitFailedError:  # a concurrent maintenance commit: an append may simply retry
            if attempt + 1 == APPEND_ATTEMPTS:
                raise
