"""Requests this process made to object storage, by kind and table family, for ``/metrics``.

Counted where sharedsub itself asks (sharedsub.storage.objects.s3_store): probes for new log
entries, log-entry and data-file reads, the owner lease, parked rows, the users file. delta-rs
makes its own requests for commits and table loads, which are not seen here.
"""

from __future__ import annotations

import collections
import threading

from sharedsub.core import layout

# Path segments that name a family, first match from the left (keys are bucket-relative).
_FAMILIES = {
    "topics": "topics",
    "subscriptions": "subscriptions",
    "catalog": "catalog",
    layout.CLUSTER_DIR: "cluster",
    "_fanout": "fanout",
    layout.CHANGES_DIR: "changes",
    "_users.json": "users",
}


def family(key: str) -> str:
    """The table family a key belongs to (``other`` when none)."""
    for part in key.split("/"):
        found = _FAMILIES.get(part)
        if found is not None:
            return found
    return "other"


class RequestCounts:
    """Thread-safe counts of requests by ``(kind, family)``; kind is get, head, list, put,
    put_if_absent, put_if_match or delete."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: collections.Counter[tuple[str, str]] = collections.Counter()

    def add(self, kind: str, key: str) -> None:
        """One request of ``kind`` for ``key``."""
        with self._lock:
            self._counts[(kind, family(key))] += 1

    def snapshot(self) -> dict[tuple[str, str], int]:
        """The counts so far."""
        with self._lock:
            return dict(self._counts)


REQUESTS = RequestCounts()
"""This process's counts (every S3Store adds to them)."""
