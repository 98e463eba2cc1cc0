"""What the committer writes through: the :class:`CommitStore` interface and its Delta implementation.

The committer (sharedsub.runtime.committer) is the front end's only writer. Everything it asks of
storage is here, and nothing else: appenders of tables (topics, ack logs, dead letters, link
events, the catalog), a topic's last seq, creating and removing topic tables, the catalog's
highest revision, and the means to tell a storage fault's details (free space, a probe write,
a commit that landed but was not forced to disk). :class:`DeltaStore` does it on Delta tables
under a data dir; sharedsub.storage.commits.memory_store does it in memory for tests of the runtime;
tests/storage/test_commit_store_contract.py holds both to this contract.

Contract of an :class:`Appender`: ``append(data, commit_id=...)`` commits ``data`` as one
commit and returns the table's new version. An append that raised has not committed, or
committed and was not forced to disk (``CommitStore.committed_unsynced`` tells), or committed
although the store reported an error: retried with the same ``commit_id`` by the same appender,
it returns that commit's version when the commit landed and does not write the rows twice. Every
append carries a fresh id otherwise.
"""

from __future__ import annotations

import weakref
from typing import Protocol

import pyarrow as pa

from sharedsub.core import layout
from sharedsub.core.errors import TopicExists
from sharedsub.core.model import SubscriptionRecord
from sharedsub.storage import catalog, diskspace, schemas
from sharedsub.storage.commits.append_process import AppendProcess
from sharedsub.storage.commits.py_columns import PyColumns, as_table
from sharedsub.storage.delta.appender import CommitNotSynced, DeltaAppender
from sharedsub.storage.delta.tables import table_exists
from sharedsub.storage.durable_files import sync_filesystem
from sharedsub.storage.objects.locations import locate
from sharedsub.storage.topics import create_topic, last_seq, partition_starts, remove_topic


class Appender(Protocol):
    """Appends to one table (see the module docstring for the retry contract)."""

    path: str

    def append(self, data: pa.Table | PyColumns, *, commit_id: str) -> int:
        """Commit ``data`` as one commit; return the new version."""
        ...

    def close(self) -> None:
        """Release what the appender holds (it is not used again)."""
        ...


class CommitStore(Protocol):
    """Storage as the committer sees it."""

    root: str

    def start(self) -> None:
        """Start what runs beside the store (an append child process); before the first append."""
        ...

    def stop(self) -> None:
        """Stop it; after the last append."""
        ...

    def appender(self, path: str, schema: pa.Schema, *, synced: bool = True) -> Appender:
        """An appender of the table at ``path`` (created by its first append) with rows of
        ``schema``. ``synced=False``: its commits are not forced to disk one by one; a later
        :meth:`sync` makes them durable together."""
        ...

    def sync(self) -> None:
        """Force the commits of the appenders made with ``synced=False`` to disk (with the
        store's fsync setting; otherwise nothing). Raises OSError when that failed."""
        ...

    def catalog_appender(self) -> Appender:
        """The catalog's appender (its commits are made by the calling thread)."""
        ...

    def catalog_revision(self) -> int:
        """The highest revision in the catalog (0 when it has none)."""
        ...

    def latest_records(self) -> dict[str, SubscriptionRecord]:
        """The catalog's latest record of each key now, other writers' included (several
        members share it); reads only the commits since the last call."""
        ...

    def topic_path(self, topic: str) -> str:
        """The table this store's writer appends ``topic``'s messages to: the topic's partition
        this front end writes (sharedsub.core.layout, "Partitions")."""
        ...

    def last_seq(self, topic: str) -> int:
        """The highest seq stored in this writer's partition of ``topic`` (:meth:`topic_path`),
        the seq before the partition's first when it has none (-1 for partition 0; also when
        the partition has no table yet)."""
        ...

    def prepare_topic(self, topic: str) -> None:
        """Before the first append to this writer's partition of ``topic``: a partition other
        than 0 that has no table yet gets it (the topic exists: its partition 0 does). A topic
        no one publishes to through this writer never gets one."""
        ...

    def partition_starts(self, topic: str) -> dict[int, int]:
        """``{partition: next seq}`` of ``topic``'s partitions other than this writer's that
        have a table (sharedsub.storage.topics.partition_starts)."""
        ...

    def create_topic(self, topic: str) -> str:
        """Create ``topic``'s empty table (partition 0); return its path. Raises TopicExists
        when it is there."""
        ...

    def remove_topic(self, topic: str) -> str:
        """Remove every partition of ``topic`` with its files (nothing when there is none);
        return the path of its partition 0."""
        ...

    def committed_unsynced(self, exc: BaseException) -> bool:
        """True when ``exc``, raised by an append, says its commit landed but was not forced to disk."""
        ...

    def free_bytes(self) -> int | None:
        """Free space under the data dir (None: unknown)."""
        ...

    def probe_write(self) -> None:
        """Write and remove a small file: raises the OSError of a data dir that takes no writes."""
        ...


