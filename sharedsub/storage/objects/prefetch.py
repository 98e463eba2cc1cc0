"""Reading many objects of a store at once: :func:`prefetched` GETs them concurrently, and the
reads made inside the block (:func:`get`) take their bodies from memory.

Why: a reader that needs N small objects one after another (the log entries of a topic's new
commits, the data files they add, in the fan-out's batch) pays N round trips in a row; on a store
that answers in 20 ms that was seconds a batch (bench/RESULTS.md, issue 42), on loopback nothing.
Fetched together, they cost about one round trip. The readers keep their shape: they ask for
one object at a time, through :func:`get`, and the order, errors and contents they see are those
of the one-at-a-time reads (a missing object raises ObjectNotFound at its own read, not at the
prefetch). :func:`meta` answers what a HEAD would from a prefetched GET (a GET of a small object
costs what a HEAD does: one request, billed alike).

Local locations are not prefetched (a file read is no round trip). Answers are held only inside
the block, and each is handed out once (a second read of the same location asks the store: a
reader that checks again, e.g. whether a table was replaced while it was probed, sees the store).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from sharedsub.core.layout import local_path
from sharedsub.storage.objects.locations import locate
from sharedsub.storage.objects.store import ObjectMeta, ObjectNotFound, StoredObject

CONCURRENT_GETS = 16
"""Requests in flight at once per prefetch (obstore's client releases the GIL while it waits)."""

_held: dict[str, StoredObject | None] = {}  # None: the store said there is none
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool  # one pool per process, made at the first remote prefetch
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=CONCURRENT_GETS, thread_name_prefix="sharedsub-prefetch")
        return _pool


def _fetch(location: str) -> tuple[str, StoredObject | None]:
    store, key = locate(location)
    try:
        return location, store.get(key)
    except ObjectNotFound:
        return location, None  # its own read raises, as it would have


@contextmanager
def prefetched(locations: Iterable[str]) -> Iterator[None]:
    """GET the remote ``locations`` concurrently; inside the block :func:`get` answers them from
    memory. A failure of the store (StoreFailure) raises here, as the first read would have."""
    wanted = sorted({loc for loc in locations if local_path(loc) is None})
    with _lock:
        wanted = [loc for loc in wanted if loc not in _held]  # a prefetch around this one has them
    mine: list[str] = []
    if len(wanted) > 1:
        for location, got in _executor().map(_fetch, wanted):
            mine.append(location)
            with _lock:
                _held[location] = got
    try:
        yield
    finally:
        with _lock:
            for location in mine:
                _held.pop(location, None)


def get(location: str) -> StoredObject:
    """The object at remote ``location``: prefetched, or one GET now.

    Raises:
        ObjectNotFound: there is none.
    """
    with _lock:
        known = location in _held
        held = _held.pop(location, None)
    if known:
        if held is None:
            raise ObjectNotFound(locate(location)[1])
        return held
    store, key = locate(location)
    return store.get(key)


def meta(location: str) -> ObjectMeta | None:
    """What a HEAD of remote ``location`` tells (None: there is none): from a prefetched GET,
    or one HEAD now."""
    with _lock:
        known = location in _held
        held = _held.pop(location, None)
    if known:
        return held.meta if held is not None else None
    store, key = locate(location)
    try:
        return store.head(key)
    except ObjectNotFound:
        return None
