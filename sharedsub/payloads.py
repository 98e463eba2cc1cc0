"""A bounded, thread-safe cache of encoded messages the front end just committed.

Delivery looks here first so that recent messages are served without reading the topic table
back; misses fall back to the topic table (storage.delta.read_messages).
"""

from __future__ import annotations

import collections
import threading


class PayloadCache:
    """FIFO cache of ``(topic, seq) -> bytes`` bounded by total bytes."""

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._bytes = 0
        self._data: collections.OrderedDict[tuple[str, int], bytes] = collections.OrderedDict()
        self._lock = threading.Lock()

    def put_many(self, topic: str, items: list[tuple[int, bytes]]) -> None:
        """Add committed messages, evicting the oldest beyond the byte bound."""
        with self._lock:
            for seq, data in items:
                self._data[(topic, seq)] = data
                self._bytes += len(data)
            while self._bytes > self._max and self._data:
                _, old = self._data.popitem(last=False)
                self._bytes -= len(old)

    def get(self, topic: str, seq: int) -> bytes | None:
        """The cached message, or None."""
        with self._lock:
            return self._data.get((topic, seq))

    def forget_topic(self, topic: str) -> None:
        """Drop every cached message of ``topic`` (the topic was dropped)."""
        with self._lock:
            for key in [k for k in self._data if k[0] == topic]:
                self._bytes -= len(self._data.pop(key))
