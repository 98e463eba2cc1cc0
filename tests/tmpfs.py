"""A small tmpfs to put a data dir on, for tests of a full or read-only data dir: real mounts, no
mocks. Mounting needs root (CAP_SYS_ADMIN); CI runs the tests as root. Unprivileged, run pytest
inside a private user and mount namespace, where you are root of your own mounts:
``unshare -rm .venv/bin/python -m pytest tests/e2e/test_disk_full.py``. When neither works the
test fails saying so (it never skips: a skipped test would hide that the behaviour went unchecked).
"""

from __future__ import annotations

import errno
import os
import subprocess
import time
from pathlib import Path

import pytest

HOW_TO_RUN = (
    "mounting a tmpfs needs root (CAP_SYS_ADMIN); run these tests as root, or unprivileged inside "
    "a private user and mount namespace: unshare -rm .venv/bin/python -m pytest <tests>"
)


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)


class Tmpfs:
    """A tmpfs of ``size`` mounted at ``path`` for the life of the ``with`` block (unmounted in a
    ``finally``, lazily when something still holds it open)."""

    def __init__(self, path: Path, size: str = "64m") -> None:
        self.path = path
        self.size = size
        self.filler = path / "filler"
        self._mounted = False

    def __enter__(self) -> Tmpfs:
        self.path.mkdir(parents=True, exist_ok=True)
        mounted = _run("mount", "-t", "tmpfs", "-o", f"size={self.size}", "tmpfs", str(self.path))
        if mounted.returncode != 0:
            why = mounted.stderr.strip() or f"mount exited with {mounted.returncode}"
            pytest.fail(f"cannot mount a tmpfs at {self.path}: {why}; {HOW_TO_RUN}")
        self._mounted = True
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._mounted:
            return
        self.read_write()
        if _run("umount", str(self.path)).returncode != 0:
            _run("umount", "-l", str(self.path))  # a process of the test still holds a file
        self._mounted = False

    def free_bytes(self) -> int:
        """Bytes free on the tmpfs."""
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def fill(self, leave: int = 0) -> None:
        """Take all free space but ``leave`` bytes (rounded to pages) with :attr:`filler`; with
        ``leave`` 0 the file system is full: not even one more page can be written."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for _ in range(100):
                take = self.free_bytes() - leave
                if take <= 0:
                    break
                try:
                    os.posix_fallocate(fd, os.fstat(fd).st_size, take)  # all or nothing on tmpfs
                    break
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    # A running service took some of that space meanwhile: measure again.
            if leave == 0:
                # Whatever appeared free meanwhile (a file deleted) goes too, page by page.
                try:
                    while True:
                        os.write(fd, b"\0" * 4096)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
        finally:
            os.close(fd)

    def release(self) -> None:
        """Give the space :meth:`fill` took back."""
        self.filler.unlink(missing_ok=True)

    def read_only(self, attempts: int = 200) -> None:
        """Remount read-only. The kernel refuses while a file on it is open for writing (a commit
        being written): tried again until it is not; fails the test if it never is."""
        for _ in range(attempts):
            done = _run("mount", "-o", "remount,ro", str(self.path))
            if done.returncode == 0:
                return
            time.sleep(0.05)
        pytest.fail(f"cannot remount {self.path} read-only: {done.stderr.strip()}")

    def read_write(self) -> None:
        """Remount read-write."""
        done = _run("mount", "-o", "remount,rw", str(self.path))
        if done.returncode != 0:
            pytest.fail(f"cannot remount {self.path} read-write: {done.stderr.strip()}")
