"""When the fan-out's source starts a micro-batch: at a front end's commit, not on a fixed grid; pure.

Spark's processing-time trigger starts a micro-batch only at multiples of its interval, so a
message committed just after a trigger found nothing waited most of an interval before Spark even
looked (half an interval on average: ~50 ms at 0.1 s, the largest single part of the
publish->delivery median under light traffic, bench/RESULTS.md, issue 43). With ``[fanout]
start_on_commit`` (the default), on a local data dir the source runs under a trigger of 0 (Spark
asks again as soon as it finished) and *holds* its ``latestOffset`` call: it returns a new offset,
which starts a batch, as soon as the commits waiting are admitted
(sharedsub.core.fanout.batch_admission) and the pace lets a batch start (:class:`Pace`: at most one
per ``interval`` on average); otherwise it sleeps until whichever comes first of

* a front end's commit signal (sharedsub.runtime.commit_wake: a datagram after each group that
  committed a topic table), after which it probes again,
* the moment the waiting commits are admitted (their oldest reaches ``batch_max_wait``),
* the moment the pace lets the next batch start (under load batches still come at most once
  per interval on average, growing with the traffic, as on the grid),
* the end of the hold, ``hold`` seconds after the call came: then it returns what it has (no new
  batch, or the admitted commits once the pace allows), Spark asks again, and the source
  probes again. A writer that sends no signal (a front end on another host, a lost datagram) is
  so seen within ``hold`` seconds, as a trigger interval saw it; and the query's stop, which
  waits for the call to return, is never held longer than that (twice that when a batch
  waiting for company is due within one more hold: the table's second row).

Holding is safe for the same reason waiting for company is: the offset stays where the last batch
ended and the commits stay in their tables; nothing is skipped or read twice.

    waiting commits    admitted   the pace           hold left   step (the first row that fits)
    -----------------  ---------  -----------------  ----------  ---------------------------------
    some               yes        allows             any         start
    some               no         any                any         sleep(until admitted and the
                                                                 pace), when that is within
                                                                 hold left + one hold: giving up
                                                                 first would cost Spark an ask
    any                any        any                <= 0        give up: no batch now
    none               -          any                > 0         sleep(hold left), or a signal
    some               yes        not yet            > 0         sleep(until the pace; hold left),
                                                                 deaf to signals
    some               no         any                > 0         sleep(until admitted; hold left)

The hold only ever delays a batch, never drops one: admitted commits start it even when the hold
is over.

The pace is a rate, not a least gap between two starts. Under steady load the front ends commit
on a cadence of their own (``[publish] min_commit_interval``), with a few milliseconds of
jitter; with a least gap equal to that cadence, every commit that landed a little early was held
until the gap was over and then waited for the next commit (the alignment below): batches
drifted behind the commits and a message waited ~40 ms more for its batch (measured at 1k msg/s
with both at 0.1 s, bench/RESULTS.md, issue 43, "a pace, not a gap"). :class:`Pace` lets a batch
start up to half an interval early after one that came late, so batches follow a cadence as
long as theirs, and over any T seconds still start at most 1 + (T + interval / 2) / interval
times.

When commits come more often than the pace allows, the pace, not the commits, starts each batch; a
batch that starts at a random moment between two commits leaves the newest messages waiting a whole
interval for the next. So when this call held admitted commits for the pace alone (``gated``: the
last batch ran shorter than the interval, so the fan-out keeps up) and the newest commit waiting
landed more than :data:`FRESH` ago, the batch waits at most ``align`` seconds more for the next
commit's signal and starts with it. Batches then start as commits land: at 1k msg/s with commits
every ~40 ms and an interval of 0.1 s, a message waits ~40 ms on average for its batch instead of
~50, and batches come a little less often. A fan-out that cannot keep up (its batches take longer
than the interval) never waits for alignment, nor does a batch held for company (its commits come
too seldom to align with).

    gated   newest commit age   waited past the pace       step
    ------  ------------------  -------------------------  ---------------------------------
    no      any                 any                        start
    yes     <= FRESH            any                        start
    yes     > FRESH             < align                    sleep(until align; hold left), or
                                                           the next commit's signal
    yes     > FRESH             >= align                   start
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Hold:
    """One step of a held ``latestOffset``: ``start`` the batch now, or ``sleep`` this many
    seconds and probe again (``signal``: a commit signal ends the sleep early; not while the
    commits waiting are admitted already and only the pace is awaited, when another commit
    changes nothing); neither: return with no batch."""

    start: bool = False
    sleep: float = 0.0
    signal: bool = True


START = Hold(start=True)
GIVE_UP = Hold()

FRESH = 0.01
"""A commit that landed this recently (seconds) counts as landed now: the batch is aligned with it
(a log file's time is the kernel's coarse clock, a few milliseconds a tick)."""


@dataclasses.dataclass(frozen=True)
class Pace:
    """At most one batch start per ``interval`` seconds on average (0: no bound), a start up to
    ``interval / 2`` early allowed: the generic cell rate algorithm, its state ``due``, the
    moment (time.monotonic) the next start is due on schedule (-inf: none started yet).

        due       now                          left(now)             started(now).due
        --------  ---------------------------  --------------------  -------------------------
        -inf      any                          -inf (allowed)        now + interval
        d         >= d - interval / 2          <= 0 (allowed)        max(d, now) + interval
        d         <  d - interval / 2          d - interval / 2 - now  (not started)
    """

    interval: float
    due: float = float("-inf")

    EARLY = 0.5
    """How much of an interval a start may come before it is due."""

    def left(self, now: float) -> float:
        """Seconds from ``now`` until a batch may start (0 or less: it may now)."""
        return self.due - self.EARLY * self.interval - now

    def started(self, now: float) -> Pace:
        """The pace after a batch started at ``now``: the next is due one interval after this
        one was due, or after ``now`` when this one came late."""
        return dataclasses.replace(self, due=max(self.due, now) + self.interval)


def next_step(
    *,
    waiting: bool,
    admitted_in: float,
    pace_left: float,
    hold_left: float,
    gated: bool = False,
    newest_age: float = 0.0,
    align: float = 0.0,
    hold: float = 0.0,
) -> Hold:
    """The step for the commits waiting now (see the tables above).

    ``waiting``: the probe found commits after the query's offset; ``admitted_in``: seconds until
    they are admitted (0 or less: they are); ``pace_left``: seconds until the pace lets the
    next batch start (:meth:`Pace.left`; 0 or less: it does); ``hold_left``: seconds left of
    this call's hold. ``gated``: the call held the commits, admitted already, for the pace;
    ``newest_age``: seconds since the newest commit waiting landed;
    ``align``: the most seconds past the pace's moment a gated batch waits for the next commit;
    ``hold``: the hold's whole length (a batch waiting for company and due within one more hold
    is waited for in this call).
    """
    if waiting and admitted_in <= 0 and pace_left <= 0:
        align_left = align + pace_left  # (under a millisecond is not worth a sleep)
        if gated and newest_age > FRESH and align_left > 0.001 and hold_left > 0:
            return Hold(sleep=min(hold_left, align_left))
        return START
    if waiting and admitted_in > 0:
        due = max(pace_left, admitted_in)
        if due <= max(hold_left, 0.0) + hold:
            return Hold(sleep=due)  # (giving up first would cost Spark an ask for nothing)
    if hold_left <= 0:
        return GIVE_UP
    if not waiting:
        return Hold(sleep=hold_left)
    if admitted_in <= 0:
        return Hold(sleep=min(hold_left, pace_left), signal=False)
    return Hold(sleep=min(hold_left, max(pace_left, admitted_in)))
