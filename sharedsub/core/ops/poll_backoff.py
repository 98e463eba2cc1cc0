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


ANNOUNCED_IDLE = 60.0
"""The least a tailed table waits between two probes while nothing comes when the fan-out
announces the tables it writes (``sharedsub serve`` with its embedded job,
sharedsub.core.fanout.routed_tables): those are probed at once, and every table when a fan-out
child comes up (a dead one's last commits were not announced: sharedsub.runtime.fanout_process),
so these probes are only a safety net (on a bucket each is a request)."""

ANNOUNCED_PROBES_PER_SECOND = 0.5
"""How many of those safety probes a second the tailer makes at most, whatever the number of
tables (with announcements): 1,000 tables are each probed every 2,000 s."""


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

    With ``announced`` (the fan-out announces the tables it wrote) it is at least
    :data:`ANNOUNCED_IDLE`, and long enough that all of them make at most
    :data:`ANNOUNCED_PROBES_PER_SECOND` probes a second (1,000 tables: 2,000 s).
    """
    scaled = max(base, idle, min(MAX_FEED_IDLE, feeds / PROBES_PER_SECOND))
    return max(scaled, ANNOUNCED_IDLE, feeds / ANNOUNCED_PROBES_PER_SECOND) if announced else scaled
