"""Where the records of sharedsub.storage.cluster are in a store: a key relative to the data dir
under the data dir's own key (``base``, from sharedsub.storage.objects.locations.locate; empty
for a store rooted at the data dir), and the names directly under a prefix."""

from __future__ import annotations

from sharedsub.storage.objects.store import ObjectStore


def under(base: str, rel: str) -> str:
    """The store key of ``rel`` (relative to the data dir) when the data dir's key is ``base``."""
    return f"{base.rstrip('/')}/{rel}" if base else rel


def children(store: ObjectStore, prefix: str) -> list[str]:
    """The last path segment of every object directly under ``prefix``."""
    names = (meta.key[len(prefix) + 1 :] for meta in store.list(prefix + "/"))
    return sorted({name for name in names if "/" not in name})
