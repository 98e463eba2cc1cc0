"""A :class:`~sharedsub.storage.commits.commit_store.CommitStore` in memory, for tests of the runtime.

Tables are lists of commits (Arrow tables) keyed by path; nothing touches a disk. What it adds
over the Delta store is control: :meth:`MemoryStore.fail` makes the writes to chosen tables
fail with an ``OSError`` (ENOSPC, EROFS, ...) as a full or read-only data dir would, before
the commit or, with ``landed``, after it (the commit is visible, only forcing it to disk
failed: what :class:`~sharedsub.storage.delta.appender.CommitNotSynced` reports for Delta tables).
tests/storage/test_commit_store_contract.py holds both stores to the same contract, so a test
that passes on this one tests the runtime, not a looser imitation of storage.
"""

from __future__ import annotations

import dataclasses
import errno
import os
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from sharedsub.core import layout
from sharedsub.core.errors import TopicExists
from sharedsub.core.model import SubscriptionRecord
from sharedsub.storage import schemas
from sharedsub.storage.catalog import keep_latest
from sharedsub.storage.commits.py_columns import PyColumns, as_table


class CommitLandedUnsynced(OSError):
    """The commit is in the table; forcing it to disk failed (``errno`` says why)."""


@dataclasses.dataclass(slots=True)
class _Table:
    schema: pa.Schema
    commits: list[pa.Table] = dataclasses.field(default_factory=list)
    ids: dict[str, int] = dataclasses.field(default_factory=dict)  # commit id -> version

    def rows(self) -> pa.Table:
        return pa.concat_tables(self.commits) if self.commits else self.schema.empty_table()


@dataclasses.dataclass(slots=True)
class _Fault:
    code: int
    applies: Callable[[str], bool]
    landed: bool


class MemoryAppender:
    """Appends to one in-memory table (the :class:`~sharedsub.storage.commits.commit_store.Appender` contract)."""

    def __init__(self, store: MemoryStore, path: str, schema: pa.Schema) -> None:
        self.path = path
        self.schema = schema
        self._store = store
        self._tried: str | None = None  # the commit id of the last append that raised
        self.closed = False

    def append(self, data: pa.Table | PyColumns, *, commit_id: str) -> int:
        """Commit ``data``; return the table's new version. A retry of an append that raised
        (the same ``commit_id``) whose commit landed returns that commit's version and writes
        nothing again."""
        retry = self._tried == commit_id
        self._tried = commit_id
        version = self._store.commit(self.path, self.schema, as_table(data), commit_id, retry=retry)
        self._tried = None
        return version

    def close(self) -> None:
        """Nothing to release; recorded so tests can tell."""
        self.closed = True


