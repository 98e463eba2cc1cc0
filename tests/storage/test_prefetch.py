"""Concurrent reads of many objects (sharedsub.storage.objects.prefetch) on a real S3 server
(versitygw) 20 ms away (the delay proxy): a block's reads are answered from memory, fetched
together before it; a missing object still raises at its own read; outside the block reads ask
the store again. (How long it takes is bench/'s: bench/run.py --store-delay-ms.)"""

from __future__ import annotations

import pytest

from sharedsub.storage.objects import prefetch
from sharedsub.storage.objects.locations import locate
from sharedsub.storage.objects.request_counts import REQUESTS
from sharedsub.storage.objects.store import ObjectNotFound
from tests.s3_server import S3Server


def _gets() -> int:
    return sum(n for (kind, _), n in REQUESTS.snapshot().items() if kind == "get")


def test_reads_inside_a_prefetch_come_from_memory_and_a_missing_one_raises_at_its_read(
    s3_server: S3Server, slow_s3_env: dict[str, str]
) -> None:
    root = s3_server.url("prefetch")
    locations = [f"{root}/objects/{i:02d}" for i in range(12)]
    for i, location in enumerate(locations):
        store, key = locate(location)
        store.put(key, b"body %d" % i)
    missing = f"{root}/objects/none"
    before = _gets()
    with prefetch.prefetched([*locations, missing]):
        fetched = _gets()
        bodies = [prefetch.get(location).data for location in locations]
        with pytest.raises(ObjectNotFound):
            prefetch.get(missing)  # the store's answer, kept
        assert _gets() == fetched  # all from memory
    assert bodies == [b"body %d" % i for i in range(12)]
    assert fetched - before == 13  # one GET each, made together
    prefetch.get(locations[0])
    assert _gets() == fetched + 1  # held only inside the block


def test_what_a_head_tells_comes_from_a_prefetched_get_once(s3_server: S3Server, slow_s3_env: dict[str, str]) -> None:
    root = s3_server.url("prefetch")
    there, absent = f"{root}/a", f"{root}/b"
    store, key = locate(there)
    written = store.put(key, b"x")
    heads = sum(n for (kind, _), n in REQUESTS.snapshot().items() if kind == "head")
    with prefetch.prefetched([there, absent]):
        found = prefetch.meta(there)
        assert found is not None and found.etag == written.etag and found.size == 1
        assert prefetch.meta(absent) is None
        assert sum(n for (kind, _), n in REQUESTS.snapshot().items() if kind == "head") == heads
        assert prefetch.meta(there) is not None  # a second look asks the store (a HEAD)
    assert sum(n for (kind, _), n in REQUESTS.snapshot().items() if kind == "head") == heads + 1
