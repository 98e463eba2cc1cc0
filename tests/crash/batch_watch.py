"""Seeing a fan-out micro-batch commit its subscription tables, from outside the job.

:class:`BatchWatch` follows the ``_delta_log`` of a set of subscription tables: each new commit
that adds rows is read (its rows' ``fanout_batch`` and ``seq`` columns: every row the fan-out
writes carries the id of the micro-batch that routed it), so at any moment the watch knows, for
the newest batch it has seen, how many tables hold that batch's commit already. Maintenance
commits are left out (they re-add rows, they route none). Only the log and the data files are
read, through the same ``sharedsub.storage`` readers as tests/crash/tables.py: nothing of the
job's own state, so it holds whichever way the job commits (from the driver's threads, in Spark
tasks, one commit per table or several).

A kill "in the middle of a batch" is decided in two steps. Before the kill, :meth:`BatchWatch.progress`
says the newest batch has reached some tables and not (yet) others. That alone proves nothing:
a batch need not touch every table. So :meth:`BatchWatch.at_kill` records, once the killed job
is dead, each table's latest version and which of them hold the newest batch (and that batch's
seqs); after the run, :func:`mid_batch` reads the tables' later commits: the kill came in the
middle of the batch when some tables held its commit at the kill and others got rows of its
seq range only afterwards (the batch run again by the next job). Exactly once is the
invariants' business (tests/crash/invariants.py); this only says where the kill landed.
"""

from __future__ import annotations

import collections
import dataclasses
import os
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from sharedsub.core import layout
from sharedsub.storage.delta.commit_log import latest_version, read_commit
from sharedsub.storage.delta.table_reads import read_files
from sharedsub.storage.retention import read_batch_offset


@dataclasses.dataclass(frozen=True, slots=True)
class BatchCommit:
    """A commit of routed rows to one table: its version, the batch ids and seqs of its rows."""

    version: int
    batches: frozenset[int]
    seqs: frozenset[int]


@dataclasses.dataclass(frozen=True, slots=True)
class AtKill:
    """The tables when a killed fan-out job was dead: ``batch`` is the newest batch seen, ``holding``
    the tables whose log had a commit of it, ``versions`` each table's latest version, ``seqs`` the
    seqs of the batch's rows in those tables."""

    batch: int
    holding: frozenset[str]
    versions: dict[str, int]
    seqs: frozenset[int]


@dataclasses.dataclass(frozen=True, slots=True)
class MidBatch:
    """What a kill's tables showed after the run: ``held`` tables had the batch's commit at the
    kill, ``late`` tables got rows of its seqs only after it (with the batch ids of those rows)."""

    batch: int
    held: int
    late: int
    tables: int
    late_batches: frozenset[int]

    @property
    def mid_batch(self) -> bool:
        """True when the kill came after some of the batch's commits and before others."""
        return self.held > 0 and self.late > 0

    def __str__(self) -> str:
        where = "mid-batch" if self.mid_batch else "not mid-batch"
        return (
            f"batch {self.batch}: {self.held} of {self.tables} tables held its commit at the kill, {self.late} got "
            f"its rows after (batch ids {sorted(self.late_batches)}): {where}"
        )


def read_batch_commit(table: str, version: int) -> BatchCommit | None:
    """The routed rows commit ``version`` of ``table`` added; None when it added none (a maintenance
    commit, the table's creation, a commit that moved only marks) or is not there."""
    commit = read_commit(table, version)  # a maintenance commit adds no rows here
    if commit is None or not commit.added:
        return None
    data = read_files(commit.added, ["fanout_batch", "seq"])
    if data is None or data.num_rows == 0:
        return None
    batches = pc.unique(data.column("fanout_batch").drop_null()).to_pylist()
    return BatchCommit(version, frozenset(batches), frozenset(data.column("seq").to_pylist()))


