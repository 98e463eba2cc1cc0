"""The object-store interface on a local directory (sharedsub.storage.objects.store has the contract).

How each promise is kept with POSIX calls:

* atomic ``put``: the bytes go to a temporary file beside the target (named
  ``.sharedsub-tmp-*``, never listed), which is fsynced and renamed over the key, then the
  directory is fsynced: a reader sees the old file or the new one, and a crash leaves one of them.
* ``put_if_absent``: the temporary file is hard-linked to the key; ``link(2)`` fails when the
  name exists, so of two racing creators exactly one wins (the Delta fast path relies on the
  same call: sharedsub.storage.delta.blind_append).
* ``put_if_match``: the current file is locked (``flock``) and checked again under the lock
  (still the file at the key, still the tag) before the rename; updaters holding one tag are
  serialised on the file they both saw, and the second finds another tag.
* entity tags: the MD5 of the content (what S3 gives a plain PUT), for files up to
  :data:`HASHED_UP_TO`; larger ones get a tag from inode, size and modification time (no
  conditional write is made on those: leases and markers are small). As on S3, a write of the
  same bytes keeps the tag: what is written under a condition carries what changed (an epoch, a
  renewal time).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
import uuid
from collections.abc import Iterator

from sharedsub.storage.durable_files import makedirs_synced
from sharedsub.storage.objects.store import AlreadyExists, ObjectMeta, ObjectNotFound, PreconditionFailed, StoredObject

HASHED_UP_TO = 4 << 20  # bytes: files up to this size are tagged by their MD5
_TEMP = ".sharedsub-tmp-"


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalStore:
    """:class:`~sharedsub.storage.objects.store.ObjectStore` on the directory ``root``."""

    def __init__(self, root: str) -> None:
        self._root = root

    @property
    def root(self) -> str:
        """ObjectStore.root: the location as given."""
        return self._root

    def path(self, key: str) -> str:
        """The file of ``key`` (for the local fast paths that need one)."""
        if key.startswith("/") or ".." in key.split("/"):
            raise ValueError(f"not a key under the store's root: {key!r}")
        return os.path.join(self._root, key)

    # ------------------------------------------------------------------ reads

    def get(self, key: str) -> StoredObject:
        """ObjectStore.get: The whole object and its meta. Raises ObjectNotFound."""
        path = self.path(key)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
                st = os.fstat(fh.fileno())
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ObjectNotFound(key) from None
        return StoredObject(data, self._meta(key, path, st, data))

    def head(self, key: str) -> ObjectMeta:
        """ObjectStore.head: Its size, tag and time, without the body. Raises ObjectNotFound."""
        path = self.path(key)
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            raise ObjectNotFound(key) from None
        if not stat.S_ISREG(st.st_mode):
            raise ObjectNotFound(key)
        return self._meta(key, path, st)

    def list(self, prefix: str, *, after: str | None = None) -> Iterator[ObjectMeta]:
        """ObjectStore.list: Every object whose key starts with ``prefix``, in key order (nothing when
        none); with ``after``, only keys greater than it."""
        # The deepest directory every matching key is under, then a walk of it.
        base = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        top = self.path(base) if base else self._root
        found: list[tuple[str, str]] = []
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            rel = os.path.relpath(dirpath, self._root)
            rel = "" if rel == "." else rel.replace(os.sep, "/") + "/"
            for name in filenames:
                key = rel + name
                if key.startswith(prefix) and not name.startswith(_TEMP) and (after is None or key > after):
                    found.append((key, os.path.join(dirpath, name)))
        for key, path in sorted(found):
            try:
                yield self._meta(key, path, os.stat(path))
            except FileNotFoundError:
                continue  # deleted since the walk saw it

    # ------------------------------------------------------------------ writes

    def put(self, key: str, data: bytes) -> ObjectMeta:
        """ObjectStore.put: Create or replace ``key`` atomically and durably; the new object's meta."""
        path = self.path(key)
        temp = self._write_temp(path, data)
        os.rename(temp, path)
        _fsync_dir(os.path.dirname(path))
        return self._meta(key, path, os.stat(path), data)

    def put_if_absent(self, key: str, data: bytes) -> ObjectMeta:
        """ObjectStore.put_if_absent: ``put`` only when nothing has ``key``. Raises AlreadyExists (nothing written)."""
        path = self.path(key)
        temp = self._write_temp(path, data)
        try:
            os.link(temp, path)
        except FileExistsError:
            raise AlreadyExists(key) from None
        finally:
            os.unlink(temp)
        _fsync_dir(os.path.dirname(path))
        return self._meta(key, path, os.stat(path), data)

    def put_if_match(self, key: str, data: bytes, etag: str) -> ObjectMeta:
        """ObjectStore.put_if_match: ``put`` only when ``key``'s tag is ``etag``. Raises PreconditionFailed (changed or gone)."""
        path = self.path(key)
        while True:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                raise PreconditionFailed(key, "gone") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                held = os.fstat(fd)
                try:
                    now = os.stat(path)
                except FileNotFoundError:
                    raise PreconditionFailed(key, "gone") from None
                if (held.st_dev, held.st_ino) != (now.st_dev, now.st_ino):
                    continue  # replaced between the open and the lock: look at the new file
                if self._meta(key, path, now).etag != etag:
                    raise PreconditionFailed(key, "changed since the tag was read")
                temp = self._write_temp(path, data)
                os.rename(temp, path)
                _fsync_dir(os.path.dirname(path))
                return self._meta(key, path, os.stat(path), data)
            finally:
                os.close(fd)  # (releases the lock)

    def delete(self, key: str) -> None:
        """ObjectStore.delete: Remove ``key`` (no error when it is not there), and the directories
        it leaves empty up to the root (a key is no directory: none is left behind)."""
        path = self.path(key)
        try:
            os.unlink(path)
        except FileNotFoundError:
            return
        except IsADirectoryError:
            raise ObjectNotFound(key) from None
        directory = os.path.dirname(path)
        root = os.path.normpath(self._root)
        while os.path.normpath(directory) != root and directory.startswith(root):
            try:
                os.rmdir(directory)
            except OSError:  # not empty (or gone): stop there
                break
            directory = os.path.dirname(directory)

    # ------------------------------------------------------------------ helpers

    def _write_temp(self, path: str, data: bytes) -> str:
        directory = os.path.dirname(path)
        makedirs_synced(directory)  # a new key's directories survive a power loss too
        temp = os.path.join(directory, f"{_TEMP}{uuid.uuid4().hex}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError:
            os.close(fd)
            os.unlink(temp)
            raise
        os.close(fd)
        return temp

    def _meta(self, key: str, path: str, st: os.stat_result, data: bytes | None = None) -> ObjectMeta:
        if st.st_size <= HASHED_UP_TO:
            if data is None:
                try:
                    with open(path, "rb") as fh:
                        data = fh.read()
                except FileNotFoundError:
                    raise ObjectNotFound(key) from None
            tag = hashlib.md5(data, usedforsecurity=False).hexdigest()
        else:
            tag = f"{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}"
        return ObjectMeta(key, st.st_size, f'"{tag}"', st.st_mtime_ns // 1_000_000)

