"""The files of a synced blind append's next commit, made ahead of it, between commits.

Why: a synchronous publisher (a JMS ``send()`` of a persistent message) waits for one commit per
message, and on a local file system two file creations and a directory fsync were ~0.9 ms of
the ~2.4 ms such a commit took in the append child (bench/RESULTS.md, issue 43, "files made
ahead"). The append child makes them right after it answered a commit, while the publisher's
next message is on its way: the data file (empty, under a new name, its directory fsynced, so
its name is already durable) and the commit's temporary file beside the log. The commit then
only writes into both, forces their contents to disk together and links the commit file to its
version (sharedsub.storage.delta.blind_append.FastPathAppender).

What keeps a made-ahead file safe:

* it is used only while fresh (:data:`FRESH_FOR`) and still there: vacuum deletes data files no
  version names once they are older than the history retention (hours), so a file kept longer
  than that could be deleted under its writer (with a retention of 0 vacuum may delete any file
  a commit is about to name, made ahead or not);
* until it is written, a data file is empty and no version names it: readers go by the log and
  never see it; retention, which reads every data file under a subscription table for what it
  holds, skips empty ones (sharedsub.storage.retention.lowest_retained_seqs);
* one a writer leaves behind (it was killed, or the file went stale) is an unnamed data file,
  which vacuum deletes as it deletes a failed write's file; a temporary file left beside the log
  is deleted by the next writer of the table once older than :data:`STALE_TEMP_AFTER`
  (:func:`sweep_stale_temps`), which no writer keeps a fresh one for.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import logging
import os
import time
import uuid
from dataclasses import dataclass

from sharedsub.storage.delta.data_files import new_file_name
from sharedsub.storage.durable_files import fsync_path

log = logging.getLogger(__name__)

# Seconds a made-ahead commit may wait for its commit (a synchronous publisher sends its next
# message within milliseconds; one that paused longer has its commit made the usual way).
FRESH_FOR = 30.0
# Seconds after which a temporary commit file beside a log is taken as left behind.
STALE_TEMP_AFTER = 600.0
TEMP_PREFIX = "_commit_"
TEMP_SUFFIX = ".json.tmp"
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
_WRITE = os.O_WRONLY | os.O_CLOEXEC


def temp_name() -> str:
    """A name for a commit's temporary file beside the log (no reader takes it for a log entry)."""
    return f"{TEMP_PREFIX}{uuid.uuid4()}{TEMP_SUFFIX}"


@dataclass(frozen=True)
class PreparedCommit:
    """An empty data file in the table's directory (its name durable) and an empty temporary
    commit file beside the log, made for one commit. Neither is held open between commits (an
    open file would keep the file system from being remounted read-only, as an operator may)."""

    data_name: str
    data_path: str
    temp_path: str
    made: float  # time.monotonic() when made

    def fresh(self, now: float) -> bool:
        """Whether it may still be used (:data:`FRESH_FOR`)."""
        return now - self.made <= FRESH_FOR

    def open(self) -> OpenCommit | None:
        """Both files opened for writing; None when either is gone (both are removed then)."""
        try:
            data_fd = os.open(self.data_path, _WRITE)
        except FileNotFoundError:
            self.discard()
            return None
        try:
            temp_fd = os.open(self.temp_path, _WRITE)
        except FileNotFoundError:
            os.close(data_fd)
            self.discard()
            return None
        except BaseException:
            os.close(data_fd)
            raise
        return OpenCommit(self.data_name, data_fd, self.temp_path, temp_fd)

    def discard(self) -> None:
        """Remove both files (not used: no version names either)."""
        for path in (self.data_path, self.temp_path):
            with contextlib.suppress(OSError):
                os.unlink(path)


@dataclass
class OpenCommit:
    """A :class:`PreparedCommit`'s files, open for one commit's writes until :meth:`close`."""

    data_name: str
    data_fd: int
    temp_path: str
    temp_fd: int

    def close(self) -> None:
        """Close both descriptors (again: nothing)."""
        for fd in (self.data_fd, self.temp_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.data_fd = self.temp_fd = -1


def prepare_commit(table_dir: str, log_dir: str) -> PreparedCommit:
    """Make the next commit's two files in ``table_dir`` and ``log_dir`` and fsync ``table_dir``.

    Raises:
        OSError: a file could not be made or the directory not synced (nothing is left).
    """
    name = new_file_name()
    prepared = PreparedCommit(name, os.path.join(table_dir, name), os.path.join(log_dir, temp_name()), time.monotonic())
    try:
        for path in (prepared.data_path, prepared.temp_path):
            os.close(os.open(path, _CREATE, 0o666))
        fsync_path(table_dir, directory=True)
    except OSError:
        prepared.discard()
        raise
    return prepared


def fsync_together(first: int, second: int) -> None:
    """Force both descriptors' files to disk, the two fsyncs at once (a journaling file system
    commits both in about the time of one: bench/RESULTS.md, issue 43, "files made ahead").

    Raises:
        OSError: either fsync failed (after both ended).
    """
    pending = _syncer().submit(os.fsync, first)
    try:
        os.fsync(second)
    finally:
        pending.result()


@functools.cache
def _syncer() -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="sharedsub-fsync")


def sweep_stale_temps(log_dir: str, *, now: float | None = None) -> int:
    """Remove temporary commit files in ``log_dir`` last changed over :data:`STALE_TEMP_AFTER`
    seconds ago (left by a writer that died or went away); return how many. Errors are logged,
    not raised (the sweep is housekeeping)."""
    now = time.time() if now is None else now
    removed = 0
    try:
        with os.scandir(log_dir) as entries:
            for entry in entries:
                if not (entry.name.startswith(TEMP_PREFIX) and entry.name.endswith(TEMP_SUFFIX)):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    if now - entry.stat().st_mtime > STALE_TEMP_AFTER:
                        os.unlink(entry.path)
                        removed += 1
    except OSError as exc:
        log.warning("could not sweep temporary commit files in %s: %s", log_dir, exc)
    return removed
