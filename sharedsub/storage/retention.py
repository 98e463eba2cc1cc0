"""The storage side of retention (sharedsub.core.ops.retention has the rules; sharedsub.runtime.maintenance runs them).

Reads the fan-out's progress from its Spark checkpoint, the seq ranges a subscription table still
keeps, a topic's files; removes a topic's routed files below a cut, compacts a topic's routed
files, and trims the catalog; on a local data dir or one on object storage.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from sharedsub.core import layout
from sharedsub.core.layout import local_path, partition_of_seq
from sharedsub.core.ops import retention
from sharedsub.core.ops.retention import FanoutProgress, Holds, Revision, TopicFile
from sharedsub.storage.delta.commit_log import file_changes, latest_version, read_commit, table_id
from sharedsub.storage.delta.table_maintenance import compact, delete_rows, version_readable
from sharedsub.storage.delta.table_reads import read_table, snapshot_files
from sharedsub.storage.delta.tables import data_files, log_file, modified_ms, read_object
from sharedsub.storage.fanout_progress import read_progress
from sharedsub.storage.parked_rows import ParkedRows
from sharedsub.storage.topics import topic_files

log = logging.getLogger(__name__)

# Topic files compaction writes: payload lookups (payload_index.read_messages) read the row groups that
# hold the seqs they want, so a compacted file is kept moderate and its row groups small.
TOPIC_COMPACT_TARGET_BYTES = 32 * 1024 * 1024
TOPIC_ROW_GROUP_ROWS = 1024

# Catalog revisions removed per delete commit (the predicate lists them).
_CATALOG_DELETE_CHUNK = 1000


def _batch_ids(directory: str) -> list[int]:
    try:
        return sorted(int(n) for n in os.listdir(directory) if n.isdigit())
    except FileNotFoundError:
        return []


def read_batch_offset(offsets_dir: str, batch: int) -> dict[str, Any] | None:  # Any: json.loads's, read by key
    """The source offset Spark logged in ``<offsets_dir>/<batch>`` for micro-batch ``batch``
    (sharedsub.core.ops.retention.parse_offset_file); None when the file is not there or has none."""
    try:
        with open(os.path.join(offsets_dir, str(batch)), encoding="utf-8") as fh:
            return retention.parse_offset_file(fh.read())
    except FileNotFoundError:
        return None


def read_fanout_progress(root: str) -> FanoutProgress:
    """The fan-out's progress (see FanoutProgress): for a local data dir from its Spark
    checkpoint ``<data>/_checkpoints/fanout``; for one on object storage from the progress record
    the job keeps there (sharedsub.storage.fanout_progress: its checkpoint is on the driver's host).

    Spark writes ``offsets/<batch>`` when it plans a micro-batch and ``commits/<batch>`` once the
    batch's ``foreachBatch`` (the routing) returned; both by an atomic rename.

    Raises:
        ValueError: the progress record is not one (nothing may be trimmed on its word).
        OSError: the store did not answer.
    """
    checkpoint = local_path(layout.fanout_checkpoint(root))
    if checkpoint is None:
        return read_progress(root)
    if not os.path.isdir(checkpoint):
        return FanoutProgress()
    offsets_dir = os.path.join(checkpoint, "offsets")
    committed = _batch_ids(os.path.join(checkpoint, "commits"))
    planned = _batch_ids(offsets_dir)
    last_committed = committed[-1] if committed else None
    versions: dict[str, int] = {}
    ids: dict[str, str] = {}
    if last_committed is not None:
        offset = read_batch_offset(offsets_dir, last_committed)
        if offset:
            versions = {str(k): int(v) for k, v in offset.get("topics", {}).items()}
            ids = {str(k): str(v) for k, v in (offset.get("ids") or {}).items()}
    planned_ms = None
    if planned and (last_committed is None or planned[-1] > last_committed):
        try:
            planned_ms = int(os.stat(os.path.join(offsets_dir, str(planned[-1]))).st_mtime * 1000)
        except FileNotFoundError:  # purged between the listing and the stat: a newer one exists
            planned_ms = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
    return FanoutProgress(versions, ids, planned_ms, found=True)


def commit_time_ms(table: str, version: int) -> int | None:
    """When commit ``version`` of ``table`` was written (its log file's mtime), None when gone."""
    return modified_ms(log_file(table, version))


# --------------------------------------------------------------------------- subscription holds


def _file_min_seqs(location: str) -> Holds:
    """Lowest ``seq`` of one Parquet file in each topic partition, from its row-group statistics
    (its rows when a group has none, or spans partitions). A file on a store is read whole:
    subscription tables hold references, small files."""
    local = local_path(location)
    if local is not None:
        source: str | pa.BufferReader = local
    else:
        got = read_object(location)
        if got is None:
            raise FileNotFoundError(location)
        source = pa.BufferReader(got[0])
    meta = pq.read_metadata(source)
    names = meta.schema.names
    if "seq" not in names or meta.num_rows == 0:
        return {}
    column = names.index("seq")
    lows: list[Holds] = []
    for i in range(meta.num_row_groups):
        stats = meta.row_group(i).column(column).statistics
        if stats is None or not stats.has_min_max or partition_of_seq(stats.min) != partition_of_seq(stats.max):
            if isinstance(source, pa.BufferReader):
                source.seek(0)
            data = pq.read_table(source, columns=["seq"]).column("seq")
            return retention.lowest_by_partition(data.to_numpy(zero_copy_only=False))
        lows.append({partition_of_seq(stats.min): int(stats.min)})
    return retention.topic_hold(lows)


# Lowest seq per data file already read (files never change under a name: every write makes a new
# one), so that a bucket's files are fetched once, not at every maintenance run. Bounded: cleared
# when it grows past this many entries.
_MIN_SEQ_CACHE_LIMIT = 100_000
_min_seqs: dict[str, Holds] = {}


def _empty_local(location: str) -> bool:
    """Whether ``location`` is a local file of no bytes (FileNotFoundError when it is gone)."""
    local = local_path(location)
    return local is not None and os.path.getsize(local) == 0


def lowest_retained_seqs(table: str) -> Holds:
    """Per topic partition, the lowest ``seq`` in any data file under ``table`` (a partition it
    has none of is not a key): every file a version inside the history retention reads is there
    until vacuum, so no replay reaches below it."""
    if len(_min_seqs) > _MIN_SEQ_CACHE_LIMIT:
        _min_seqs.clear()
    lows: list[Holds] = []
    for location in data_files(table):
        if location in _min_seqs:
            low = _min_seqs[location]
        else:
            try:
                if _empty_local(location):
                    # Made ahead for a commit that has not written it yet (no version names it:
                    # sharedsub.storage.delta.prepared_commit): it holds nothing, and is not
                    # remembered, since its rows come.
                    continue
                low = _file_min_seqs(location)
            except FileNotFoundError:  # vacuumed between the listing and the read
                continue
            _min_seqs[location] = low
        lows.append(low)
    return retention.topic_hold(lows)


def parked_hold(root: str, table_rel: str, partitions: list[int]) -> Holds:
    """What the rows the fan-out parked for subscription table ``table_rel`` hold of a topic with
    ``partitions`` (parked because their commit failed: sharedsub.storage.parked_rows.ParkedRows,
    in their micro-batch's committed range but not in the table yet;
    sharedsub.core.ops.retention.parked_hold)."""
    return retention.parked_hold(ParkedRows(root).first_seqs(table_rel), partitions)


# --------------------------------------------------------------------------- topics


def _routed_through(table: str, routed_version: int, latest: int) -> int | None:
    """The newest version whose snapshot holds only rows the fan-out has routed: the fan-out's
    committed version, carried over the commits after it that add no new rows (maintenance's
    own: a compaction or delete rewrites routed rows only). None when a commit file in between
    is gone (the files cannot be told apart then)."""
    version = routed_version
    while version < latest:
        commit = read_commit(table, version + 1)
        if commit is None:
            return None
        if commit.added:
            break
        version += 1
    return version


def topic_cut(
    table: str, progress: FanoutProgress, topic: str, *, hold: int | None, published_before_ms: int
) -> int | None:
    """The seq at and below which ``topic``'s rows may go (sharedsub.core.ops.retention.topic_cut), a file
    counting as routed unless a commit after the routed snapshot (_routed_through) added it.
    None: nothing may go."""
    routed_version = progress.routed_version(topic, table_id(table))
    if routed_version < 0:
        return None
    latest, files = topic_files(table)
    through = _routed_through(table, routed_version, latest)
    if through is None:
        return None
    unrouted: set[str] = set()
    for version in range(through + 1, latest + 1):
        changes = file_changes(table, version)
        if changes is None:
            return None
        unrouted.update(changes.added)
    candidates = [
        TopicFile(f.first_seq, f.last_seq, f.newest_published_ms, routed=f.path not in unrouted) for f in files
    ]
    return retention.topic_cut(candidates, hold=hold, published_before_ms=published_before_ms)


def log_kept_from(table: str, progress: FanoutProgress, topic: str) -> int | None:
    """The version from which ``topic``'s commit files must stay for the fan-out: the one its
    committed offset names (the source reads every commit after it, those that add no rows
    too), -1 when a fan-out checkpoint exists but has read nothing of this table (keep the
    whole log), None when there is no checkpoint (nothing to keep for)."""
    if not progress.found:
        return None
    return progress.routed_version(topic, table_id(table))


def remove_topic_rows(table: str, cut: int) -> int:
    """Remove the rows ``seq <= cut`` of a topic table (whole files, see topic_cut); return how
    many. The commit is marked (commit_log.MAINTENANCE_MARK): readers never take it for new rows."""
    return delete_rows(table, f"seq <= {int(cut)}", "topic retention")


def compact_routed(table: str, progress: FanoutProgress, topic: str, min_files: int) -> int:
    """Compact the files of ``topic``'s routed snapshot (_routed_through); return the files
    removed (0: not now).

    Files the fan-out has still to read are never rewritten: once vacuum deleted the originals
    the source could not read them. Skipped when a later commit removed files (compaction of
    that snapshot would conflict), when the snapshot can no longer be loaded, or when it has
    fewer than ``min_files`` files. The new files are added without ``dataChange`` in a marked
    commit: the source reads no rows from it.
    """
    routed_version = progress.routed_version(topic, table_id(table))
    if routed_version < 0:
        return 0
    latest = latest_version(table)
    through = _routed_through(table, routed_version, latest)
    if through is None:
        return 0
    for version in range(through + 1, latest + 1):
        changes = file_changes(table, version)
        if changes is None or changes.removes:
            return 0
    if not version_readable(table, through) or len(snapshot_files(table, through)) < min_files:
        return 0
    return compact(
        table, version=through, target_size=TOPIC_COMPACT_TARGET_BYTES, row_group_rows=TOPIC_ROW_GROUP_ROWS
    )


# --------------------------------------------------------------------------- catalog


def trim_catalog(root: str, *, keys_with_tables: set[str], now: dt.datetime, retention_period: dt.timedelta) -> int:
    """Remove the catalog revisions sharedsub.core.ops.retention.catalog_revisions_to_drop allows; return
    how many went. The delete commits are marked: catalog readers tailing the log keep what they
    hold (the rows that stay are the ones they hold)."""
    table = layout.catalog_table(root)
    data = read_table(table, ["key", "revision", "state", "shared", "durable", "updated_at"])
    if data is None:
        return 0
    rows = [
        Revision(r["key"], int(r["revision"]), r["state"] == "deleted", not r["shared"] and not r["durable"], r["updated_at"])
        for r in data.to_pylist()
    ]
    drop = retention.catalog_revisions_to_drop(rows, keys_with_tables=keys_with_tables, now=now, retention=retention_period)
    removed = 0
    for i in range(0, len(drop), _CATALOG_DELETE_CHUNK):
        chunk = ", ".join(str(r) for r in drop[i : i + _CATALOG_DELETE_CHUNK])
        removed += delete_rows(table, f"revision IN ({chunk})", "catalog retention")
    return removed
