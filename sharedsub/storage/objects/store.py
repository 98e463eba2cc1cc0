"""The object-store interface: every byte the service reads or writes outside Delta's own API.

An :class:`ObjectStore` is bound to one root (a data dir: a local directory or an ``s3://``
bucket and prefix); keys are ``/``-separated paths under it (``_cluster/owner``,
``topics/orders/_delta_log/00000000000000000007.json``). Its seven operations are the ones
object storage offers (GET, HEAD, LIST, PUT, PUT with ``If-None-Match: *``, PUT with
``If-Match``, DELETE), so the local implementation promises nothing an S3 bucket cannot keep:

=====================  ============================================================================
operation              contract
=====================  ============================================================================
``get(key)``           the whole object and its meta (one request: the tag is the body's);
                       :class:`ObjectNotFound` when there is none
``head(key)``          its :class:`ObjectMeta` (size, entity tag, time), no body; ObjectNotFound
``list(prefix)``       every object whose key starts with ``prefix`` (a directory prefix ends in
                       ``/``), in key order; nothing (not an error) when there is none; with
                       ``after=key`` only the keys after that one (one request still)
``put(key, data)``     create or replace, atomically: a reader sees the old object or the new
                       one, never a part; durable when it returns (the store acknowledged it;
                       a local file and its directory are fsynced). Returns the new ObjectMeta
``put_if_absent``      as ``put`` when no object has ``key``; :class:`AlreadyExists` otherwise,
                       and nothing is written. Of two racing creators exactly one succeeds
``put_if_match``       as ``put`` when the object's entity tag is ``etag``; PreconditionFailed
                       (changed, or gone) otherwise. Of two racing updaters with one tag at
                       most one succeeds
``delete(key)``        remove it; deleting what is not there is no error (S3 answers 204 too)
=====================  ============================================================================

Entity tags are opaque strings that change with every write of a key (a local file's tag
changes with its inode, size and mtime; S3's is the content hash or another server-chosen tag).

Errors: :class:`ObjectNotFound` (a ``FileNotFoundError``, so code that handled a missing file
keeps working), :class:`PreconditionFailed` and its :class:`AlreadyExists`, and
:class:`StoreFailure` for everything else (unreachable, refused credentials, missing bucket):
the implementation says which in its message, naming the setting to check.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Protocol


@dataclasses.dataclass(frozen=True, slots=True)
class ObjectMeta:
    """What HEAD and LIST tell of an object."""

    key: str  # relative to the store's root
    size: int
    etag: str  # opaque; changes with every write
    modified_ms: int  # last write, ms since the epoch (the store's clock)


@dataclasses.dataclass(frozen=True, slots=True)
class StoredObject:
    """What GET gives: the body and the meta of that very body."""

    data: bytes
    meta: ObjectMeta


class ObjectNotFound(FileNotFoundError):
    """No object has the key."""

    def __init__(self, key: str) -> None:
        super().__init__(f"no object {key!r}")
        self.key = key


class PreconditionFailed(Exception):
    """A conditional put found the key in another state than the condition named."""

    def __init__(self, key: str, detail: str) -> None:
        super().__init__(f"{key!r}: {detail}")
        self.key = key


class AlreadyExists(PreconditionFailed):
    """``put_if_absent`` found an object under the key."""

    def __init__(self, key: str) -> None:
        super().__init__(key, "already exists")


class StoreFailure(OSError):
    """The store could not answer: unreachable, refused the credentials, has no such bucket, or
    failed. ``transient`` is True for what may pass by itself (timeouts, 5xx, a connection
    refused) and False for what needs an operator (credentials, a missing bucket). A transient one
    carries the errno that names it (sharedsub.core.publish.write_faults.STORE_ERRNOS), so the
    committer holds writes through it as through a full disk."""

    def __init__(self, message: str, *, transient: bool, code: int | None = None) -> None:
        super().__init__(message)
        self.transient = transient
        self.errno = code


class ObjectStore(Protocol):
    """The seven operations of the module docstring, on keys relative to :attr:`root`."""

    @property
    def root(self) -> str:
        """The location the keys are under, as the user named it (never with credentials)."""
        ...

    def get(self, key: str) -> StoredObject:
        """The whole object and its meta. Raises ObjectNotFound."""
        ...

    def head(self, key: str) -> ObjectMeta:
        """Its size, tag and time, without the body. Raises ObjectNotFound."""
        ...

    def list(self, prefix: str, *, after: str | None = None) -> Iterator[ObjectMeta]:
        """Every object whose key starts with ``prefix``, in key order (nothing when none); with
        ``after``, only keys greater than it (S3's ``start-after``: still one request)."""
        ...

    def put(self, key: str, data: bytes) -> ObjectMeta:
        """Create or replace ``key`` atomically and durably; the new object's meta."""
        ...

    def put_if_absent(self, key: str, data: bytes) -> ObjectMeta:
        """``put`` only when nothing has ``key``. Raises AlreadyExists (nothing written)."""
        ...

    def put_if_match(self, key: str, data: bytes, etag: str) -> ObjectMeta:
        """``put`` only when ``key``'s tag is ``etag``. Raises PreconditionFailed (changed or gone)."""
        ...

    def delete(self, key: str) -> None:
        """Remove ``key`` (no error when it is not there)."""
        ...
