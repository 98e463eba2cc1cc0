"""How often to probe storage for new commits when nothing comes. Pure.

On a data dir on object storage every probe for a new commit is a request (a HEAD or GET, billed
and rate-limited), where a local dir answers with a ``stat``. The tailer (sharedsub.runtime.tailer)
and the fan-out's source (jobs/sources/deltars_topics.py) probe at ``base`` while commits come,
and back off while none do, doubling the interval up to ``idle``: an idle service costs about
1/``idle`` requests per second per table it watches instead of 1/``base``, and the first message
after a quiet spell waits at most ``idle`` longer. Anything that shows new data (a probe that
found some, a hint that a table got rows) brings the interval back to ``base``. With ``idle <=
base`` (local data dirs) the interval never moves.
"""

from __future__ import annotations


def next_interval(current: float, *, found: bool, base: float, idle: float) -> float:
    """The interval before the next probe, after one that ``found`` new data (or not).

    ========  =======  ==========================
    found     current  next
    ========  =======  ==========================
    yes       any      ``base``
    no        c        ``min(idle, 2c)``, at least ``base``
    ========  =======  ==========================
    """
    if found:
        return base
    return max(base, min(idle, current * 2))


PROBES_PER_SECOND = 1000
"""How many probes a second the tailer spends at most on tables where nothing comes, whatever
their number (:func:`feed_idle_interval`): about 30 ms of CPU a second on a local disk."""

MAX_FEED_IDLE = 2.0
"""The longest a tailed table waits between two probes on a local data dir (seconds): the floor
of what a table no fan-out announcement names waits (sharedsub.core.fanout.routed_tables)."""


ANNOUNCED_IDLE = 10.0
"""The longest a tailed table waits between two probes when the fan-out announces the tables it
writes (``sharedsub serve`` with its embedded job, sharedsub.core.fanout.routed_tables): those
are probed at once, so these probes only find what no announcement named (on a bucket each is
a request: 1 a second per consumed subscription at ``object_idle_poll_interval`` 1.0)."""


def feed_idle_interval(feeds: int, *, base: float, idle: float, announced: bool = False) -> float:
    """The longest one tailed table waits between probes while nothing comes, with ``feeds``
    tables tailed: ``idle``, or longer when so many tables are tailed that probing each every
    ``idle`` seconds would exceed :data:`PROBES_PER_SECOND` (at most :data:`MAX_FEED_IDLE`, or
    ``idle`` when that is longer). The tailer learns of most new commits from the fan-out's
    announcements (it probes those tables at once); these probes are what finds the rest::

        feeds    base     idle     interval
        -----    -----    -----    --------
        1        0.005    0.005    0.005
        100      0.005    0.005    0.1
        1,000    0.005    0.005    1.0
        10,000   0.005    0.005    2.0
        10,000   0.1      5.0      5.0

    With ``announced`` (the fan-out announces the tables it wrote) it is :data:`ANNOUNCED_IDLE`
    (or longer, as above).
    """
    scaled = max(base, idle, min(MAX_FEED_IDLE, feeds / PROBES_PER_SECOND))
    return max(scaled, ANNOUNCED_IDLE) if announced else scaled
