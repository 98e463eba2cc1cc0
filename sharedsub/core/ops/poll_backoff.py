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