class DeltaStore:
    """:class:`CommitStore` on the Delta tables under the data dir ``root``.

    ``fsync``: every commit is forced to disk before its append returns
    (sharedsub.storage.delta.appender.sync_commit). ``appends``: a child process that commits the
    appends (None: the calling thread does); the catalog's are always made by the calling thread.
    """

    def __init__(
        self,
        root: str,
        *,
        fsync: bool = False,
        appends: AppendProcess | None = None,
        epoch: int | None = None,
        partition: int = 0,
    ) -> None:
        """``partition``: the partition of every topic this writer appends to (its member slot;
        0 for a single front end). ``epoch``: the owner epoch of the lease this front end holds (a data dir on object
        storage; None for a local one): every commit carries it, a table is fenced before its
        state is first read (:meth:`last_seq`, :meth:`catalog_revision`), and an append that
        meets a higher epoch raises ``Fenced`` (sharedsub.storage.delta.appender)."""
        self.root = root
        self.fsync = fsync
        self.appends = appends
        self.epoch = epoch
        self.partition = partition
        self._catalog_reader: catalog.CatalogReader | None = None
        # The appenders made in this process, finished by stop() (weakly held: the committer
        # drops a table's appender when the table goes).
        self._in_process: weakref.WeakSet[DeltaAppender] = weakref.WeakSet()

    def start(self) -> None:  # noqa: D102 (CommitStore documents each member)
        if self.appends is not None:
            self.appends.start()

    def stop(self) -> None:  # noqa: D102
        if self.appends is not None:
            self.appends.stop()
        for appender in list(self._in_process):
            appender.finish()  # checkpoints being written end before the process does (DeltaAppender.finish)

    def appender(self, path: str, schema: pa.Schema, *, synced: bool = True) -> Appender:  # noqa: D102
        fsync = self.fsync and synced
        if self.appends is not None:
            return self.appends.appender(path, schema, fsync=fsync, epoch=self.epoch)
        return self._in_process_appender(DeltaAppender(path, schema, fsync=fsync, epoch=self.epoch))

    def sync(self) -> None:  # noqa: D102
        local = layout.local_path(self.root)
        if self.fsync and local is not None:
            sync_filesystem(local)

    def catalog_appender(self) -> Appender:  # noqa: D102
        return self._in_process_appender(catalog.catalog_appender(self.root, fsync=self.fsync, epoch=self.epoch))

    def _in_process_appender(self, appender: DeltaAppender) -> InProcessAppender:
        self._in_process.add(appender)
        return InProcessAppender(appender)

    def _fence(self, path: str, schema: pa.Schema) -> None:
        """Fence ``path`` under this store's epoch before its state is read (no-op without an
        epoch, or for a table not made yet: its first commit will carry the epoch)."""
        if self.epoch is not None and table_exists(path):
            DeltaAppender(path, schema, epoch=self.epoch).fence()

    def catalog_revision(self) -> int:  # noqa: D102
        self._fence(layout.catalog_table(self.root), schemas.CATALOG)
        records = catalog.load_catalog(self.root)
        return max((r.revision for r in records.values()), default=0)

    def latest_records(self) -> dict[str, SubscriptionRecord]:  # noqa: D102
        if self._catalog_reader is None:
            self._catalog_reader = catalog.CatalogReader(self.root)
        return self._catalog_reader.refresh()

    def topic_path(self, topic: str) -> str:  # noqa: D102
        return layout.topic_partition_table(self.root, topic, self.partition)

    def last_seq(self, topic: str) -> int:  # noqa: D102
        path = self.topic_path(topic)
        if self.partition and not table_exists(path):
            return layout.partition_seq_base(self.partition) - 1
        self._fence(path, schemas.TOPIC)
        return last_seq(path, self.partition)

    def prepare_topic(self, topic: str) -> None:  # noqa: D102
        if self.partition and not table_exists(self.topic_path(topic)):
            try:
                create_topic(self.root, topic, self.partition)
            except TopicExists:
                pass  # (a try that raised after its commit)

    def partition_starts(self, topic: str) -> dict[int, int]:  # noqa: D102
        return partition_starts(self.root, topic, besides=self.partition)

    def create_topic(self, topic: str) -> str:  # noqa: D102
        return create_topic(self.root, topic)

    def remove_topic(self, topic: str) -> str:  # noqa: D102
        return remove_topic(self.root, topic)

    def committed_unsynced(self, exc: BaseException) -> bool:  # noqa: D102
        return isinstance(exc, CommitNotSynced)

    def free_bytes(self) -> int | None:  # noqa: D102
        return diskspace.free_bytes(self.root)

    def probe_write(self) -> None:  # noqa: D102
        if layout.local_path(self.root) is not None:
            diskspace.probe_write(self.root)
            return
        # Object storage: a small object put and deleted (a StoreFailure, with the errno of the
        # outage, while the store does not answer). Only during a fault, every few seconds.
        store, key = locate(layout.join(self.root, layout.WRITE_PROBE))
        store.put(key, b"probe")
        store.delete(key)


class InProcessAppender:
    """The :class:`Appender` of a store without a child process: a :class:`DeltaAppender` in this
    process (it holds nothing to close)."""

    def __init__(self, appender: DeltaAppender) -> None:
        self.path = appender.path
        self._appender = appender

    def append(self, data: pa.Table | PyColumns, *, commit_id: str) -> int:  # noqa: D102 (Appender documents it)
        return self._appender.append(as_table(data), commit_id=commit_id)

    def close(self) -> None:  # noqa: D102
        pass


