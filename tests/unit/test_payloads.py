"""PayloadCache: its bound holds for what the entries really take in memory (tracemalloc)."""

from __future__ import annotations

import gc
import os
import tracemalloc

from sharedsub.runtime.payloads import PayloadCache, entry_cost

BOUND = 4 * 1024 * 1024


def _traced_growth(size: int, count: int) -> tuple[int, PayloadCache]:
    """Memory tracemalloc sees a cache take after ``count`` messages of ``size`` bytes went
    through it (each payload is made while tracing; evicted ones are freed)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache = PayloadCache(BOUND)
        for start in range(0, count, 100):
            cache.put_many("orders", [(10**6 + i, os.urandom(size)) for i in range(start, min(start + 100, count))])
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return after - before, cache


def test_small_messages_stay_within_the_bound() -> None:
    # 1 KB messages, three times what fits: entries cost ~20% more than their payloads, which a
    # bound on payload bytes alone let through.
    grown, cache = _traced_growth(1024, 3 * BOUND // 1024)
    assert cache.size_bytes <= BOUND
    assert grown <= BOUND + 64 * 1024  # the dict's table itself
    assert len(cache) * entry_cost(b"x" * 1024) <= BOUND


def test_the_bound_is_used_not_wasted() -> None:
    grown, cache = _traced_growth(1024, 3 * BOUND // 1024)
    assert grown >= 0.9 * BOUND
    assert cache.size_bytes >= BOUND - entry_cost(b"x" * 1024)


def test_oldest_go_first_and_a_replaced_seq_is_counted_once() -> None:
    cache = PayloadCache(3 * entry_cost(b"x" * 10))
    cache.put_many("t", [(1, b"a" * 10), (2, b"b" * 10), (3, b"c" * 10)])
    cache.put_many("t", [(3, b"C" * 10)])
    assert cache.size_bytes == 3 * entry_cost(b"x" * 10)
    cache.put_many("t", [(4, b"d" * 10)])
    assert cache.get("t", 1) is None
    assert cache.get("t", 3) == b"C" * 10
    assert cache.get("t", 4) == b"d" * 10


def test_forget_topic_releases_its_entries() -> None:
    cache = PayloadCache(BOUND)
    cache.put_many("a", [(1, b"x" * 100)])
    cache.put_many("b", [(1, b"y" * 100)])
    cache.forget_topic("a")
    assert cache.get("a", 1) is None
    assert cache.size_bytes == entry_cost(b"y" * 100)
