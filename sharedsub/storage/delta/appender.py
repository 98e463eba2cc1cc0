"""Appending to a table: :class:`DeltaAppender`, commit ids, and forcing commits to disk."""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Sequence

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError
from deltalake.transaction import AddAction

from sharedsub.core.layout import local_path
from sharedsub.core.ownership.members import supersedes, token_epoch
from sharedsub.storage.delta.blind_append import FastPathAppender, TableChanged
from sharedsub.storage.delta.commit_log import LogEntry, latest_version, read_log_entry
from sharedsub.storage.delta.data_files import DataFile
from sharedsub.storage.delta.log_snapshot import file_stamp
from sharedsub.storage.delta.object_append import ObjectAppender, Superseded, TransactionsTaken
from sharedsub.storage.delta.tables import DEFAULT_TABLE_CONFIG, delta_table, log_file, table_exists
from sharedsub.storage.durable_files import fsync_path
from sharedsub.storage.objects.locations import storage_options

# commitInfo key of the id DeltaAppender gives each commit (finds a commit that landed although
# the append raised).
COMMIT_MARK = "sharedsub.commit"

# Tries of an append refused for a commit made since its table was loaded (CommitFailedError).
APPEND_ATTEMPTS = 5

# commitInfo key of the owner epoch an appender writes under (sharedsub.core.ownership.lease): a
# commit refused because its version was taken by a higher epoch means another front end owns the
# data dir now, and this writer must stop (fencing at the log, not only at the lease).
EPOCH_MARK = "sharedsub.epoch"


class Fenced(Exception):
    """A commit found its version taken under a higher owner epoch: this writer is superseded."""

    def __init__(self, table: str, version: int, theirs: int, mine: int) -> None:
        slot, their_epoch = token_epoch(theirs)
        owner = "another front end owns the data dir now" if slot == 0 else f"another front end holds member slot {slot} now"
        super().__init__(
            f"{table}: version {version} was written under owner epoch {their_epoch}, this writer's is "
            f"{token_epoch(mine)[1]}: {owner}"
        )
        self.table = table
        self.version = version
        self.theirs = theirs
        self.mine = mine


def check_fence(table: str, after: int, epoch: int) -> None:
    """Raise :class:`Fenced` when a commit of ``table`` after version ``after`` carries an owner
    epoch that supersedes ``epoch`` (a fence token: sharedsub.core.ownership.members, a later
    epoch of the same member slot)."""
    latest = latest_version(table, after) if after >= 0 else latest_version(table)
    for version in range(max(after + 1, 0), latest + 1):
        entry = read_log_entry(table, version)
        theirs = entry.info.get(EPOCH_MARK) if entry is not None else None
        if theirs is not None and supersedes(int(theirs), epoch):
            raise Fenced(table, version, int(theirs), epoch)


def _add(f: DataFile) -> AddAction:
    """delta-rs's add action for a data file written before its commit."""
    return AddAction(f.name, f.size, {}, f.modified_ms, True, f.stats)


def _next_entry(table: str, version: int) -> LogEntry | None:
    """The log entry of ``version + 1``; None when there is none (yet). A directory under its
    name is none either: delta-rs reads the table at its last version then (the fan-out fault
    tests block a table that way)."""
    try:
        return read_log_entry(table, version + 1)
    except IsADirectoryError:
        return None


def find_commit(table: str, commit_id: str, *, after: int) -> int | None:
    """The version after ``after`` whose commit carries ``commit_id`` (:data:`COMMIT_MARK`), or
    None. Reads the log entries from ``after + 1`` to the latest (local tables)."""
    latest = latest_version(table, after) if after >= 0 else latest_version(table)
    for version in range(max(after + 1, 0), latest + 1):
        entry = read_log_entry(table, version)
        if entry is not None and entry.info.get(COMMIT_MARK) == commit_id:
            return version
    return None


