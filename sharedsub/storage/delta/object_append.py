"""Blind appends to a Delta table on object storage: a commit is two requests, the data file's PUT
and the log entry's put-if-absent.

Why: delta-rs re-reads the log before every commit on a bucket (LIST and GET of the entries since
its last load: 7.5 of the 9.5 requests a commit made, one after another, bench/RESULTS.md "Object
storage"); on a store with 20 ms per request that re-read was most of a commit's time. A table
on object storage has one writer (DESIGN §8: the front end holding its member slot, fenced by its
epoch; the fan-out job for subscription tables), so the writer keeps what it knows of the table
instead: its latest version and the app transactions recorded up to it.

The commit is the one :func:`sharedsub.storage.delta.blind_append.commit_body` writes locally,
with the writer's owner epoch in ``commitInfo``. Its log entry is put with ``If-None-Match: *``
at the version after the known one. A refusal means another entry holds that version; it is read
(one GET) and is either

* this very commit, put by an earlier try whose answer was lost (the client retried the put, or
  the caller retries an append that raised): found by its commit marker, the version is returned;
* a higher owner epoch's (a new owner fenced the table): :class:`Superseded`, the writer stops;
* a change of metadata or protocol: :class:`TableChanged`, the caller commits through delta-rs;
* an entry of another writer that records an app transaction this commit records too (a Spark
  task's commit, a retried batch): :class:`TransactionsTaken`; the table is loaded again at the
  next use and the caller decides again what to commit;
* else (maintenance's deletes and compactions, another member's append to a shared ack log):
  stepped over, its app transactions learnt, and the put tried at the next version.

The first use of a table loads it through delta-rs once (its version and, when asked, app
transactions); a table not made yet is made by a first commit of the same two requests after one
LIST (a table whose early log entries were cleaned must not get a second version 0). A checkpoint
is written every CHECKPOINT_INTERVAL versions, on a thread (blind_append.Checkpoints), from the
previous checkpoint and the log entries this appender put or stepped over since
(sharedsub.storage.delta.object_checkpoint), not by delta-rs re-reading the log segment.
Log entries and checkpoints are ordinary Delta: Spark and delta-rs read these tables as any other
(tests/storage/test_object_append.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from sharedsub.core.ownership.members import supersedes
from sharedsub.storage.delta.blind_append import (
    Checkpoints,
    FirstCommit,
    TableChanged,
    changes_table,
    commit_body,
    first_commit_template,
    supported,
)
from sharedsub.storage.delta.data_files import DataFile, write_data_file
from sharedsub.storage.delta.tables import delta_table, table_exists
from sharedsub.storage.objects.locations import locate
from sharedsub.storage.objects.store import AlreadyExists, ObjectNotFound

_VERSIONS_SKIPPED = 1000  # versions taken by others one append steps over before it gives up


class Superseded(Exception):
    """The version this commit was to take holds a commit of an owner epoch that supersedes the
    writer's: another front end (or job) owns the table now."""

    def __init__(self, table: str, version: int, theirs: int) -> None:
        super().__init__(f"{table}: version {version} holds owner epoch token {theirs}")
        self.table = table
        self.version = version
        self.theirs = theirs


class TransactionsTaken(Exception):
    """Another writer's commit took the version and records an app transaction this commit
    records too: nothing of this commit landed; read the app transactions again (they are
    learnt) and decide again what to commit."""

    def __init__(self, table: str, version: int) -> None:
        super().__init__(f"{table}: version {version} was taken by another writer's commit of the same app transactions")
        self.table = table
        self.version = version


def _entry(text: str) -> tuple[dict[str, object], dict[str, int], bool]:
    """A log entry's commitInfo, app transactions and whether it changes metadata or protocol."""
    lines = [line for line in text.splitlines() if line]
    info: dict[str, object] = {}
    txns: dict[str, int] = {}
    for line in lines:
        if line.startswith('{"commitInfo"'):
            info = json.loads(line)["commitInfo"]
        elif line.startswith('{"txn"'):
            txn = json.loads(line)["txn"]
            txns[str(txn["appId"])] = int(txn["version"])
    return info, txns, changes_table(lines)


