"""Blind appends to a local Delta table written without loading the table: a Parquet file and
one commit file, put in place only if that version is still free.

Why: on a local file system delta-rs lists the whole ``_delta_log`` directory (a ``stat`` per
entry) several times per write, so the cost of every append grows with the number of log files
the table keeps — about 1 ms more per 100 log files on these machines, and a topic keeps every
commit for ``[maintenance] history_retention_hours`` (bench/RESULTS.md, "append cost and the log
directory"). A blind append needs none of that: it reads nothing, so under Delta's rules it
conflicts with no concurrent commit but a change of the table's metadata or protocol.

What a commit holds (Delta protocol, writer version 2, no partitions):

* ``commitInfo``: timestamp, ``operation`` WRITE (mode Append), ``isBlindAppend`` and the
  caller's marker under :data:`sharedsub.storage.delta.appender.COMMIT_MARK` (a retry finds it);
* ``txn`` when the caller passes an app transaction (the fan-out's batch mark);
* one ``add`` per data file with its size, ``dataChange`` true and statistics
  (sharedsub.storage.delta.data_files.file_stats: the readers here rely on ``seq`` and
  ``published_at``): one file for :meth:`FastPathAppender.append`, the fan-out executors'
  files for :meth:`FastPathAppender.append_files`.

The commit file is written beside the log under a temporary name and hard-linked to
``<version>.json``: the link fails if the version exists, so two writers never both take it. A
version taken by another writer is skipped when its commit changes no metadata or protocol
(maintenance's compactions and deletes); otherwise :class:`TableChanged` is raised and the
caller commits through delta-rs, which checks the new metadata. A checkpoint is written every
:data:`CHECKPOINT_INTERVAL` versions, as delta-rs's own writes do, on a thread of its own (one at
a time; an interval whose checkpoint would start while one runs gets none), from the previous
checkpoint and the log entries this appender linked or stepped over since
(sharedsub.storage.delta.object_checkpoint): loading the table for delta-rs's checkpoint was a
quarter of the append child's CPU at 100 msg/s (bench/RESULTS.md, "The commit interval").

Only tables this module can write are taken (:func:`supported`): protocol reader 1 / writer
≤ 2, no partition columns, the same schema as the rows.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from sharedsub.core.layout import local_path
from sharedsub.storage.delta.checkpoint_rows import CannotCheckpoint
from sharedsub.storage.delta.data_files import DataFile, add_action, file_location, write_all, write_data_file
from sharedsub.storage.delta.object_checkpoint import write_checkpoint
from sharedsub.storage.delta.prepared_commit import (
    OpenCommit,
    PreparedCommit,
    fsync_together,
    prepare_commit,
    sweep_stale_temps,
    temp_name,
)
from sharedsub.storage.delta.tables import DEFAULT_TABLE_CONFIG, delta_table, log_file, table_exists
from sharedsub.storage.durable_files import fsync_path
from sharedsub.storage.objects.local_store import LocalStore
from sharedsub.storage.objects.store import ObjectStore

log = logging.getLogger(__name__)

CHECKPOINT_INTERVAL = 100
"""Versions between checkpoints (delta-rs's and Delta's default ``delta.checkpointInterval``)."""

_VERSIONS_SKIPPED = 1000  # versions taken by others one append steps over before it gives up


class TableChanged(Exception):
    """The table's metadata or protocol changed (or cannot be written here): commit through delta-rs."""


def supported(table: DeltaTable, schema: pa.Schema) -> bool:
    """Whether :class:`FastPathAppender` may write ``table`` with rows of ``schema``."""
    protocol = table.protocol()
    if protocol.min_reader_version > 1 or protocol.min_writer_version > 2:
        return False
    metadata = table.metadata()
    if metadata.partition_columns or metadata.configuration.get("delta.appendOnly") not in (None, "true", "false"):
        return False
    return [f.name for f in table.schema().fields] == schema.names


class FirstCommit:
    """The ``protocol`` and ``metaData`` actions delta-rs writes into the first commit of a
    table of one schema, learnt once per process from a scratch table it made
    (:func:`first_commit_template`): a new table's first commit is then written here like any other (a
    data file and a commit file), not through delta-rs, which costs ~10 ms more a table (a
    thousand subscriptions' tables made by one fan-out batch: issue 41). The table is the one
    delta-rs would have made, under a new id."""

    def __init__(self, protocol: dict[str, object], metadata: dict[str, object]) -> None:
        self.protocol = protocol
        self.metadata = metadata

    def actions(self, now_ms: int) -> str:
        """The two actions of a new table's first commit, as log lines."""
        metadata = dict(self.metadata, id=str(uuid.uuid4()), createdTime=now_ms)
        return (
            json.dumps({"protocol": self.protocol}, separators=(",", ":"))
            + "\n"
            + json.dumps({"metaData": metadata}, separators=(",", ":"))
            + "\n"
        )


