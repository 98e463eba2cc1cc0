"""Files and directories forced to disk: what makes a write survive a crash or power loss.

A rename or a new file is durable only once its directory is fsynced too; these are the two steps
every durable local write here takes (Delta commits: sharedsub.storage.delta.appender.sync_commit;
the fan-out's parked rows: sharedsub.storage.parked_rows).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os


def fsync_path(path: str, *, directory: bool = False) -> None:
    """Force the file (or, with ``directory``, the directory) at ``path`` to disk.

    Raises:
        OSError: it cannot be opened or synced (ENOSPC, EIO, ...).
    """
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def makedirs_synced(path: str) -> None:
    """``os.makedirs(path)``, with the parent of every directory it creates fsynced."""
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory)
        fsync_path(os.path.dirname(directory), directory=True)


def sync_filesystem(path: str) -> None:
    """Force everything written to the file system that holds ``path`` to disk, in one call
    (``syncfs(2)``; ``sync(2)`` where there is none): what makes many commits written without
    their own fsyncs durable together, for the cost of about one (issue 41: an fsync per ack
    log commit cost ~5 ms each, a thousand subscriptions' logs five seconds a group).

    Raises:
        OSError: ``path`` cannot be opened, or the file system reported a write error.
    """
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        syncfs = getattr(_libc(), "syncfs", None)
        if syncfs is None:
            os.sync()
            return
        if syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), path)
    finally:
        os.close(fd)


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)
