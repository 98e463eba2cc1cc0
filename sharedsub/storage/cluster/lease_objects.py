"""Lease objects on the data dir's store (sharedsub.core.ownership.lease has the rules): read,
create, replace, each one request."""

from __future__ import annotations

from sharedsub.core.ownership.lease import LeaseRecord
from sharedsub.storage.objects.store import ObjectNotFound, ObjectStore


def read_lease(store: ObjectStore, key: str) -> tuple[LeaseRecord, str] | None:
    """The lease at ``key`` and its tag, or None when there is none.

    Raises:
        ValueError: the object is not a lease record.
        StoreFailure: the store did not answer.
    """
    try:
        got = store.get(key)
    except ObjectNotFound:
        return None
    return LeaseRecord.from_json(got.data), got.meta.etag


def create_lease(store: ObjectStore, key: str, record: LeaseRecord) -> str:
    """Write the first lease at ``key``; its tag.

    Raises:
        AlreadyExists: someone created it first.
    """
    return store.put_if_absent(key, record.to_json()).etag


def replace_lease(store: ObjectStore, key: str, record: LeaseRecord, etag: str) -> str:
    """Write ``record`` over the lease whose tag is ``etag`` (take over, renew, release); the new tag.

    Raises:
        PreconditionFailed: the lease changed (renewed or taken by another) or is gone.
    """
    return store.put_if_match(key, record.to_json(), etag).etag
