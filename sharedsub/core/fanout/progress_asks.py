"""When the fan-out job's main loop asks its streaming query for the last progress report; pure.

The job's main loop (jobs/fanout.py) takes the routed versions from ``StreamingQuery.lastProgress``
between batches (jobs/routed_progress.py), and looks twice a second. Each ask is three calls into
the driver's JVM (the report, its JSON, and py4j's release of the report's handle) and the JSON
parsed in Python: ~0.02 cores of an idle service's CPU on a 2-core machine (bench/RESULTS.md,
issue 43), for a report that changes only when a batch ends. So the loop asks while batches
are being routed, and for :data:`AFTER_BATCH` seconds after the last one ended (the query reports
a batch a little after its ``foreachBatch`` returned); otherwise only every :data:`IDLE_ASK`
seconds, which keeps a report the loop missed from being lost for good::

    last batch routed            last ask                  ask now
    ---------------------------  ------------------------  -------
    any                          never                     yes
    running now, or <= 2 s ago   any                       yes
    never, or > 2 s ago          >= 10 s ago               yes
    never, or > 2 s ago          < 10 s ago                no
"""

from __future__ import annotations

AFTER_BATCH = 2.0
"""Seconds after a batch ended during which the loop keeps asking for the report."""

IDLE_ASK = 10.0
"""Seconds between two asks while no batch is routed."""


def ask_progress(*, routing: bool, since_routed: float | None, since_asked: float | None) -> bool:
    """Whether to ask the query for its last progress report now (see the table above).

    ``routing``: a batch is in the sink's hands; ``since_routed``: seconds since the last batch
    ended (None: none yet); ``since_asked``: seconds since the last ask (None: never).
    """
    if since_asked is None or routing:
        return True
    if since_routed is not None and since_routed <= AFTER_BATCH:
        return True
    return since_asked >= IDLE_ASK