class BatchWatch:
    """The commits of ``tables`` (absolute paths) as they land; :meth:`poll` reads what is new."""

    def __init__(self, tables: Sequence[str]) -> None:
        self.tables = list(tables)
        self.versions = {t: -1 for t in self.tables}  # latest version read
        self.newest: dict[str, BatchCommit] = {}  # each table's latest commit of routed rows
        self.batch = -1  # the newest batch id seen in any table
        self._holding: collections.Counter[int] = collections.Counter()  # batch -> tables whose newest commit has it

    def poll(self) -> None:
        """Read every table's commits since the last poll."""
        for table in self.tables:
            known = self.versions[table]
            latest = latest_version(table, known)
            for version in range(known + 1, latest + 1):
                commit = read_batch_commit(table, version)
                if commit is not None:
                    self._take(table, commit)
            self.versions[table] = max(known, latest)

    def _take(self, table: str, commit: BatchCommit) -> None:
        old = self.newest.get(table)
        self._holding.subtract(old.batches if old is not None else ())
        self.newest[table] = commit
        self._holding.update(commit.batches)
        self.batch = max(self.batch, max(commit.batches, default=-1))

    def holding(self, batch: int) -> list[str]:
        """The tables whose latest commit of routed rows has rows of ``batch``."""
        return [t for t, c in self.newest.items() if batch in c.batches]

    def progress(self) -> tuple[int, int]:
        """``(newest batch seen, tables holding its commit)``; ``(-1, 0)`` before any."""
        return self.batch, self._holding[self.batch] if self.batch >= 0 else 0

    def at_kill(self) -> AtKill:
        """Poll, and record where the newest batch stands (call once the killed job is dead)."""
        self.poll()
        holding = self.holding(self.batch)
        seqs = frozenset(s for t in holding for s in self.newest[t].seqs)
        return AtKill(self.batch, frozenset(holding), dict(self.versions), seqs)


def mid_batch(at: AtKill, *, lookahead: int = 3) -> MidBatch:
    """Where the kill recorded in ``at`` landed, from the commits the tables got after it: a table
    not holding the batch then is *late* when one of its next ``lookahead`` commits of routed rows
    (the batch run again is the next job's first) adds a row of the batch's seq range."""
    if not at.seqs:
        return MidBatch(at.batch, 0, 0, len(at.versions), frozenset())
    low, high = min(at.seqs), max(at.seqs)
    late = 0
    batches: set[int] = set()
    for table, known in at.versions.items():
        if table in at.holding:
            continue
        seen = 0
        version = known + 1
        latest = latest_version(table, known)
        while seen < lookahead and version <= latest:
            commit = read_batch_commit(table, version)
            version += 1
            if commit is None:
                continue
            seen += 1
            if any(low <= s <= high for s in commit.seqs):
                late += 1
                batches |= commit.batches
                break
    return MidBatch(at.batch, len(at.holding), late, len(at.versions), frozenset(batches))


def batch_topic_rows(root: str, batch: int, columns: Sequence[str]) -> pa.Table | None:
    """The topic rows micro-batch ``batch`` of the fan-out job of the local data dir ``root``
    routes (``columns`` of them): those of the topic commits after the previous batch's end offset
    up to its own, as Spark logged them in the job's checkpoint (``offsets/<batch>``, written when
    the batch is planned, before it runs). None when that offset is not logged (yet).

    The offsets are Spark's and the source's (sharedsub.storage.retention.read_batch_offset
    reads them for maintenance too); the rows are read from the topic tables' log, as the source
    reads them (marked maintenance commits add none).
    """
    offsets = os.path.join(layout.fanout_checkpoint(root), "offsets")
    end = read_batch_offset(offsets, batch)
    if end is None:
        return None
    start = read_batch_offset(offsets, batch - 1) if batch > 0 else None
    begin = {str(t): int(v) for t, v in ((start or {}).get("topics") or {}).items()}
    files: list[str] = []
    for feed, version in (end.get("topics") or {}).items():
        table = layout.join(root, layout.TOPICS_DIR, str(feed))
        for v in range(begin.get(str(feed), -1) + 1, int(version) + 1):
            commit = read_commit(table, v)
            files += commit.added if commit is not None else ()
    return read_files(files, columns) if files else pa.table({c: [] for c in columns})