def sync_commit(table: str, version: int) -> None:
    """Force commit ``version`` of a local ``table`` to disk: the data files it added, its log
    entry, and the directories that name them.

    delta-rs makes a commit atomic and visible (the log entry appears whole or not at all) but
    does not fsync it, so a power loss could take back a commit a publisher was told about. A
    caller that settles publishers after this has them on disk. Other storage: nothing to do.
    """
    if local_path(table) is None:
        return
    entry = read_log_entry(table, version)
    if entry is None:
        return
    dirs = {os.path.dirname(log_file(table, version))}
    for path in entry.added:
        fsync_path(path)
        dirs.add(os.path.dirname(path))
    fsync_path(log_file(table, version))
    for directory in dirs:
        fsync_path(directory, directory=True)


class VersionTaken(Exception):
    """A guarded appender's commit found its version taken by another writer (nothing of it
    landed): read the table's app transaction again before trying again."""

    def __init__(self, table: str) -> None:
        super().__init__(f"{table}: another writer took the next version")
        self.table = table


class NoTable(FileNotFoundError):
    """Data files were to be committed to a table that does not exist yet (its first commit sets
    its schema and must carry rows: append them instead)."""


class CommitNotSynced(Exception):
    """An append's commit landed (its rows are visible) but forcing it to disk failed. Retry the
    append with the same commit id: it syncs again and does not write the rows twice."""

    def __init__(self, table: str, version: int, cause: BaseException) -> None:
        super().__init__(f"version {version} of {table} is committed but not forced to disk: {cause}")
        self.table = table
        self.version = version


