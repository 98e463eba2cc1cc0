"""How long the fan-out's source, on the trigger grid, waits for a commit once traffic has stopped; pure.

Under Spark's processing-time trigger the query asks its source for new data at every multiple of
``[fanout] trigger_interval`` (ten times a second by default) whether anything came or not, and
each ask is work in the driver's JVM and a round trip to the source's Python process: ~2 ms of
CPU, ~0.02 cores for a service with no traffic at all on a 2-core machine, and twice that on a
slower hour (bench/RESULTS.md, issue 43). On a local data dir the front ends signal each commit
(sharedsub.runtime.commit_wake), so once the source has found nothing for :data:`QUIET` seconds
it holds the ask that found nothing, for up to ``[fanout] idle_hold`` seconds, and probes again
as soon as a commit's signal comes. A commit then waits no longer than on the grid (it is
probed at its signal, the grid's next tick follows at once: an ask that took longer than the
interval is followed without waiting); the asks of an idle service come once per hold instead
of once per interval.

What a hold never does:

* delay a commit that sends no signal (a writer on another host, a lost datagram) by more than
  the hold: it is probed when the hold ends;
* hold without a listening socket (another source holds the name, no abstract sockets): it
  would only sleep;
* hold while commits wait (for company, or for the next tick): those are the grid's;
* delay a query's stop by more than the hold (the stop waits for the ask to return).

    commits waiting   listening   found nothing for   hold setting   wait (seconds)
    ----------------  ----------  ------------------  -------------  --------------
    yes               any         any                 any            0
    no                no          any                 any            0
    no                yes         < QUIET             any            0
    no                yes         >= QUIET            h              h (0: off)
"""

from __future__ import annotations

QUIET = 1.0
"""Seconds with nothing found after which an ask that finds nothing is held: traffic of one
message a second or more keeps the grid's cadence (its commits are seen at the next tick)."""


def idle_wait(*, waiting: bool, listening: bool, quiet_for: float, hold: float) -> float:
    """Seconds the ask that just probed may wait for a commit's signal (see the table above).

    ``waiting``: the probe found commits after the query's offset; ``listening``: the commit
    signals reach this source; ``quiet_for``: seconds since a probe last found commits (or since
    the source started); ``hold``: ``[fanout] idle_hold`` (0 = never).
    """
    if waiting or not listening or hold <= 0 or quiet_for < QUIET:
        return 0.0
    return hold
