"""Whether a local data dir takes writes, and its free space (for the committer's fault handling
and the start of ``serve``; sharedsub.core.publish.write_faults has the rules)."""

from __future__ import annotations

import os

from sharedsub.core.layout import local_path

PROBE_BYTES = 4096  # one page: a full file system has not even that


def free_bytes(root: str) -> int | None:
    """Bytes an unprivileged writer may still use under ``root`` (None: not local, or unknown)."""
    path = local_path(root)
    if path is None:
        return None
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def probe_write(root: str) -> None:
    """Write, fsync and remove a small file in ``root`` (nothing for non-local storage).

    Raises:
        OSError: the data dir does not take writes (ENOSPC, EDQUOT, EROFS, permissions, ...).
    """
    path = local_path(root)
    if path is None:
        return
    probe = os.path.join(path, f".sharedsub-write-probe-{os.getpid()}")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"\0" * PROBE_BYTES)
            os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        try:
            os.unlink(probe)
        except OSError:  # never created (read-only file system, no space for the entry)
            pass
