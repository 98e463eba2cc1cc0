"""Committing data files written before their commit (the fan-out's executors' files) to a table
under an app transaction, each row once.

:func:`commit_routed_files` is the one commit step for such files, on the driver (an appender of
the job's single writer: jobs/table_commits.py) and in a Spark task (a guarded appender, which
other attempts of the same task may race: jobs/executor_routing.py). It reads the table's app
transaction, keeps, trims or drops each file by its seq range against it
(sharedsub.core.fanout.routing_place.plan_files), commits what is left in one commit whose app
transaction is the highest seq committed, and removes the files it did not commit. Each topic
partition has its own app transaction (sharedsub.core.fanout.partition_marks); a file holds the
rows of one partition (the routing task writes one file per table and partition). A guarded
appender whose version another writer took reads the app transaction again and decides again:
a duplicate attempt that lost the race commits nothing.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from sharedsub.core import layout
from sharedsub.core.fanout.partition_marks import transaction_app_id
from sharedsub.core.fanout.routing_place import plan_files
from sharedsub.storage.delta.appender import DeltaAppender, NoTable, VersionTaken
from sharedsub.storage.delta.data_files import DataFile, read_data_files, remove_data_files, write_data_file

log = logging.getLogger(__name__)

# Tries of a guarded commit whose version other writers took (each one re-reads the table).
RACE_ATTEMPTS = 20


@dataclasses.dataclass(frozen=True, slots=True)
class FilesCommitted:
    """What :func:`commit_routed_files` did."""

    rows: int  # rows committed (0: the table held them all already)
    version: int | None  # the commit's version (None: nothing committed)


def commit_routed_files(appender: DeltaAppender, files: Sequence[DataFile], app_id: str, schema: pa.Schema) -> FilesCommitted:
    """Commit ``files`` (in seq order within each topic partition, written into ``appender``'s
    table) under app transaction ``app_id`` (per partition: partition_marks), leaving out rows
    the table holds already; see the module docstring. A table that
    does not exist yet gets the files' rows as its first commit (it needs a schema: ``schema``).

    Raises:
        Exception: what the commit raises (Fenced among them); the files stay (orphans for
            vacuum: one might have been committed without the caller learning it).
    """
    table = appender.path
    unused: list[DataFile] = []
    partitions: dict[int, list[DataFile]] = {}
    for f in files:
        partitions.setdefault(layout.partition_of_seq(f.min_seq), []).append(f)
    for _ in range(RACE_ATTEMPTS):
        keep: list[DataFile] = []
        marks: list[tuple[str, int]] = []
        for partition, group in sorted(partitions.items()):
            part_id = transaction_app_id(app_id, partition)
            done = appender.transaction_version(part_id)
            chosen = plan_files([(f.min_seq, f.max_seq) for f in group], done)
            kept_files = [group[i] for i in chosen.commit]
            for i in chosen.trim:  # part of its rows are in the table (a lost checkpoint): rewrite the rest
                rows = read_data_files(table, [group[i]])
                assert rows is not None and done is not None
                kept = rows.filter(pc.greater(rows.column("seq"), done)).cast(schema)
                kept_files.append(write_data_file(table, kept))
            unused.extend(group[i] for i in (*chosen.drop, *chosen.trim))
            if kept_files:
                kept_files.sort(key=lambda f: f.min_seq)
                keep.extend(kept_files)
                marks.append((part_id, max(f.max_seq for f in kept_files)))
        if not keep:
            _remove(table, unused)
            return FilesCommitted(0, None)
        try:
            version = appender.append_files(keep, app_transactions=marks)
        except VersionTaken:
            unused.extend(f for f in keep if f not in files)  # the trimmed rewrites of this try
            continue
        except NoTable:  # its first commit sets the schema: commit the rows themselves
            data = read_data_files(table, keep)
            assert data is not None
            version = appender.append(data.cast(schema), app_transactions=marks)
            unused.extend(keep)
        _remove(table, unused)
        return FilesCommitted(sum(f.rows for f in keep), version)
    raise VersionTaken(table)


def _remove(table: str, unused: list[DataFile]) -> None:
    """Remove files no commit names; a failure only leaves them to vacuum."""
    try:
        remove_data_files(table, unused)
    except OSError as exc:
        log.warning("%s: could not remove %d unused routed files: %s", table, len(unused), exc)
