"""A bounded, thread-safe cache of encoded messages the front end just committed.

Delivery looks here first so that recent messages are served without reading the topic table
back; misses fall back to the topic table (storage.payload_index.read_messages).

The bound counts what an entry costs in memory, not only its payload: the ``bytes`` object
with its header (``sys.getsizeof``) plus :data:`ENTRY_OVERHEAD` for the ``(topic, seq)`` key
tuple, its int and the ordered dict's slot and link. Counting payload bytes alone let a cache
of 1 KB messages take about 20% more than its bound.
"""

from __future__ import annotations

import collections
import sys
import threading

# Key tuple (56) + seq int (32) + the ordered dict's share: its slot, order link and index,
# plus the slots FIFO eviction leaves unused until the dict is resized (measured on CPython 3.11
# with tracemalloc: 160-200 bytes for a filling cache, about 245 for one evicting at its bound).
# tests/unit/test_payloads.py checks the bound holds.
ENTRY_OVERHEAD = 256


def entry_cost(data: bytes) -> int:
    """Bytes one cached entry holding ``data`` takes, as the bound counts them."""
    return sys.getsizeof(data) + ENTRY_OVERHEAD


class PayloadCache:
    """FIFO cache of ``(topic, seq) -> bytes`` bounded by the memory its entries take."""

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._bytes = 0
        self._data: collections.OrderedDict[tuple[str, int], bytes] = collections.OrderedDict()
        self._lock = threading.Lock()

    @property
    def size_bytes(self) -> int:
        """What the cached entries cost now (:func:`entry_cost` summed), at most the bound."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._data)

    def put_many(self, topic: str, items: list[tuple[int, bytes]]) -> None:
        """Add committed messages, evicting the oldest beyond the bound."""
        with self._lock:
            for seq, data in items:
                old = self._data.pop((topic, seq), None)
                if old is not None:
                    self._bytes -= entry_cost(old)
                self._data[(topic, seq)] = data
                self._bytes += entry_cost(data)
            while self._bytes > self._max and self._data:
                _, old = self._data.popitem(last=False)
                self._bytes -= entry_cost(old)

    def get(self, topic: str, seq: int) -> bytes | None:
        """The cached message, or None."""
        with self._lock:
            return self._data.get((topic, seq))

    def forget_topic(self, topic: str) -> None:
        """Drop every cached message of ``topic`` (the topic was dropped)."""
        with self._lock:
            for key in [k for k in self._data if k[0] == topic]:
                self._bytes -= entry_cost(self._data.pop(key))
