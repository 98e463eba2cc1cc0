"""Whether the fan-out's next micro-batch takes a topic's new commits now; pure.

Every micro-batch of the fan-out costs Spark a fixed amount of work (planning, progress, two
checkpoint files), whatever it routes. A topic that no subscription listens to has nothing to
route, yet each of its commits would start another micro-batch. So the source
(jobs/sources/deltars_topics.py) moves such a topic's offset forward at most every ``interval`` seconds:
its commits are held, not read. Moving it at all keeps what the offset stands for (how far the
topic has been looked at) close to the table, so retention can drop those rows and a
subscription created later does not make the job go through a long run of commits it skips.

Holding is safe for routing: a subscription's messages all have ``seq >= start_seq``, and the
front end commits the subscription to the catalog before any of them, so a topic found without
subscriptions holds nothing anyone is owed; once one appears, the topic is taken at once. The
lag metric and /health look only at topics with subscriptions, so a held topic never shows as
behind.

    subscribed  new commits  last moved           step
    ----------  -----------  -------------------  ----------------------------------
    yes         any          any                  take
    no          none         any                  take (nothing to hold)
    no          some         never, or ≥ interval  take (and note the time)
    no          some         < interval ago       hold
    any         any          interval 0           take (holding is off)
"""

from __future__ import annotations


def takes_commits(*, subscribed: bool, new_commits: bool, since_last_taken: float | None, interval: float) -> bool:
    """True when the next micro-batch should take a topic's new commits (see the table above).

    ``since_last_taken``: seconds since the topic's offset last moved forward for this reader, or
    None when it never did.
    """
    if subscribed or not new_commits or interval <= 0:
        return True
    return since_last_taken is None or since_last_taken >= interval
