"""Python's cyclic garbage collector, set for a process that serves messages.

The front end frees almost everything it allocates by reference counting (bytes, tuples, the
column dicts of a message); the cyclic collector finds little, but with CPython's default
thresholds (700, 10, 10) it ran about 200 times a second while publishing, a second-generation
pass every half second scanned every object the process ever kept (about 50 ms each), and each
pass holds the GIL, stopping the event loop and the committer alike. bench/gc_cost.py (three
publish runs of 200,000 messages per serve, two serves per setting; bench/RESULTS.md,
2026-11-25 19:18 UTC): collections took 7.6-7.8 s of serve's time with the defaults and
0.7-0.8 s with the thresholds below; publish 12.8-14.4k -> 15.3-17.8k msg/s, serve's CPU 67-77
-> 55-64 us per message.

:func:`tune_for_serving` raises the first threshold (fewer young collections; cycles wait a
little longer) and moves what start-up created (modules, settings, the catalog) out of the
collector's sight with ``gc.freeze``, so the rare full pass scans only what came after.
"""

from __future__ import annotations

import gc

THRESHOLDS = (10_000, 20, 20)
"""``gc.set_threshold`` values while serving: allocations net of frees before a young
collection, and young / middle collections before an older one."""


def tune_for_serving() -> None:
    """Set :data:`THRESHOLDS` and freeze what exists now (call once start-up is done)."""
    gc.set_threshold(*THRESHOLDS)
    gc.freeze()


def due_generation(counts: tuple[int, int, int], thresholds: tuple[int, int, int]) -> int | None:
    """The generation a collection should take now, as CPython's own trigger would choose it
    (``gc.get_count()`` against ``gc.get_threshold()``), or None when none is due: the young
    count must have reached its threshold; then the oldest generation whose count has reached
    its own is collected with everything younger::

        counts            thresholds          generation
        ---------------   -----------------   ----------
        (9_999, 0, 0)     (10_000, 20, 20)    None
        (10_000, 0, 0)    (10_000, 20, 20)    0
        (10_000, 20, 0)   (10_000, 20, 20)    1
        (10_000, 20, 20)  (10_000, 20, 20)    2
        (10_000, 3, 20)   (10_000, 20, 20)    0
    """
    young, middle, old = counts
    if young < thresholds[0]:
        return None
    if middle >= thresholds[1]:
        return 2 if old >= thresholds[2] else 1
    return 0


QUIET_GROWTH = 100
"""Change of the young generation's count (allocations net of frees, either way) since the last
look below which the process counts as idle: a timer's own allocations and a console sample stay
under it; a message published or delivered does not."""

IDLE_LOOK = 1.0
"""Seconds between two looks, at most, while the process is idle."""


def next_look(interval: float, *, base: float, grown: int, collected: bool) -> float:
    """Seconds to the reactor collector's next look (connectors/amqp/reactor_gc.py), given the one
    just waited (``interval``), its busy cadence (``base``), the young count's growth since the
    last look (``grown``: allocations net of frees, negative when frees outnumbered them) and
    whether this look collected.

    Busy, it looks every ``base`` seconds, as often as CPython's own trigger would find a young
    collection due; idle, it waits twice as long at each look, up to :data:`IDLE_LOOK`, so an
    idle front end wakes about once a second for it instead of ``1 / base`` times (issue 43: an
    idle service's CPU). The first look after traffic resumes comes at most :data:`IDLE_LOOK`
    late: one young collection a little larger than usual::

        grown      collected   interval   ->  next (base 0.05)
        ---------  ----------  ---------      ----------------
        >= 100     any         any            0.05
        <= -100    any         any            0.05
        any        yes         any            0.05
        -99..99    no          0.05           0.1
        -99..99    no          0.8            1.0
        -99..99    no          1.0            1.0
    """
    if collected or abs(grown) >= QUIET_GROWTH:
        return base
    return min(max(interval, base) * 2, max(IDLE_LOOK, base))