def _as_written(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """``data`` in ``schema``, one chunk per column (see _commit_delta_rs on why one chunk);
    without a copy when it is so already (a cast and a combine cost ~0.2 ms even then)."""
    if not data.schema.equals(schema):
        data = data.cast(schema)
    if any(column.num_chunks > 1 for column in data.columns):
        data = data.combine_chunks()
    return data


def _txns(one: tuple[str, int] | None, many: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    """The app transactions of a commit: ``one`` (when given), then ``many``."""
    return [*([one] if one is not None else []), *many]


class DeltaAppender:
    """Appends Arrow tables to one Delta table in this process: the writer every other appender
    ends in (the committer's, in the service or in its append child; the fan-out's sink; tests'
    builders). Reuses the loaded ``DeltaTable``.

    The table object is re-opened every ``reopen_every`` commits because a long-lived one gets
    slower as the log grows: measured by bench/append_cost.py (bench/RESULTS.md), an appender
    that kept its object past delta-rs's checkpoint (every 100 commits) appended about 40%
    slower until it re-opened; every 100 commits (the default) or 50 keeps it flat. With ``fsync``, each commit is forced to disk
    before :meth:`append` returns: a blind append forces its data files and its log entry's
    content before the entry takes its version, then the log directory (a power loss cannot
    leave a version naming what is not on disk); a commit made through delta-rs is forced after
    it lands (:func:`sync_commit`).

    Appends to an existing local table go through :class:`sharedsub.storage.delta.blind_append.FastPathAppender`
    (``blind``, the default): a Parquet file and a commit file, without loading the table, whose
    cost does not grow with the log (delta-rs lists the log directory on every write). The first
    commit, schema evolution, other storage and a table whose metadata changed meanwhile take
    delta-rs.

    Each commit carries a commit id (:data:`COMMIT_MARK` in its commitInfo), so that an append
    that raised can tell whether its commit landed anyway: delta-rs can fail *after* the log
    entry is in place (seen: the post-commit checkpoint on a full disk raised ENOSPC for a commit
    that was visible). Retrying such an append blindly would store its rows twice.
    """

    def __init__(
        self,
        path: str,
        schema: pa.Schema,
        *,
        reopen_every: int = 100,
        fsync: bool = False,
        evolve: bool = False,
        blind: bool = True,
        epoch: int | None = None,
        guarded: bool = False,
    ) -> None:
        self.path = path
        # Other writers may commit the same app transactions (a retried or speculative Spark
        # task): never rebase a refused commit onto theirs; raise VersionTaken and let the caller
        # read the app transaction again (sharedsub.storage.delta.file_commits).
        self._guarded = guarded
        # The owner epoch this appender writes under (None: no owner lease, a local data dir's
        # flock excludes other writers). With one, delta-rs does not retry a refused commit by
        # itself: the refusal is read first (check_fence).
        self._epoch = epoch
        self._checked: int | None = None  # with an epoch: versions up to this one hold no higher epoch
        self.schema = schema
        self._fsync = fsync
        # Merge columns ``schema`` has and the table lacks into the table's schema (a table made
        # by an older release); a column the table has and ``schema`` lacks is still refused.
        self._evolve = evolve
        self._reopen_every = reopen_every
        self._commits = 0
        self._table: DeltaTable | None = None
        # (commit id, version known before its first try) of the last append that raised: a
        # retry with that id looks for its commit after that version before writing again.
        self._tried: tuple[str, int] | None = None
        # app id -> (version read up to, stamp of that version's log file, its transaction version)
        self._transactions: dict[str, tuple[int, tuple[int, int, int], int | None]] = {}
        self._local = local_path(path) is not None
        fast = blind and not evolve and self._local and epoch is None and not guarded
        self._blind = FastPathAppender(path, schema, commit_mark=COMMIT_MARK, sync=fsync) if fast else None
        remote = blind and not evolve and not self._local
        self._remote = (
            ObjectAppender(path, schema, commit_mark=COMMIT_MARK, epoch_mark=EPOCH_MARK, epoch=epoch, guarded=guarded)
            if remote
            else None
        )

    def finish(self, timeout: float | None = None) -> None:
        """Let work this appender started in the background end (a checkpoint being written;
        FastPathAppender.finish): call before the process ends. It may append again after."""
        if self._blind is not None:
            self._blind.finish(timeout)
        if self._remote is not None:
            self._remote.finish(timeout)

    def prepare(self) -> None:
        """Make the next append's files now, while nothing waits on this appender: only a
        synced blind append to a local table has any (FastPathAppender.prepare). Never raises
        for a file system's refusal (the next append then makes its own)."""
        if self._blind is not None:
            self._blind.prepare()

    def unprepare(self) -> None:
        """Remove the files :meth:`prepare` made, if any."""
        if self._blind is not None:
            self._blind.unprepare()

    def _open(self) -> DeltaTable | None:
        if self._table is None or self._commits >= self._reopen_every:
            self._commits = 0
            self._table = delta_table(self.path) if table_exists(self.path) else None
        return self._table

    def append(
        self,
        data: pa.Table,
        *,
        app_transaction: tuple[str, int] | None = None,
        app_transactions: Sequence[tuple[str, int]] = (),
        commit_id: str | None = None,
        tried_after: int | None = None,
    ) -> int:
        """Commit ``data`` as one Delta commit; return the new table version.

        ``app_transaction`` records ``(app_id, version)`` in the same commit (Delta ``txn``);
        ``app_transactions`` records several (one per topic partition, for the fan-out).
        ``commit_id`` names this data: a caller retrying an append that raised passes the same id
        again, and gets the version of the earlier try's commit when that one landed (the rows
        are not written twice; only the fsync is done again). Without it a fresh id is used. An
        append that raises has not committed, or committed and was not synced (retry it with its
        id). ``tried_after``: ``commit_id`` may have been tried by another appender (a process that
        died) when the table was at this version or later; its commit is looked for from there.
        """
        marker = commit_id or uuid.uuid4().hex
        if tried_after is not None and (self._tried is None or self._tried[0] != marker):
            self._tried = (marker, tried_after)
        return self._commit_once(data, marker, _txns(app_transaction, app_transactions))

    def append_files(
        self,
        files: Sequence[DataFile],
        *,
        app_transaction: tuple[str, int] | None = None,
        app_transactions: Sequence[tuple[str, int]] = (),
        commit_id: str | None = None,
    ) -> int:
        """Commit data files already written into this table's directory
        (sharedsub.storage.delta.data_files, e.g. by the fan-out's executors) as one Delta commit,
        their ``add`` actions in the given order; return the new version. ``app_transaction(s)`` and
        ``commit_id`` as in :meth:`append`.

        Raises:
            NoTable: there is no table yet (its first commit must set its schema: the
                caller appends the files' rows instead).
        """
        txns = _txns(app_transaction, app_transactions)
        return self._commit_once(list(files), marker=commit_id or uuid.uuid4().hex, txns=txns)

    def _commit_once(self, data: pa.Table | list[DataFile], marker: str, txns: list[tuple[str, int]]) -> int:
        """Commit ``data`` under ``marker`` unless an earlier try of it landed; force it to disk
        when asked (:meth:`append`'s contract)."""
        version = self._landed(marker)
        presynced = False
        if version is None:
            version, presynced = self._commit(data, marker, txns)
        if self._local:
            # This commit set these app transactions: the next transaction_version reads on from
            # it instead of reading it back (the fan-out asks before each commit to a table).
            for app_id, value in txns:
                self._remember(app_id, version, value)
        if self._fsync:
            try:
                if presynced:  # a blind append synced all but the name of its version
                    fsync_path(os.path.dirname(log_file(self.path, version)), directory=True)
                else:
                    sync_commit(self.path, version)
            except Exception as exc:  # _tried is kept: a retry with the id syncs again
                raise CommitNotSynced(self.path, version, exc) from exc
        self._tried = None
        return version

    def _landed(self, marker: str) -> int | None:
        """Version of the commit an earlier, failed try of ``marker`` made; None when it made none."""
        if self._tried is None or self._tried[0] != marker:
            return None
        return find_commit(self.path, marker, after=self._tried[1])

    def _commit(self, data: pa.Table | list[DataFile], marker: str, txns: list[tuple[str, int]]) -> tuple[int, bool]:
        """One commit of ``data``: rows, or data files already written (sharedsub.storage.delta.data_files).
        Returns its version and whether, with ``fsync``, all of it but its version's name was
        forced to disk before it landed (a blind append's own syncs)."""
        if self._remote is not None:
            landed = self._commit_remote(self._remote, data, marker, txns)
            if landed is not None:
                return landed, False
        if self._blind is not None:
            done = self._commit_local(self._blind, data, marker, txns)
            if done is not None:
                return done
        version = self._commit_delta_rs(data, marker, txns)
        if self._blind is not None:
            self._blind.forget()  # its known version is behind this commit
        if self._remote is not None:
            self._remote.forget()
        return version, False

    def _commit_local(
        self, blind: FastPathAppender, data: pa.Table | list[DataFile], marker: str, txns: list[tuple[str, int]]
    ) -> tuple[int, bool] | None:
        """One commit of ``data`` to a local table by a blind append (as :meth:`_commit`); None
        when delta-rs must make it (the table changed, or cannot be written so)."""
        # Not table_exists here: it lists the log directory, the cost blind appends avoid.
        known = blind.ready()
        if known is None and not isinstance(data, list) and blind.absent():
            if self._tried is None or self._tried[0] != marker:
                self._tried = (marker, -1)
            try:
                return blind.create(_as_written(data, self.schema), marker, txns), False  # (new directories: sync_commit)
            except TableChanged:
                self._table = None  # made meanwhile, or not by this path: delta-rs appends to it
            except Exception:
                landed = find_commit(self.path, marker, after=-1)
                if landed is None:
                    raise
                return landed, False
        if known is not None:
            if self._tried is None or self._tried[0] != marker:
                self._tried = (marker, known)
            try:
                if isinstance(data, list):
                    version = blind.append_files(data, marker, txns)
                else:
                    version = blind.append(_as_written(data, self.schema), marker, txns)
                return version, self._fsync
            except TableChanged:
                self._table = None  # delta-rs commits this one, on the table as it is now
            except Exception:
                landed = find_commit(self.path, marker, after=self._tried[1])
                if landed is None:
                    raise
                return landed, False
        return None

    def _commit_remote(
        self, remote: ObjectAppender, data: pa.Table | list[DataFile], marker: str, txns: list[tuple[str, int]]
    ) -> int | None:
        """One commit of ``data`` on object storage by :class:`ObjectAppender` (two requests);
        None when delta-rs must make it (no table yet and ``data`` is files, or the table changed).

        Raises:
            Fenced: a higher owner epoch holds the version this commit was to take.
            VersionTaken: another writer committed the same app transactions there (decide again).
        """
        known = remote.ready()
        if known is None and (isinstance(data, list) or not remote.absent()):
            return None
        if self._tried is None or self._tried[0] != marker:
            self._tried = (marker, -1 if known is None else known)
        try:
            if known is None:
                assert not isinstance(data, list)
                version = remote.create(_as_written(data, self.schema), marker, txns)
            elif isinstance(data, list):
                version = remote.append_files(data, marker, txns)
            else:
                version = remote.append(_as_written(data, self.schema), marker, txns)
        except TableChanged:
            self._table = None
            return None
        except Superseded as exc:
            assert self._epoch is not None
            raise Fenced(self.path, exc.version, exc.theirs, self._epoch) from None
        except TransactionsTaken:
            raise VersionTaken(self.path) from None
        except Exception:
            remote.forget()
            assert self._tried is not None
            landed = find_commit(self.path, marker, after=self._tried[1])
            if landed is None:
                raise
            return landed
        if self._epoch is not None:
            # Every version up to this one is checked: loaded after this writer's fence, or
            # committed or stepped over here (object_append reads every entry it steps over).
            self._checked = version if self._checked is None else max(self._checked, version)
        return version

    def _commit_delta_rs(self, data: pa.Table | list[DataFile], marker: str, txns: list[tuple[str, int]]) -> int:
        marks = {COMMIT_MARK: marker} if self._epoch is None else {COMMIT_MARK: marker, EPOCH_MARK: str(self._epoch)}
        props = CommitProperties(
            custom_metadata=marks,
            app_transactions=[Transaction(app_id, version) for app_id, version in txns] or None,
            max_commit_retries=0 if self._epoch is not None or self._guarded else None,
        )
        table = self._open()
        if table is None and isinstance(data, list):
            raise NoTable(f"no table at {self.path} to commit data files to")
        target: DeltaTable | str = table if table is not None else self.path
        if self._tried is None or self._tried[0] != marker:
            self._tried = (marker, table.version() if table is not None else -1)
        try:
            for attempt in range(APPEND_ATTEMPTS):
                try:
                    if isinstance(data, list):
                        assert table is not None
                        table.create_write_transaction(
                            [_add(f) for f in data], mode="append", schema=table.schema(), commit_properties=props
                        )
                        table.update_incremental()  # the object stays at its old version otherwise
                        break
                    write_deltalake(
                        target,
                        # One chunk: delta-rs may write the record batches of a many-chunk table
                        # into the file out of order (seen: a parked part of seqs 0-2 and a later
                        # one of 3-4 stored as 3, 4, 0, 1, 2), and rows must stay in seq order.
                        data.cast(self.schema).combine_chunks(),
                        mode="append",
                        commit_properties=props,
                        configuration=DEFAULT_TABLE_CONFIG if table is None else None,
                        storage_options=storage_options(self.path) if table is None else None,
                        schema_mode="merge" if self._evolve and table is not None else None,
                    )
                    break
                except CommitFailedError:
                    # The client retries a put whose answer was lost (a store that dropped the
                    # connection or hung): the retry of this very log entry is refused as taken.
                    # Found here, it is not written again below.
                    landed = find_commit(self.path, marker, after=self._tried[1])
                    if landed is not None:
                        self._table = None
                        return landed
                    # A maintenance commit (delete of acknowledged rows, compaction) landed since this
                    # table object was loaded; delta-rs refuses the append against the old snapshot.
                    # An append does not depend on what it read: reload and commit again, unless
                    # a higher owner epoch took a version meanwhile (then this writer stops).
                    if self._epoch is not None:
                        check_fence(self.path, table.version() if table is not None else -1, self._epoch)
                    if self._guarded:
                        raise VersionTaken(self.path) from None
                    if attempt + 1 == APPEND_ATTEMPTS:
                        raise
                    # Several members append to one table (a shared ack log): a short random
                    # pause keeps two writers that collided from colliding again at once.
                    time.sleep(random.uniform(0.002, 0.02) * (attempt + 1))
                    if table is None:
                        # Another writer made the table first (several members' first commits
                        # to a new table at once): append to the table it made.
                        table = self._open()
                        if table is None:
                            raise
                        target = table
                        continue
                    table.update_incremental()
        except Exception:
            self._table = None  # its state after a failed write is not trusted: reload next time
            landed = find_commit(self.path, marker, after=self._tried[1])
            if landed is None:
                raise
            return landed
        self._commits += 1
        if table is None:
            self._table = table = delta_table(self.path)
        return table.version()

    def fence(self) -> int:
        """Write an empty commit under this appender's epoch (a new owner does so before it reads
        the table's state): a writer of a lower epoch that commits after it finds the fence and
        stops. Returns its version.

        Raises:
            Fenced: a higher epoch is there already.
        """
        assert self._epoch is not None, "fence() needs an owner epoch"
        marker = f"fence-{uuid.uuid4().hex}"
        props = CommitProperties(custom_metadata={EPOCH_MARK: str(self._epoch), COMMIT_MARK: marker}, max_commit_retries=0)
        for attempt in range(APPEND_ATTEMPTS):
            self._table = None
            table = self._open()
            if table is None:
                raise FileNotFoundError(f"no table at {self.path} to fence")
            try:
                table.create_write_transaction([], mode="append", schema=table.schema(), commit_properties=props)
            except CommitFailedError:
                check_fence(self.path, table.version(), self._epoch)
                if attempt + 1 == APPEND_ATTEMPTS:
                    raise
                continue
            self._table = None
            if self._remote is not None:
                self._remote.forget()
            landed = find_commit(self.path, marker, after=table.version())
            assert landed is not None, f"the fence of {self.path} committed but is not in its log"
            self._checked = landed
            return landed
        raise AssertionError("unreachable")

    def transaction_version(self, app_id: str) -> int | None:
        """Last version recorded for ``app_id`` in this table, or None.

        On a local table the answer is carried forward from the last one: only the commits made
        since are read (usually one, this appender's own), so the cost does not grow with the
        log. delta-rs answers the first time, and again when the log file of the version last
        read changed or is gone (the table was dropped and made again, or its log cleaned).
        Asking a long-lived ``DeltaTable`` instead cost ~0.11 ms more per commit in the table
        since it was loaded (blind appends never re-open it): 90 ms after 800 commits.
        """
        if self._remote is not None:
            remote_version = self._remote.ready()
            if remote_version is not None:
                if self._epoch is not None and self._checked is None:
                    self._checked = remote_version  # as the load below would (_check_epochs)
                return self._remote.transaction_version(app_id)
            if self._remote.absent():
                if self._epoch is not None and self._checked is None:
                    self._checked = -1  # no table yet: every version it will have is checked
                return None
        known = self._transactions.get(app_id)
        if known is not None and self._local:
            version, stamp, value = known
            if file_stamp(log_file(self.path, version)) == stamp:
                while (entry := _next_entry(self.path, version)) is not None:
                    version += 1
                    value = entry.transactions.get(app_id, value)
                if version != known[0]:
                    self._remember(app_id, version, value)
                self._check_epochs(version)
                return value
        if self._local:
            self._table = None  # a table loaded before may be one that was dropped since
        table = self._open()
        if table is None:
            if self._epoch is not None and self._checked is None:
                self._checked = -1  # no table yet: every version it will have is checked
            return None
        table.update_incremental()
        value = table.transaction_version(app_id)
        self._remember(app_id, table.version(), value)
        self._check_epochs(table.version())
        return value

    @property
    def checked(self) -> int | None:
        """With an owner epoch: the version up to which the log is known to hold no higher epoch
        (None before the first look)."""
        return self._checked

    def assume_checked(self, version: int | None) -> None:
        """Take the log up to ``version`` as checked for higher epochs (another appender of the
        same epoch checked it: a fan-out task given the driver's word, or the driver given the
        word of a task that committed ``version`` after checking every version below it)."""
        if version is not None and (self._checked is None or version > self._checked):
            self._checked = version

    def _check_epochs(self, version: int) -> None:
        """With an owner epoch: raise Fenced when a commit after the last version checked, up to
        ``version``, carries a higher one (a reload before a commit would otherwise step over a
        new owner's fence and commit after it)."""
        if self._epoch is None:
            return
        if self._checked is not None and version > self._checked:
            check_fence(self.path, self._checked, self._epoch)
        self._checked = version if self._checked is None else max(self._checked, version)

    def _remember(self, app_id: str, version: int, value: int | None) -> None:
        stamp = file_stamp(log_file(self.path, version)) if self._local else None
        if stamp is None:
            self._transactions.pop(app_id, None)
        else:
            self._transactions[app_id] = (version, stamp, value)
