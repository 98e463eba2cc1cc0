"""Objects outside Delta's own API (leases, markers, log probes, parked rows, statistics) on the
data dir's storage: one interface (``store``), a local-directory implementation (``local_store``)
and an S3 one (``s3_store``); :func:`open_store` picks by location."""

from __future__ import annotations

from collections.abc import Mapping

from sharedsub.core import layout
from sharedsub.storage.objects.local_store import LocalStore
from sharedsub.storage.objects.store import ObjectStore


def open_store(location: str, options: Mapping[str, str] | None = None) -> ObjectStore:
    """The store of data dir ``location``: a local path or ``file://`` URI, or ``s3://BUCKET[/PREFIX]``
    (``options``: the ``[storage] options`` table; the AWS variables are read as well).

    Raises:
        ValueError: any other scheme (named in the message).
        StoreFailure: the S3 settings are unusable (an unknown option).
    """
    local = layout.local_path(location)
    if local is not None:
        return LocalStore(local)
    if location.startswith("s3://"):
        from sharedsub.storage.objects.s3_store import S3Store  # obstore loads only for S3 data dirs

        return S3Store(location, options)
    scheme = location.split("://", 1)[0]
    raise ValueError(f"data dir {location}: {scheme}:// is not supported (a local path, file:// or s3://)")
