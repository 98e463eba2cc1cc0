"""One lock per subscription generation's ack log, in this process: a replay and a maintenance
delete of acknowledged rows never interleave on it.

Why a lock and not a re-check: the ack log's rule counts rows (sharedsub.core.delivery.acklog: settled ⇔
final rows > ``replayed`` rows), and it holds only while a ``replayed`` row is written for a
message that is settled *when the row lands*. A replay reads the log, then appends its marks;
maintenance reads the log, then deletes a settled message's routed row and every ack row of it.
A delete landing between a replay's reads and its marks takes the final row the mark was to
balance and leaves the mark: the message is open for good (one re-acknowledgement brings it to
zero, not above). Delta has no conflict to report here (a blind append never conflicts with a
delete), so the two must not run at once; tests/storage/test_replay_maintenance_race.py.

Both run inside ``sharedsub serve`` only (the maintenance thread, sharedsub.runtime.maintenance;
replays, connectors/amqp/replays.py), so an in-process lock is enough. Keyed by the ack log's
path; an entry lives while someone holds or waits for it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

_guard = threading.Lock()
_locks: dict[str, tuple[threading.Lock, int]] = {}  # ack log path -> (its lock, holders + waiters)


@contextlib.contextmanager
def holding(ack_table: str) -> Iterator[None]:
    """Hold the lock of the ack log at ``ack_table`` (a path or URI, as the caller spells the
    table everywhere) for the ``with`` body; waits while another thread holds it."""
    with _guard:
        lock, users = _locks.get(ack_table, (None, 0))
        if lock is None:
            lock = threading.Lock()
        _locks[ack_table] = (lock, users + 1)
    try:
        with lock:
            yield
    finally:
        with _guard:
            _, users = _locks[ack_table]
            if users == 1:
                del _locks[ack_table]
            else:
                _locks[ack_table] = (lock, users - 1)


def held_entries() -> int:
    """Ack logs with a holder or a waiter now (tests: nothing is left behind)."""
    with _guard:
        return len(_locks)
