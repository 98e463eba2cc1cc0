"""Whether the fan-out starts a micro-batch for the commits waiting now, or waits for company; pure.

A micro-batch costs Spark a fixed amount of work whatever it carries (planning, the offsets and
commit files, the sink's call; ~40 ms of CPU on a 2-core machine, bench/RESULTS.md). Under light
traffic every trigger finds a commit or two waiting, so the fan-out ran a batch per trigger, and
at 100 msg/s that fixed cost was most of the service's CPU. So the source
(jobs/sources/deltars_topics.py) admits a batch only when enough waits to be worth one: at least
``min_rows`` rows, or a commit that has waited ``max_wait`` seconds. Under load the rows are there
at once and batches run as often as the trigger lets them, growing with the traffic; under a
trickle a message waits at most ``max_wait`` (plus a trigger interval) for others to share its
batch. Latency follows traffic, and so does the cost.

Holding a batch back is safe: the offset stays where the last batch ended, the commits stay in
the topic tables, and the next trigger looks again. Nothing is skipped or read twice. A commit
that adds no rows (a topic's creation) waits like any other: it starts a batch once it waited.

    max_wait  rows waiting    oldest commit waited   step
    --------  --------------  ---------------------  ------------------------
    <= 0      any             any                    start (waiting is off)
    > 0       >= min_rows     any                    start
    > 0       < min_rows      >= max_wait            start
    > 0       < min_rows      < max_wait             wait for company
    > 0       unknown         any                    start (cannot tell: as before)
"""

from __future__ import annotations


def admitted_in(*, rows: int | None, waited: float, min_rows: int, max_wait: float) -> float:
    """Seconds until the commits waiting now start a micro-batch if no more come: 0 when they
    start one now (the table above), else the time their oldest still has to wait.

    ``rows``: rows of the commits waiting (None when a commit does not say how many; counting may
    stop once ``min_rows`` is reached); ``waited``: seconds since the oldest of them was committed.
    """
    if max_wait <= 0 or rows is None or rows >= min_rows:
        return 0.0
    return max(0.0, max_wait - waited)