_templates: dict[str, FirstCommit | None] = {}
_templates_lock = threading.Lock()


def first_commit_template(schema: pa.Schema) -> FirstCommit | None:
    """The first-commit actions of a table of ``schema`` made with DEFAULT_TABLE_CONFIG (None:
    delta-rs makes such a table with a protocol this module does not write, :func:`supported`)."""
    key = schema.to_string(show_field_metadata=False, show_schema_metadata=False)
    with _templates_lock:
        if key in _templates:
            return _templates[key]
        scratch = tempfile.mkdtemp(prefix="sharedsub-template-")
        try:
            write_deltalake(scratch, schema.empty_table(), mode="append", configuration=DEFAULT_TABLE_CONFIG)
            protocol = metadata = None
            with open(log_file(scratch, 0), encoding="utf-8") as fh:
                for line in fh:
                    action = json.loads(line)
                    protocol = action.get("protocol", protocol)
                    metadata = action.get("metaData", metadata)
            table = DeltaTable(scratch)
            made = FirstCommit(protocol, metadata) if protocol and metadata and supported(table, schema) else None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        _templates[key] = made
        return made


def changes_table(lines: Iterable[str]) -> bool:
    """Whether a commit of these log lines changes metadata or protocol (then a blind append
    may not step over it: its rows may not fit the table any more)."""
    for line in lines:
        if '"metaData"' in line or '"protocol"' in line:  # only such lines are parsed
            action = json.loads(line)
            if "metaData" in action or "protocol" in action:
                return True
    return False


def commit_body(
    files: Sequence[DataFile],
    info: Mapping[str, object],
    app_transactions: Sequence[tuple[str, int]],
    *,
    now_ms: int,
    first: FirstCommit | None = None,
) -> str:
    """The log lines of a blind append of ``files``: ``commitInfo`` (the WRITE of an append, with
    the caller's ``info`` keys: its commit marker, its owner epoch), the first commit's protocol
    and metadata when ``first`` is given, one ``add`` per file in order, one ``txn`` per app
    transaction."""
    head: dict[str, object] = {
        "timestamp": now_ms,
        "operation": "WRITE",
        "operationParameters": {"mode": "Append"},
        "isBlindAppend": True,
        "clientVersion": "sharedsub-blind-append",
        **info,
    }
    body = json.dumps({"commitInfo": head}, separators=(",", ":")) + "\n"
    if first is not None:
        body += first.actions(now_ms)
    for f in files:
        body += json.dumps({"add": add_action(f)}, separators=(",", ":")) + "\n"
    for app_id, app_version in app_transactions:
        txn = {"appId": app_id, "version": app_version, "lastUpdated": now_ms}
        body += json.dumps({"txn": txn}, separators=(",", ":")) + "\n"
    return body


