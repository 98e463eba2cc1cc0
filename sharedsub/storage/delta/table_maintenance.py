"""Maintenance writes: deletes, compaction, vacuum, checkpoints and log cleanup.

Used by maintenance (sharedsub.runtime.maintenance, and sharedsub.storage.retention for the
topic and catalog trims it runs; table_history's restore commit is marked the same way). Every
commit made here carries MAINTENANCE_MARK, so that read_commit knows its added files hold no new
rows.
"""

from __future__ import annotations

from deltalake import CommitProperties, WriterProperties

from sharedsub.storage.delta.commit_log import MAINTENANCE_MARK
from sharedsub.storage.delta.table_reads import snapshot_files
from sharedsub.storage.delta.tables import delta_table, log_file, log_names, object_exists, table_exists


def marked_commit(what: str) -> CommitProperties:
    """Commit properties carrying :data:`MAINTENANCE_MARK` with ``what`` the commit does."""
    return CommitProperties(custom_metadata={MAINTENANCE_MARK: what})


def delete_rows(table: str, predicate: str, what: str) -> int:
    """Delete the rows matching the SQL ``predicate``; return how many went.

    Concurrent appends (the fan-out, the committer) are fine: delta-rs re-checks and commits
    after them; a conflicting commit raises ``CommitFailedError`` (the caller retries later).
    """
    metrics = delta_table(table).delete(predicate, commit_properties=marked_commit(what))
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
    dt = delta_table(table, version)
    props = WriterProperties(max_row_group_size=row_group_rows) if row_group_rows else None
    metrics = dt.optimize.compact(target_size=target_size, writer_properties=props, commit_properties=marked_commit("compact"))
    return int(metrics.get("numFilesRemoved", 0))


def version_readable(table: str, version: int) -> bool:
    """True when the snapshot at ``version`` can be loaded from the log as it is now: its commit
    file is there, and so is the first commit or a checkpoint at or before it (log cleanup
    removes old commit files up to a checkpoint)."""
    if not object_exists(log_file(table, version)):
        return False
    if object_exists(log_file(table, 0)):
        return True
    names = log_names(table)
    return any(".checkpoint." in n and n.split(".", 1)[0].isdigit() and int(n.split(".", 1)[0]) <= version for n in names)


def vacuum(table: str, retention_hours: int) -> int:
    """Delete files no version newer than ``retention_hours`` needs; return how many."""
    removed = delta_table(table).vacuum(
        retention_hours=retention_hours,
        dry_run=False,
        enforce_retention_duration=False,
        commit_properties=marked_commit("vacuum"),
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
    dt = delta_table(table)
    wanted = f"interval {int(retention_hours)} hours"
    if dt.metadata().configuration.get("delta.logRetentionDuration") != wanted:
        dt.alter.set_table_properties({"delta.logRetentionDuration": wanted}, commit_properties=marked_commit("retention"))
        dt.update_incremental()
    if version is not None and version < dt.version():
        dt = delta_table(table, version)
    dt.create_checkpoint()
    dt.cleanup_metadata()