class ObjectAppender:
    """Blind appends to one table on object storage (see the module docstring). One thread.

    ``commit_mark``, ``epoch_mark``: the ``commitInfo`` keys of a commit's marker and of its
    writer's owner epoch; ``epoch``: the writer's owner epoch token (None: no fencing, no epoch
    key); ``guarded``: every commit of another writer found at the version this one was to take
    raises TransactionsTaken (racing Spark task attempts never step over each other)."""

    def __init__(
        self,
        path: str,
        schema: pa.Schema,
        *,
        commit_mark: str,
        epoch_mark: str,
        epoch: int | None = None,
        guarded: bool = False,
    ) -> None:
        self.path = path
        self.schema = schema
        self._mark = commit_mark
        self._epoch_mark = epoch_mark
        self._epoch = epoch
        self._guarded = guarded
        self._store, self._key = locate(path)
        self._version = -1  # the latest version known; -1: load the table first
        # The table as loaded (None: made by this appender); app transactions recorded since are in _txns.
        self._loaded: DeltaTable | None = None
        self._txns: dict[str, int] = {}  # app transactions recorded after the load, up to _version
        self._unsupported = False
        self._missing = False  # no table when last looked (ready)
        self._checkpoints = Checkpoints(path, self._store, self._key)

    # ------------------------------------------------------------------ what is known

    def ready(self) -> int | None:
        """The latest version known (the table is loaded through delta-rs the first time and after
        :meth:`forget`); None when there is no table yet or this appender cannot write it
        (blind_append.supported)."""
        if self._unsupported or self._missing:
            return None
        if self._version < 0:
            if not table_exists(self.path):  # one LIST (delta-rs would make two to say so)
                self._missing = True
                return None
            try:
                table = delta_table(self.path)
            except TableNotFoundError:
                self._missing = True
                return None
            if not supported(table, self.schema):
                self._unsupported = True
                return None
            self._loaded, self._txns, self._version = table, {}, table.version()
            self._checkpoints.forget()
        return self._version

    def transaction_version(self, app_id: str) -> int | None:
        """The last version recorded for ``app_id`` up to the latest version known (call after
        :meth:`ready` returned a version): from this appender's own commits and the entries it
        stepped over, else from the table as loaded."""
        if app_id in self._txns:
            return self._txns[app_id]
        if self._loaded is None:  # made by this appender (create): only its own are there
            return None
        value = self._loaded.transaction_version(app_id)
        if value is not None:
            self._txns[app_id] = value
        return value

    def absent(self) -> bool:
        """Whether there was no table when :meth:`ready` looked and :meth:`create` may make it.
        Kept until a create or :meth:`forget`: a table another writer makes meanwhile has its
        version 0 (a log is cleaned only of entries days old), so the create's put is refused."""
        return self.ready() is None and self._missing

    def forget(self) -> None:
        """Another writer of this process committed (delta-rs, a fence): load the table again."""
        self._version = -1
        self._missing = False
        self._loaded = None
        self._txns = {}
        self._checkpoints.forget()

    # ------------------------------------------------------------------ commits

    def create(self, data: pa.Table, marker: str, app_transactions: Sequence[tuple[str, int]] = ()) -> int:
        """Make the table with ``data`` (in the schema, one chunk) as version 0, as delta-rs would
        (blind_append.FirstCommit); return 0.

        Raises:
            TableChanged: another writer made the table meanwhile (a version 0 that is not this
                commit), or delta-rs makes tables of this schema with a protocol not written here.
            StoreFailure: the store did not answer (the commit may have landed: find it by marker).
        """
        template = first_commit_template(self.schema)
        if template is None:
            raise TableChanged(self.path)
        files = [write_data_file(self.path, data)]
        body = self._body(files, marker, app_transactions, template)
        try:
            self._store.put_if_absent(self._log_key(0), body)
        except AlreadyExists:
            info, _, _ = _entry(self._read(0))
            if info.get(self._mark) != marker:
                self.forget()
                raise TableChanged(self.path) from None
        self._missing = False
        self._loaded = None
        self._version = 0
        self._txns = dict(app_transactions)
        self._checkpoints.forget()
        self._checkpoints.committed(0, body.decode("utf-8"))
        return 0

    def append(self, data: pa.Table, marker: str, app_transactions: Sequence[tuple[str, int]] = ()) -> int:
        """Commit ``data`` (in the schema, one chunk) as a new version; return it.

        Raises:
            TableChanged, Superseded, TransactionsTaken: see the module docstring (nothing of
                this commit landed; the data file is left an orphan for vacuum).
            StoreFailure: the store did not answer (the commit may have landed: find it by marker).
        """
        if self.ready() is None:
            raise TableChanged(self.path)
        return self.append_files([write_data_file(self.path, data)], marker, app_transactions)

    def append_files(self, files: Sequence[DataFile], marker: str, app_transactions: Sequence[tuple[str, int]] = ()) -> int:
        """Commit data files already in the table's directory (one ``add`` each, in order) as a new
        version; return it. As :meth:`append` otherwise."""
        if self.ready() is None:
            raise TableChanged(self.path)
        body = self._body(files, marker, app_transactions, None)
        mine = {app_id for app_id, _ in app_transactions}
        version = self._version + 1
        for _ in range(_VERSIONS_SKIPPED):
            try:
                self._store.put_if_absent(self._log_key(version), body)
            except AlreadyExists:
                if self._taken(version, marker, mine):
                    break  # this commit, put by a try whose answer was lost
                version += 1
                continue
            break
        else:
            raise TableChanged(self.path)
        self._version = version
        self._txns.update(app_transactions)
        self._checkpoints.committed(version, body.decode("utf-8"))
        return version

    def _taken(self, version: int, marker: str, mine: set[str]) -> bool:
        """``version`` holds another entry: True when it is this commit; False when it may be
        stepped over (its app transactions are learnt); else raise (module docstring)."""
        text = self._read(version)
        info, txns, changes = _entry(text)
        if info.get(self._mark) == marker:
            return True
        theirs = info.get(self._epoch_mark)
        if self._epoch is not None and theirs is not None and supersedes(int(str(theirs)), self._epoch):
            self.forget()
            raise Superseded(self.path, version, int(str(theirs)))
        if changes:
            self.forget()
            raise TableChanged(self.path)
        if self._guarded or mine & txns.keys():
            # Another writer is committing these marks (the fan-out's Spark tasks, perhaps many
            # versions of them): load the table again rather than step through its commits one
            # refused put at a time; the caller decides again on what it then knows.
            self.forget()
            raise TransactionsTaken(self.path, version)
        self._txns.update(txns)
        self._version = version
        self._checkpoints.held(version, text)
        return False

    def _read(self, version: int) -> str:
        """The log entry at ``version`` (TableChanged when it is gone)."""
        try:
            got = self._store.get(self._log_key(version))
        except ObjectNotFound:
            # Refused, then gone: the log was cleaned below a checkpoint meanwhile; the table
            # is not what this appender knew.
            self.forget()
            raise TableChanged(self.path) from None
        return got.data.decode("utf-8")

    def _body(
        self, files: Sequence[DataFile], marker: str, app_transactions: Sequence[tuple[str, int]], first: FirstCommit | None
    ) -> bytes:
        info: dict[str, object] = {self._mark: marker}
        if self._epoch is not None:
            info[self._epoch_mark] = str(self._epoch)
        return commit_body(files, info, app_transactions, now_ms=int(time.time() * 1000), first=first).encode()

    def _log_key(self, version: int) -> str:
        return f"{self._key.rstrip('/')}/_delta_log/{version:020d}.json"

    # ------------------------------------------------------------------ background work

    def checkpointing(self) -> bool:
        """Whether a checkpoint is being written now."""
        return self._checkpoints.running()

    def finish(self, timeout: float | None = None) -> None:
        """Wait for the checkpoint being written (blind_append.Checkpoints.finish)."""
        self._checkpoints.finish(timeout)