class Checkpoints:
    """The checkpoints of one table written by blind appends: one every
    :data:`CHECKPOINT_INTERVAL` versions, as delta-rs's own writes do, on a thread of its own
    (loading the table for it takes tens of ms, which the appends behind it would otherwise wait
    for: publish→accepted p99); one at a time, an interval whose checkpoint would start while one
    runs gets none.

    Each is made from the previous checkpoint and the log entries its appender put or stepped
    over since (:meth:`committed`, :meth:`held`), through ``store`` at the table's ``key``
    (sharedsub.storage.delta.object_checkpoint); when that cannot be done (CannotCheckpoint),
    delta-rs writes it. One thread calls the methods (the appender's)."""

    def __init__(self, table: str, store: ObjectStore, key: str) -> None:
        self.table = table
        self._store = store
        self._key = key
        self._thread: threading.Thread | None = None
        # Log entry texts since the last checkpoint was started, by version: the next one's makings.
        self._held: dict[int, str] = {}

    def held(self, version: int, text: str) -> None:
        """The appender read log entry ``version`` (another writer's, stepped over)."""
        self._held[version] = text

    def committed(self, version: int, text: str) -> None:
        """The appender committed log entry ``version``: start its checkpoint when it is due,
        with the entries held so far (the thread takes them; holding starts again)."""
        self._held[version] = text
        if version > 0 and version % CHECKPOINT_INTERVAL == 0 and not self.running():
            held, self._held = self._held, {}
            self._thread = threading.Thread(
                target=self._write, args=(version, held), name="sharedsub-checkpoint", daemon=True
            )
            self._thread.start()

    def forget(self) -> None:
        """The appender loads the table again: what it held may not follow on from it."""
        self._held = {}

    def running(self) -> bool:
        """Whether a checkpoint is being written now."""
        return self._thread is not None and self._thread.is_alive()

    def finish(self, timeout: float | None = None) -> None:
        """Wait (at most ``timeout`` seconds) for the checkpoint being written, if one is: a
        process that ends while the checkpoint's thread is inside delta-rs dies of SIGSEGV as the
        interpreter shuts down (seen: the append child, stopped after a table's 100th commit)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _write(self, version: int, held: Mapping[int, str]) -> None:
        try:
            try:
                write_checkpoint(self._store, self._key, version, held)
                return
            except CannotCheckpoint as exc:
                log.info("checkpoint of %s at version %d through delta-rs: %s", self.table, version, exc)
            delta_table(self.table, version).create_checkpoint()
        except Exception as exc:  # noqa: BLE001 (the commits stand; readers replay more log until the next one)
            log.warning("checkpoint of %s at version %d failed: %s", self.table, version, exc)


class FastPathAppender:
    """The fast path of :class:`~sharedsub.storage.delta.appender.DeltaAppender`: blind appends to
    one existing local table, without loading it (see the module docstring). One thread."""

    def __init__(self, path: str, schema: pa.Schema, *, commit_mark: str, sync: bool = False) -> None:
        """``path``: the table's directory. ``commit_mark``: the commitInfo key of the marker.
        ``sync``: force the data files and the commit file's content to disk *before* the commit
        takes its version (see :meth:`append_files`)."""
        self.path = path
        self.schema = schema
        self._mark = commit_mark
        self._sync = sync
        self._version = -1  # the latest version known; -1: look it up (and check the table) first
        # Its files are put atomically through local_store.
        self._checkpoints = Checkpoints(path, LocalStore(local_path(path) or path), "")
        self._unsupported = False  # the table cannot be written here: never looked at again
        self._prepared: PreparedCommit | None = None  # the next append's files, made ahead (prepare)
        self._swept = False  # temporary commit files left beside the log were looked for

    def ready(self) -> int | None:
        """The latest version known, which the next append's commit lands above (where a search
        for the commit of a failed append starts); the table is loaded and checked the first time
        and after :meth:`forget`. None when this appender cannot write it: there is no table yet
        (the first commit creates it through delta-rs), or :func:`supported` refused it."""
        if self._unsupported:
            return None
        if self._version < 0:
            if not table_exists(self.path):
                return None
            table = delta_table(self.path)
            if not supported(table, self.schema):
                self._unsupported = True
                return None
            self._version = table.version()
            self._checkpoints.forget()
            if self._sync and not self._swept:
                self._swept = True
                sweep_stale_temps(os.path.dirname(log_file(self.path, 0)))
        return self._version

    def prepare(self) -> None:
        """With ``sync``, make the next append's files now (sharedsub.storage.delta.prepared_commit):
        call between appends, when nothing waits on this appender. Nothing when they are made
        already, the table cannot be written here, or making them fails (the next append then
        makes its own)."""
        if not self._sync or self._prepared is not None or self.ready() is None:
            return
        try:
            self._prepared = prepare_commit(local_path(self.path) or self.path, os.path.dirname(log_file(self.path, 0)))
        except OSError as exc:
            log.warning("could not make the next commit's files of %s ahead: %s", self.path, exc)

    def unprepare(self) -> None:
        """Remove the files made ahead, if any (the next append makes its own)."""
        prepared, self._prepared = self._prepared, None
        if prepared is not None:
            prepared.discard()

    def _open_prepared(self) -> OpenCommit | None:
        """The files made ahead, open, when there are and they may still be used (else they are removed)."""
        prepared, self._prepared = self._prepared, None
        if prepared is None:
            return None
        if not prepared.fresh(time.monotonic()):
            prepared.discard()
            return None
        return prepared.open()

    def absent(self) -> bool:
        """Whether there is no table yet and :meth:`create` may make it."""
        return not self._unsupported and self._version < 0 and not table_exists(self.path)

    def forget(self) -> None:
        """Another writer of this process committed: look the latest version up again."""
        self._version = -1

    def create(self, data: pa.Table, marker: str, app_transactions: Sequence[tuple[str, int]] = ()) -> int:
        """Make the table with ``data`` (already cast to the schema, one chunk) as its first
        commit, version 0, as delta-rs would make it (:class:`FirstCommit`); return 0.

        Raises:
            TableChanged: another writer made the table meanwhile, or delta-rs makes tables of
                this schema with a protocol this module does not write: the caller uses delta-rs.
            OSError: as :meth:`append`.
        """
        template = first_commit_template(self.schema)
        if template is None:
            raise TableChanged(self.path)
        log_dir = os.path.dirname(log_file(self.path, 0))
        os.makedirs(log_dir, exist_ok=True)
        self._version = -1
        self._checkpoints.forget()
        try:
            version = self._commit([write_data_file(self.path, data)], marker, app_transactions, first=template)
        except FileExistsError:
            raise TableChanged(self.path) from None
        return version

    def append(self, data: pa.Table, marker: str, app_transactions: Sequence[tuple[str, int]] = ()) -> int:
        """Commit ``data`` (already cast to the schema, one chunk) as a new version; return it.
        Each of ``app_transactions`` = ``(app_id, version)`` is recorded in the same commit (a
        Delta ``txn`` action, as delta-rs's ``Transaction``): the fan-out's exactly-once mark.

        Raises:
            TableChanged: the table cannot be written here (the caller uses delta-rs).
            OSError: writing the file or the commit failed (nothing was committed; a written
                data file no commit names is left, as delta-rs leaves one).
        """
        if self.ready() is None:
            raise TableChanged(self.path)
        opened = self._open_prepared()
        if opened is None:
            return self.append_files([write_data_file(self.path, data)], marker, app_transactions)
        try:
            files = [write_data_file(self.path, data, into=(opened.data_name, opened.data_fd))]
            return self._commit(files, marker, app_transactions, prepared=opened)
        finally:
            opened.close()

    def append_files(self, files: Sequence[DataFile], marker: str, app_transactions: Sequence[tuple[str, int]] = ()) -> int:
        """Commit data files already written into the table's directory (one ``add`` each, in
        the given order) as a new version; return it. As :meth:`append` otherwise."""
        if self.ready() is None:
            raise TableChanged(self.path)
        return self._commit(files, marker, app_transactions)

    def _commit(
        self,
        files: Sequence[DataFile],
        marker: str,
        app_transactions: Sequence[tuple[str, int]],
        *,
        first: FirstCommit | None = None,
        prepared: OpenCommit | None = None,
    ) -> int:
        """Write the commit of ``files`` at the first free version after the known one (version 0
        with ``first``'s actions; FileExistsError when it is taken). ``prepared``: the files made
        ahead, the first of ``files`` written into its data file (only with ``sync``)."""
        body = commit_body(files, {self._mark: marker}, app_transactions, now_ms=int(time.time() * 1000), first=first)
        log_dir = os.path.dirname(log_file(self.path, 0))
        if prepared is not None:
            temp = prepared.temp_path
            try:
                write_all(prepared.temp_fd, body.encode())
                # As below, but the data file's name was made durable with the file.
                fsync_together(prepared.data_fd, prepared.temp_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
            return self._link_commit(temp, body, first)
        temp = os.path.join(log_dir, temp_name())
        with open(temp, "w", encoding="utf-8") as fh:
            fh.write(body)
        if self._sync:
            # What the commit names must be on disk before the commit can be: a power loss that
            # kept the new version's name but not a data file, or not the commit file's content,
            # would leave a table no reader can load. Only the log directory, which makes the
            # version's name durable, is left for after the link (the caller's).
            for f in files:
                fsync_path(file_location(self.path, f.name))
            fsync_path(local_path(self.path) or self.path, directory=True)
            fsync_path(temp)
        return self._link_commit(temp, body, first)

    def _link_commit(self, temp: str, body: str, first: FirstCommit | None) -> int:
        """Link the written commit file ``temp`` (holding ``body``) to its version and remove
        ``temp``; return the version (as :meth:`_commit`)."""
        try:
            if first is not None:
                os.link(temp, log_file(self.path, 0))  # FileExistsError: another writer made it
                version = 0
            else:
                version = self._link(temp)
        finally:
            os.unlink(temp)
        self._version = version
        self._checkpoints.committed(version, body)
        return version

    def checkpointing(self) -> bool:
        """Whether a checkpoint is being written now."""
        return self._checkpoints.running()

    def finish(self, timeout: float | None = None) -> None:
        """Wait (at most ``timeout`` seconds) for the checkpoint being written (Checkpoints.finish)
        and remove the files made ahead, if any."""
        self.unprepare()
        self._checkpoints.finish(timeout)

    def _link(self, temp: str) -> int:
        """Put the commit at the first free version after the known one; return it. Versions
        other writers took are stepped over when they change no metadata or protocol."""
        version = self._version + 1
        for _ in range(_VERSIONS_SKIPPED):
            target = log_file(self.path, version)
            try:
                os.link(temp, target)
            except FileExistsError:
                with open(target, encoding="utf-8") as fh:
                    text = fh.read()
                if changes_table(text.splitlines()):
                    self._version = -1  # check the table again before the next fast append
                    raise TableChanged(self.path) from None
                self._checkpoints.held(version, text)
                version += 1
                continue
            return version
        raise TableChanged(self.path)
