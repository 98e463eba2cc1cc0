"""The start-up check of a data dir on object storage: reachable, the credentials taken, the
bucket there, and conditional writes honoured (what Delta commits and the owner lease rely on:
a store that ignores ``If-None-Match`` would let two writers take one log version)."""

from __future__ import annotations

import uuid

from sharedsub.core.errors import StoreUnusable
from sharedsub.core.layout import STORE_PROBE_PREFIX
from sharedsub.storage.objects.store import AlreadyExists, ObjectStore, PreconditionFailed, StoreFailure


def probe_store(store: ObjectStore, prefix: str = "", *, data_dir: str | None = None) -> None:
    """Write, conditionally write and delete one small object under ``<prefix>/_cluster/probe/``.

    Raises:
        StoreUnusable: one line saying what is wrong (``data_dir``, else the store, named) and
            which setting to check.
    """
    where = data_dir or store.root
    name = f"{STORE_PROBE_PREFIX}{uuid.uuid4().hex}"
    key = f"{prefix.rstrip('/')}/{name}" if prefix else name
    try:
        first = store.put_if_absent(key, b"probe 1")
        try:
            store.put_if_absent(key, b"probe 2")
        except AlreadyExists:
            pass
        else:
            raise StoreUnusable(
                where,
                "the object store ignores If-None-Match (a second create of one key succeeded): Delta commits "
                "and the owner lease need conditional writes; use a store that supports them",
            )
        try:
            store.put_if_match(key, b"probe 3", '"0000"' if first.etag != '"0000"' else '"0001"')
        except PreconditionFailed:
            pass
        else:
            raise StoreUnusable(
                where,
                "the object store ignores If-Match (an update with a wrong tag succeeded): the owner lease "
                "needs conditional writes; use a store that supports them",
            )
        store.delete(key)
    except StoreFailure as exc:
        raise StoreUnusable(where, str(exc)) from None
