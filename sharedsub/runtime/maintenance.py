"""Table maintenance: drop acknowledged rows, compact, vacuum, clean logs, remove old generations,
trim topics and the catalog.

Subscription tables only grow by fan-out appends and ack logs by the committer's group
commits: one small file per micro-batch or group; topic tables and the catalog likewise.
:func:`run_once` (scheduled by :class:`MaintenanceThread` every ``[maintenance] interval``
seconds) keeps them bounded:

1. **Acknowledged rows.** For each active subscription generation, the *ack watermark* is the
   highest ``seq`` such that every routed row at or below it is settled for good (accepted,
   rejected, expired, dead-lettered, and not opened again by a replay: sharedsub.core.delivery.acklog; shared
   consumers ack out of order, so rows above the first unsettled one stay). When at least
   ``min_acked_rows`` rows are below it, those rows are deleted from the subscription table and
   from its ack log. The delete commits carry :data:`commit_log.MAINTENANCE_MARK`, so tailers do not
   take the rows a delete rewrites for new ones; the backlog (routed minus acknowledged) is
   unchanged by it.
2. **Compaction** of subscription tables, ack logs, dead-letter tables, the catalog and its link
   events with at least ``compact_min_files`` data files (``dataChange`` false: no reader sees
   new rows); of topic tables too, but only of the files the fan-out has routed, and after
   their rows below the cut went (step 6).
3. **Vacuum** of every table: files that no version inside ``history_retention_hours`` needs are
   deleted; then a checkpoint, and log files older than the table's log retention are dropped.
   Time travel and replay (docs/design.md §6) work for any version inside the retention.
4. **Old generations.** The tables of a generation that is no longer current (a re-created or
   changed subscription) or of a deleted subscription are removed once the generation ended
   more than ``history_retention_hours`` ago. A *non-durable* subscription's tables serve no
   one once it ended (nothing replays them): they go at the first run :data:`NON_DURABLE_GRACE`
   after the end, provided the fan-out plans whatever it writes from then on with a catalog
   that has the end (its checkpoint shows no micro-batch in flight, or one planned after the
   catalog's last commit); otherwise after the retention like the others. A key's directory
   goes with its last table.
5. **Catalog revisions** (sharedsub.core.ops.retention.catalog_revisions_to_drop): a revision superseded
   by a newer one of its key goes once the newer one is older than the history retention; the
   newest revision of every key stays (deleted ones too: generation numbers continue after
   them), except a deleted plain consumer's once its tables are gone and the deletion is older
   than the retention; the catalog's highest revision always stays, so revision numbers keep
   increasing. The deletes are marked: catalog readers tailing the log keep what they hold.
6. **Topic rows** (sharedsub.core.ops.retention.topic_cut). A row of a topic table, the only copy of its
   payload, goes when (a) the fan-out has routed it: it is in the topic's snapshot at the
   version its last *committed* micro-batch read (``<data>/_checkpoints/fanout``; no checkpoint
   there, nothing goes), (b) no active subscription generation of the topic holds it: a
   non-durable one holds from its first routed row not settled for good as the front end
   consuming it vouches (:func:`run_once`'s ``settled_below``: its acknowledgements live in that
   memory only, never in an ack log; the rows below are deleted from its table as a durable
   one's acknowledged rows are; with no front end vouching, from its lowest row), a
   durable one from the lowest seq any data file of its table still has (a replay re-delivers
   what the table held at any version inside the history retention, and vacuum keeps exactly
   those files), rows the fan-out parked for a table it could not commit to hold too; a topic
   nobody subscribes to holds nothing, and (c) it was published more than
   ``topic_retention_hours`` ago (-1: the history retention). Rows go by whole files, oldest
   first, never the newest file (the front end numbers new messages after the highest seq it
   finds), so the delete removes files and adds none; it is marked as well. The fan-out's source
   reads the rows each topic commit *adds*, without the marked ones and without
   ``dataChange``-false adds, so neither the delete nor a compaction is routed again. The front
   end's payload index (payload_index.TopicIndex) re-reads the table when a file it names is gone, and
   takes overlapping seq ranges (compaction may bin files that were not neighbours). Topic files
   are compacted only from the snapshot the fan-out has routed (a file it still has to read is
   never rewritten, so vacuum never deletes one), into files of at most 32 MiB with small row
   groups (a payload lookup reads the row groups holding its seqs); as compaction bins recent
   rows with older ones, a topic may keep up to that much beyond what the rules above need. A
   topic's log is checkpointed and cleaned only up to the fan-out's committed offset: it finds
   every commit after it, whatever the retention. Dead-letter rows refer to topic rows too; they
   do not hold them (their payload stays readable for the topic retention).

Each step of each table is independent: a failure (for example a commit conflict with a
concurrent writer) is logged and counted, the rest goes on, and the next run tries again.
The pure parts (:func:`ack_watermark`, :func:`removable_generations`, sharedsub.core.ops.retention) are
tested as tables.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from sharedsub.core import layout
from sharedsub.core.config import MaintenanceSettings
from sharedsub.core.delivery.acklog import ack_state_of
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops import retention
from sharedsub.core.ops.retention import FanoutProgress, Holds
from sharedsub.core.publish.write_faults import errno_name, fault_errno
from sharedsub.storage import ack_log_lock
from sharedsub.storage import retention as stored
from sharedsub.storage.catalog import CatalogReader
from sharedsub.storage.delta.table_maintenance import checkpoint_and_clean_log, compact, data_file_count, delete_rows, vacuum
from sharedsub.storage.delta.table_reads import read_seqs, read_table
from sharedsub.storage.delta.tables import child_names, remove_table, table_exists
from sharedsub.storage.topics import list_topic_partitions

log = logging.getLogger(__name__)


Policy = MaintenanceSettings
"""The ``[maintenance]`` settings are the policy (documented in sharedsub/core/defaults.toml)."""


@dataclasses.dataclass(slots=True)
class Report:
    """What one run did."""

    acked_rows_deleted: int = 0
    topic_rows_deleted: int = 0
    catalog_revisions_deleted: int = 0
    files_compacted: int = 0
    files_vacuumed: int = 0
    generations_removed: int = 0
    tables_checked: int = 0
    errors: int = 0
    storage_fault: str | None = None  # the data dir took no writes (no space, read-only): why


def ack_watermark(routed: np.ndarray, settled: np.ndarray) -> int | None:
    """Highest routed ``seq`` such that it and every routed seq below it are in ``settled``.

    None when there is no such seq (nothing routed, or the lowest routed row is unsettled).
    """
    if routed.size == 0:
        return None
    ordered = np.sort(routed)
    done = np.isin(ordered, settled)
    if done.all():
        return int(ordered[-1])
    first_open = int(np.argmin(done))  # index of the first False
    return None if first_open == 0 else int(ordered[first_open - 1])


_GENERATION_DIR = re.compile(r"^(?:acks-|dlq-)?g(\d+)$")


def generation_of(dirname: str) -> int | None:
    """Generation a subscription directory entry belongs to (``g3``, ``acks-g3``, ``dlq-g3``)."""
    match = _GENERATION_DIR.match(dirname)
    return int(match.group(1)) if match else None


# How long a non-durable subscription's ended generation waits before its tables go (when the
# fan-out is known to route nothing more to them): the front end's last acknowledgements of it
# may still be in the committer's queue right after the catalog commit that ended it.
NON_DURABLE_GRACE = dt.timedelta(seconds=10)


def removable_generations(
    record: SubscriptionRecord | None,
    generations: Iterable[int],
    now: dt.datetime,
    retention: dt.timedelta,
    *,
    fanout_caught_up: bool = False,
) -> list[int]:
    """The generations among ``generations`` whose tables may go, ascending.

    A generation ended when the next one was created (the current record's ``created_at``) or
    when the subscription was deleted (its ``updated_at``); it may go when that is more than
    ``retention`` ago. A non-durable subscription's tables have no use once ended (nothing
    replays them): they go once the generation ended :data:`NON_DURABLE_GRACE` ago, if
    ``fanout_caught_up`` (the fan-out decides whatever it writes from now on with a catalog
    that has the end; else they wait for the retention like the others). The current generation
    of an active subscription never goes; nothing goes for a key the catalog does not know (its
    tables may belong to a record being written).
    """
    if record is None:
        return []
    if record.active:
        ended, candidates = record.created_at, {g for g in generations if g < record.generation}
    else:
        ended, candidates = record.updated_at, {g for g in generations if g <= record.generation}
    wait = retention
    if fanout_caught_up and not record.identity.durable:
        wait = min(retention, NON_DURABLE_GRACE)
    return sorted(candidates) if now - ended > wait else []


def _settled_seqs(ack_table: str) -> np.ndarray:
    data = read_table(ack_table, ["seq", "outcome"]) if table_exists(ack_table) else None
    return np.array(sorted(ack_state_of(data).settled), np.int64)


def _step(report: Report, what: str, table: str, fn: Callable[[], int | None]) -> int:
    try:
        return int(fn() or 0)
    except Exception as exc:  # noqa: BLE001 (one table's failure must not stop the run; the next run retries)
        report.errors += 1
        code = fault_errno(exc)
        if code is not None:  # every step fails alike then: one line for the run (run_once)
            report.storage_fault = report.storage_fault or f"{os.strerror(code)} ({errno_name(code)})"
            return 0
        log.warning("maintenance: %s of %s failed: %s", what, table, exc)
        return 0


def _drop_acknowledged(
    root: str, record: SubscriptionRecord, policy: Policy, report: Report, settled_below: int | None = None
) -> Holds:
    """Delete the acknowledged rows below the ack watermark; return the generation's first
    routed seq not settled for good in each topic partition, which holds its topic's rows.

    ``settled_below``: for a non-durable generation, the front end's word that every row below
    it is settled (its acknowledgements are in that memory only, never in an ack log).
    """
    table = layout.join(root, record.table)
    acks = layout.join(root, layout.ack_table_rel(record.key, record.generation))
    # Reads and deletes under the ack log's lock: a replay must not mark messages in between
    # (sharedsub.storage.ack_log_lock says why).
    with ack_log_lock.holding(acks):
        return _drop_below_watermark(table, acks, policy, report, settled_below)


def _drop_below_watermark(
    table: str, acks: str, policy: Policy, report: Report, settled_below: int | None
) -> Holds:
    routed = read_seqs(table).to_numpy()
    settled = _settled_seqs(acks)
    if settled_below is not None:
        settled = np.union1d(settled, routed[routed < settled_below])
    first_open = retention.first_unsettled(routed, settled)
    watermark = ack_watermark(routed, settled)
    if watermark is None or int(np.count_nonzero(routed <= watermark)) < policy.min_acked_rows:
        return first_open
    predicate = f"seq <= {watermark}"
    # Subscription rows first: if the second delete fails, acks of rows that are gone are harmless.
    deleted = _step(report, "delete acknowledged rows", table, lambda: delete_rows(table, predicate, "acknowledged"))
    if deleted:
        report.acked_rows_deleted += deleted
        if table_exists(acks):
            _step(report, "delete acknowledgements", acks, lambda: delete_rows(acks, predicate, "acknowledged"))
    return first_open


def _tidy(table: str, policy: Policy, report: Report) -> None:
    if not table_exists(table):
        return
    report.tables_checked += 1
    if data_file_count(table) >= policy.compact_min_files:
        report.files_compacted += _step(report, "compaction", table, lambda: compact(table))
    report.files_vacuumed += _step(report, "vacuum", table, lambda: vacuum(table, policy.history_retention_hours))
    _step(report, "checkpoint", table, lambda: checkpoint_and_clean_log(table, policy.history_retention_hours))


def _subscription_dirs(root: str) -> Mapping[str, list[str]]:
    base = layout.join(root, layout.SUBSCRIPTIONS_DIR)
    return {key: child_names(layout.join(base, key)) for key in child_names(base)}


def _subscription_tables(
    root: str, records: Mapping[str, SubscriptionRecord], policy: Policy, report: Report, now: dt.datetime, fanout_caught_up: bool
) -> set[str]:
    """Remove ended generations and tidy the others; return the keys that still have tables."""
    period = dt.timedelta(hours=policy.history_retention_hours)
    left: set[str] = set()
    for key, entries in _subscription_dirs(root).items():
        record = records.get(key)
        by_generation: dict[int, list[str]] = {}
        for entry in entries:
            generation = generation_of(entry)
            if generation is not None:
                by_generation.setdefault(generation, []).append(entry)
        gone = set(removable_generations(record, by_generation, now, period, fanout_caught_up=fanout_caught_up))
        for generation, names in sorted(by_generation.items()):
            for name in names:
                table = layout.join(root, layout.SUBSCRIPTIONS_DIR, key, name)
                if generation in gone:
                    remove_table(table)
                else:
                    _tidy(table, policy, report)
            if generation in gone:
                report.generations_removed += 1
                log.info("maintenance: removed generation %d of %s", generation, key)
        directory = layout.join(root, layout.SUBSCRIPTIONS_DIR, key)
        remaining = child_names(directory) if gone else entries  # listed again only after removals
        local = layout.local_path(directory)
        if gone and not remaining and local is not None:
            # Nothing left: drop the key's directory too (a writer creating a table in it at the
            # same moment keeps it: rmdir refuses a directory that is not empty). A store has no
            # directories: a prefix with no keys is gone by itself.
            with contextlib.suppress(OSError):
                os.rmdir(local)
        if remaining or (gone and child_names(directory)):  # a table created meanwhile keeps it
            left.add(key)
    return left


def _holds(
    root: str,
    records: Iterable[SubscriptionRecord],
    first_open: Mapping[str, Holds],
    partitions: Mapping[str, list[int]],
) -> dict[str, Holds]:
    """Per topic and partition, the lowest seq an active subscription generation may still
    deliver (sharedsub.core.ops.retention.subscription_hold), rows the fan-out parked for it
    included. A topic whose holds cannot all be read is missing: nothing of it may go."""
    holds: dict[str, list[Holds]] = {}
    failed: set[str] = set()
    for record in records:
        if not record.active:
            continue
        try:
            retained = stored.lowest_retained_seqs(layout.join(root, record.table)) if record.identity.durable else {}
            hold = retention.subscription_hold(
                durable=record.identity.durable, first_open=first_open.get(record.key, {}), lowest_retained=retained
            )
            parked = stored.parked_hold(root, record.table, partitions.get(record.topic, [0]))
        except Exception as exc:  # noqa: BLE001 (unreadable: keep every row of the topic this run)
            failed.add(record.topic)
            log.warning("maintenance: cannot tell which rows %s still needs: %s", record.key, exc)
            continue
        holds.setdefault(record.topic, []).extend([hold, parked])
    return {topic: retention.topic_hold(h) for topic, h in holds.items() if topic not in failed}


def _retain_topic(
    root: str,
    topic: str,
    hold: int | None,
    progress: FanoutProgress,
    policy: Policy,
    report: Report,
    now: dt.datetime,
    *,
    trim: bool = True,
    partition: int = 0,
) -> None:
    """Remove the rows of the topic's partition ``partition`` below the cut (unless not
    ``trim``), compact its routed files, vacuum, checkpoint.

    The cut comes first: rows that may go are removed as the files they are in, not rewritten
    into a compacted file first; a compaction that binned them with the newest rows would keep
    them until a newer file arrives (the newest file always stays).
    """
    table = layout.topic_partition_table(root, topic, partition)
    if not table_exists(table):
        return
    # The fan-out's progress names each topic table as its directory (jobs/sources/deltars_topics).
    topic = layout.topic_partition_dir(topic, partition)
    report.tables_checked += 1
    before_ms = int((now - dt.timedelta(hours=policy.topic_retention)).timestamp() * 1000)
    cut = None
    try:
        if trim:
            cut = stored.topic_cut(table, progress, topic, hold=hold, published_before_ms=before_ms)
    except Exception as exc:  # noqa: BLE001 (one topic's failure must not stop the run; the next run retries)
        report.errors += 1
        log.warning("maintenance: topic retention of %s failed: %s", table, exc)
    if cut is not None:
        deleted = _step(report, "topic retention", table, lambda: stored.remove_topic_rows(table, cut))
        report.topic_rows_deleted += deleted
        if deleted:
            log.info("maintenance: removed %d rows up to seq %d of topic %s", deleted, cut, topic)
    if data_file_count(table) >= policy.compact_min_files:
        report.files_compacted += _step(
            report, "compaction", table, lambda: stored.compact_routed(table, progress, topic, policy.compact_min_files)
        )
    report.files_vacuumed += _step(report, "vacuum", table, lambda: vacuum(table, policy.history_retention_hours))
    # The fan-out reads each commit after its offset: those commit files stay, however old.
    kept_from = stored.log_kept_from(table, progress, topic)
    if kept_from is None or kept_from >= 0:
        _step(
            report,
            "checkpoint",
            table,
            lambda: checkpoint_and_clean_log(table, policy.history_retention_hours, version=kept_from),
        )


SettledBelow = Callable[[SubscriptionRecord], "int | None"]
"""The front end's :meth:`first_open_in_memory`: for a non-durable subscription generation it
consumes, a seq every row below which is settled (None: it does not know)."""


def run_once(
    root: str, policy: Policy, *, now: dt.datetime | None = None, settled_below: SettledBelow | None = None
) -> Report:
    """One maintenance pass over the data dir ``root`` (a local path or a URI); see the module docstring.
    ``settled_below`` lets a running front end vouch for its non-durable subscriptions."""
    now = now or dt.datetime.now(dt.UTC)
    report = Report()
    # Read before the catalog: a subscription created after this read starts above every row
    # the fan-out had routed by then (sharedsub.runtime.committer numbers its start_seq after the
    # topic's last seq), so the holds of the subscriptions read next cover every routed row.
    routed = stored.read_fanout_progress(root)
    reader = CatalogReader(root)
    records = reader.refresh()
    # Read after the catalog: whether whatever the fan-out writes from now on is decided with
    # a catalog at least as new as the one just read (ended non-durable tables may go then).
    written_ms = stored.commit_time_ms(layout.catalog_table(root), reader.version) if reader.version >= 0 else None
    caught_up = written_ms is not None and stored.read_fanout_progress(root).writes_follow(written_ms)
    first_open = {
        r.key: _drop_acknowledged(
            root, r, policy, report, settled_below(r) if settled_below and not r.identity.durable else None
        )
        for r in records.values()
        if r.active
    }
    with_tables = _subscription_tables(root, records, policy, report, now, caught_up)
    catalog = layout.catalog_table(root)
    if table_exists(catalog):
        period = dt.timedelta(hours=policy.history_retention_hours)
        report.catalog_revisions_deleted += _step(
            report,
            "catalog retention",
            catalog,
            lambda: stored.trim_catalog(root, keys_with_tables=with_tables, now=now, retention_period=period),
        )
    _tidy(catalog, policy, report)
    _tidy(layout.join(root, layout.LINKS_TABLE), policy, report)
    topic_partitions = list_topic_partitions(root)
    holds = _holds(root, records.values(), first_open, topic_partitions)
    topics_with_records = {r.topic for r in records.values() if r.active}
    for topic, partitions in topic_partitions.items():
        # A topic whose holds could not all be read keeps its rows this run.
        trim = topic in holds or topic not in topics_with_records
        for partition in partitions:
            hold = holds.get(topic, {}).get(partition)
            _retain_topic(root, topic, hold, routed, policy, report, now, trim=trim, partition=partition)
    if report.storage_fault is not None:
        log.warning(
            "maintenance: the data dir %s takes no writes (%s): %d steps not done; the next run tries again",
            root, report.storage_fault, report.errors,
        )
    return report


class MaintenanceThread(threading.Thread):
    """Runs :func:`run_once` every ``policy.interval`` seconds until :meth:`stop`; start it only
    when the interval is positive (0 means maintenance is off)."""

    def __init__(self, root: str, policy: Policy, settled_below: SettledBelow | None = None) -> None:
        super().__init__(name="sharedsub-maintenance", daemon=True)
        self.root = root
        self.policy = policy
        self.settled_below = settled_below
        self._stopping = threading.Event()  # not _stop: that name is a method threading.Thread calls

    def run(self) -> None:
        """The thread: a run every interval; a run that fails is logged and retried at the next one."""
        while not self._stopping.wait(self.policy.interval):
            try:
                report = run_once(self.root, self.policy, settled_below=self.settled_below)
            except Exception:  # a run that fails entirely (catalog unreadable) is retried next time
                log.exception("maintenance run failed")
                continue
            log.info("maintenance: %s", report)

    def stop(self, timeout: float = 30.0) -> None:
        """End the thread: no run starts after this, and one under way is waited for up to
        ``timeout`` seconds (its store requests are bounded), so the process does not leave while
        a run is inside the store's client."""
        self._stopping.set()
        if self.is_alive():
            self.join(timeout)
            if self.is_alive():
                log.warning("maintenance run still under way after %.0f s; stopping without it", timeout)
