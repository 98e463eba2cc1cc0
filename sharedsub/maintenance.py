"""Table maintenance: drop acknowledged rows, compact, vacuum, clean logs, remove old generations.

Subscription tables only grow by fan-out appends and ack logs by the committer's group
commits: one small file per micro-batch or group. :func:`run_once` (scheduled by
:class:`MaintenanceThread` every ``[maintenance] interval`` seconds) keeps them small:

1. **Acknowledged rows.** For each active subscription generation, the *ack watermark* is the
   highest ``seq`` such that every routed row at or below it is settled for good (accepted,
   rejected, expired, dead-lettered, and not opened again by a replay: sharedsub.acklog; shared
   consumers ack out of order, so rows above the first unsettled one stay). When at least
   ``min_acked_rows`` rows are below it, those rows are deleted from the subscription table and
   from its ack log. The delete commits carry :data:`delta.MAINTENANCE_MARK`, so tailers do not
   take the rows a delete rewrites for new ones; the backlog (routed minus acknowledged) is
   unchanged by it.
2. **Compaction** of subscription tables, ack logs and dead-letter tables with at least
   ``compact_min_files`` data files (``dataChange`` false: no reader sees new rows).
3. **Vacuum** of those tables: files that no version inside ``history_retention_hours`` needs are
   deleted; then a checkpoint, and log files older than the table's log retention are dropped.
   Time travel and replay (DESIGN §6) work for any version inside the retention. Topic tables
   are not compacted (the front end's payload index points at their files) and so have
   nothing to vacuum; they are checkpointed.
4. **Old generations.** The tables of a generation that is no longer current (a re-created or
   changed subscription) or of a deleted subscription are removed once the generation ended
   more than ``history_retention_hours`` ago.

Each step of each table is independent: a failure (for example a commit conflict with a
concurrent writer) is logged and counted, the rest goes on, and the next run tries again.
The pure parts (:func:`ack_watermark`, :func:`removable_generations`) are tested as tables.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from sharedsub.acklog import ack_state_of
from sharedsub.config import MaintenanceSettings
from sharedsub.model import SubscriptionRecord
from sharedsub.storage import delta, layout
from sharedsub.storage.catalog import load_catalog

log = logging.getLogger(__name__)


Policy = MaintenanceSettings
"""The ``[maintenance]`` settings are the policy (documented in conf/sharedsub.toml)."""


@dataclasses.dataclass(slots=True)
class Report:
    """What one run did."""

    acked_rows_deleted: int = 0
    files_compacted: int = 0
    files_vacuumed: int = 0
    generations_removed: int = 0
    tables_checked: int = 0
    errors: int = 0


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


def removable_generations(
    record: SubscriptionRecord | None, generations: Iterable[int], now: dt.datetime, retention: dt.timedelta
) -> list[int]:
    """The generations among ``generations`` whose tables may go, ascending.

    A generation ended when the next one was created (the current record's ``created_at``) or
    when the subscription was deleted (its ``updated_at``); it may go when that is more than
    ``retention`` ago. The current generation of an active subscription never goes; nothing
    goes for a key the catalog does not know (its tables may belong to a record being written).
    """
    if record is None:
        return []
    if record.active:
        ended, candidates = record.created_at, {g for g in generations if g < record.generation}
    else:
        ended, candidates = record.updated_at, {g for g in generations if g <= record.generation}
    return sorted(candidates) if now - ended > retention else []


def _settled_seqs(ack_table: str) -> np.ndarray:
    data = delta.read_table(ack_table, ["seq", "outcome"]) if delta.table_exists(ack_table) else None
    return np.array(sorted(ack_state_of(data).settled), np.int64)


def _step(report: Report, what: str, table: str, fn: Callable[[], int | None]) -> int:
    try:
        return int(fn() or 0)
    except Exception as exc:  # one table's failure must not stop the run; the next run retries
        report.errors += 1
        log.warning("maintenance: %s of %s failed: %s", what, table, exc)
        return 0


def _drop_acknowledged(root: str, record: SubscriptionRecord, policy: Policy, report: Report) -> None:
    table = layout.join(root, record.table)
    acks = layout.join(root, layout.ack_table_rel(record.key, record.generation))
    routed = delta.read_seqs(table).to_numpy()
    watermark = ack_watermark(routed, _settled_seqs(acks))
    if watermark is None or int(np.count_nonzero(routed <= watermark)) < policy.min_acked_rows:
        return
    predicate = f"seq <= {watermark}"
    # Subscription rows first: if the second delete fails, acks of rows that are gone are harmless.
    deleted = _step(report, "delete acknowledged rows", table, lambda: delta.delete_rows(table, predicate, "acknowledged"))
    if deleted:
        report.acked_rows_deleted += deleted
        _step(report, "delete acknowledgements", acks, lambda: delta.delete_rows(acks, predicate, "acknowledged"))


def _tidy(table: str, policy: Policy, report: Report, *, compact: bool = True) -> None:
    if not delta.table_exists(table):
        return
    report.tables_checked += 1
    if compact and delta.data_file_count(table) >= policy.compact_min_files:
        report.files_compacted += _step(report, "compaction", table, lambda: delta.compact(table))
    report.files_vacuumed += _step(report, "vacuum", table, lambda: delta.vacuum(table, policy.history_retention_hours))
    _step(report, "checkpoint", table, lambda: delta.checkpoint_and_clean_log(table, policy.history_retention_hours))


def _subscription_dirs(root: str) -> Mapping[str, list[str]]:
    base = layout.join(root, layout.SUBSCRIPTIONS_DIR)
    if not os.path.isdir(base):
        return {}
    return {key: sorted(os.listdir(os.path.join(base, key))) for key in sorted(os.listdir(base))}


def run_once(root: str, policy: Policy, *, now: dt.datetime | None = None) -> Report:
    """One maintenance pass over the data dir ``root`` (local paths); see the module docstring."""
    now = now or dt.datetime.now(dt.UTC)
    retention = dt.timedelta(hours=policy.history_retention_hours)
    report = Report()
    records = load_catalog(root)
    for record in records.values():
        if record.active:
            _drop_acknowledged(root, record, policy, report)
    for key, entries in _subscription_dirs(root).items():
        record = records.get(key)
        by_generation: dict[int, list[str]] = {}
        for entry in entries:
            generation = generation_of(entry)
            if generation is not None:
                by_generation.setdefault(generation, []).append(entry)
        gone = set(removable_generations(record, by_generation, now, retention))
        for generation, names in sorted(by_generation.items()):
            for name in names:
                table = layout.join(root, layout.SUBSCRIPTIONS_DIR, key, name)
                if generation in gone:
                    delta.remove_table(table)
                else:
                    _tidy(table, policy, report)
            if generation in gone:
                report.generations_removed += 1
                log.info("maintenance: removed generation %d of %s", generation, key)
    for topic in delta.list_topics(root):
        _tidy(layout.topic_table(root, topic), policy, report, compact=False)
    return report


class MaintenanceThread(threading.Thread):
    """Runs :func:`run_once` every ``policy.interval`` seconds until :meth:`stop`; start it only
    when the interval is positive (0 means maintenance is off)."""

    def __init__(self, root: str, policy: Policy) -> None:
        super().__init__(name="sharedsub-maintenance", daemon=True)
        self.root = root
        self.policy = policy
        self._stopping = threading.Event()  # not _stop: that name is a method threading.Thread calls

    def run(self) -> None:
        while not self._stopping.wait(self.policy.interval):
            try:
                report = run_once(self.root, self.policy)
            except Exception:  # a run that fails entirely (catalog unreadable) is retried next time
                log.exception("maintenance run failed")
                continue
            log.info("maintenance: %s", report)

    def stop(self) -> None:
        self._stopping.set()