class MemoryStore:
    """Tables in memory under a made-up ``root`` (default ``memory://data``); see the module docstring."""

    def __init__(self, root: str = "memory://data", *, partition: int = 0) -> None:
        """``partition``: the topic partition this writer appends to (as DeltaStore's)."""
        self.root = root
        self.partition = partition
        self.catalog_path = layout.catalog_table(root)
        self.tables: dict[str, _Table] = {}
        self.fault: _Fault | None = None
        self.probes = 0
        self.syncs = 0
        self.started = self.stopped = False

    # ------------------------------------------------------------------ control (tests)

    def fail(self, code: int = errno.ENOSPC, *, where: Callable[[str], bool] | None = None, landed: bool = False) -> None:
        """From now on, writes to the tables ``where`` accepts (every table by default) raise
        ``OSError(code)``; with ``landed`` the commit is made first, as a failed fsync leaves it."""
        self.fault = _Fault(code, where or (lambda _path: True), landed)

    def heal(self) -> None:
        """Writes succeed again."""
        self.fault = None

    def rows(self, path: str) -> pa.Table:
        """Everything committed to ``path`` (empty with no schema when there is no such table)."""
        table = self.tables.get(path)
        return table.rows() if table is not None else pa.table({})

    def version(self, path: str) -> int:
        """Latest version of ``path`` (-1: none)."""
        table = self.tables.get(path)
        return len(table.commits) - 1 if table is not None else -1

    # ------------------------------------------------------------------ CommitStore

    def start(self) -> None:
        """Nothing runs beside it; recorded."""
        self.started = True

    def stop(self) -> None:
        """Recorded."""
        self.stopped = True

    def appender(self, path: str, schema: pa.Schema, *, synced: bool = True) -> MemoryAppender:
        """An appender of the table at ``path`` (created by its first append); ``synced`` means
        nothing in memory."""
        return MemoryAppender(self, path, schema)

    def sync(self) -> None:
        """Counted (tests)."""
        self.syncs += 1

    def catalog_appender(self) -> MemoryAppender:
        """The catalog's appender."""
        return MemoryAppender(self, self.catalog_path, schemas.CATALOG)

    def catalog_revision(self) -> int:
        """Highest revision in the catalog (0 when it is empty)."""
        rows = self.rows(self.catalog_path)
        if rows.num_rows == 0:
            return 0
        return int(pc.max(rows.column("revision")).as_py())

    def prepare_topic(self, topic: str) -> None:
        """Nothing to make in memory: a table is made by its first append."""

    def latest_records(self) -> dict[str, SubscriptionRecord]:
        """The latest record of each key in the catalog (one writer here)."""
        return keep_latest({}, self.rows(self.catalog_path))

    def topic_path(self, topic: str) -> str:
        """This writer's partition of ``topic``."""
        return layout.topic_partition_table(self.root, topic, self.partition)

    def last_seq(self, topic: str) -> int:
        """Highest seq stored in this writer's partition of ``topic``, the one before the
        partition's first when there is none."""
        rows = self.rows(self.topic_path(topic))
        if rows.num_rows == 0:
            return layout.partition_seq_base(self.partition) - 1
        return int(pc.max(rows.column("seq")).as_py())

    def partition_starts(self, topic: str) -> dict[int, int]:
        """``{partition: next seq}`` of ``topic``'s other partitions that have a table."""
        starts = {}
        for path in self.tables:
            parsed = layout.parse_topic_dir(path.rsplit("/", 1)[-1])
            if parsed is None or parsed[0] != topic or path != layout.topic_partition_table(self.root, topic, parsed[1]):
                continue
            partition = parsed[1]
            if partition != self.partition:
                rows = self.rows(path)
                floor = layout.partition_seq_base(partition) - 1
                starts[partition] = (int(pc.max(rows.column("seq")).as_py()) if rows.num_rows else floor) + 1
        return starts

    def create_topic(self, topic: str) -> str:
        """Create ``topic``'s empty table; return its path.

        Raises:
            TopicExists: it is there already.
            OSError: the fault set with :meth:`fail`.
        """
        path = layout.topic_table(self.root, topic)
        if path in self.tables:
            raise TopicExists(topic)
        self._check(path, landed=False)
        # Version 0 is the empty table, as Delta creates it: the first append is version 1.
        self.tables[path] = _Table(schemas.TOPIC, [schemas.TOPIC.empty_table()])
        return path

    def remove_topic(self, topic: str) -> str:
        """Remove every partition of ``topic`` (nothing when there is none); return the path of
        its partition 0."""
        prefix = layout.topic_table(self.root, topic)
        for path in [p for p in self.tables if p == prefix or p.startswith(prefix + "~p")]:
            del self.tables[path]
        return prefix

    def committed_unsynced(self, exc: BaseException) -> bool:
        """True when ``exc`` reports a commit that landed but was not forced to disk."""
        return isinstance(exc, CommitLandedUnsynced)

    def free_bytes(self) -> int | None:
        """Unknown in memory."""
        return None

    def probe_write(self) -> None:
        """Raise the fault's ``OSError`` while one is set (counted in :attr:`probes`)."""
        self.probes += 1
        if self.fault is not None:
            raise OSError(self.fault.code, os.strerror(self.fault.code))

    # ------------------------------------------------------------------ internals

    def _check(self, path: str, *, landed: bool) -> None:
        fault = self.fault
        if fault is not None and fault.applies(path) and fault.landed == landed:
            kind = CommitLandedUnsynced if landed else OSError
            raise kind(fault.code, os.strerror(fault.code), path)

    def commit(self, path: str, schema: pa.Schema, data: pa.Table, commit_id: str, *, retry: bool) -> int:
        """Commit ``data`` to table ``path`` (made with ``schema`` on its first commit) as commit
        ``commit_id``; the new version. ``retry``: a retry of that commit, which returns its
        version without writing again when it landed. Faults set with :meth:`fail` apply."""
        table = self.tables.get(path)
        if retry and table is not None and commit_id in table.ids:
            self._check(path, landed=True)  # the retry forces it to disk again
            return table.ids[commit_id]
        self._check(path, landed=False)
        if table is None:
            table = self.tables[path] = _Table(schema)
        table.commits.append(data.cast(table.schema).combine_chunks())
        version = len(table.commits) - 1
        table.ids[commit_id] = version
        self._check(path, landed=True)
        return version
