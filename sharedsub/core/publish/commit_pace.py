"""When a group commit may start: the commit interval, and the publishers it must not hold; pure.

The group committer starts at most one group per ``[publish] min_commit_interval`` (0.05 s by
default): what arrives meanwhile joins the next group, so a steady trickle of messages makes
fewer, larger commits (each commit is a data file and a log entry that every reader of the topic
reads again). That wait pays only when it lets more messages join a group.

It does not for a publisher that sends one message and waits for its outcome before it sends the
next, as Qpid JMS sends persistent messages unless told otherwise (a synchronous send): its group
holds its one message however long the committer waits, and the wait held such a publisher to
one message per interval (measured with a blocking python-qpid-proton sender: 50 msg/s at 0.02 s,
347 msg/s with no interval; bench/RESULTS.md, "Synchronous publishers"). Its message is
*awaited*: the group it starts, or joins during the wait, is committed at once.

The same holds for a publisher that can send nothing more until some of its messages are
settled: the group that holds its last one gains no company by waiting (a publisher with a
window of W would otherwise be held to W messages per interval). Its message is awaited too
when it uses up the credit its link was given, or when it brings the link's unsettled messages
to the most the link had when outcomes came back before (its own window, as seen; at least 2,
so that a slow publisher with one message in flight at a time is left to the timing rule below)
within :data:`IN_A_ROW` of its message before: a publisher held by its window sends what its outcomes
free at once, one message after the other. One paced on its own clock whose first group held two
messages would otherwise have every later pair committed at once: with commits faster than its
pace (~2.4 ms once a commit's files are made ahead), each pair is settled before its next message,
and 300 messages every 6-8 ms made 101-151 groups against ~36-48 at the interval
(bench/paced_groups.py; bench/RESULTS.md, issue 43, "the window rule").

Telling a synchronous publisher apart, per publisher link (:class:`PublisherPace`): a message is
awaited when its link had nothing unsettled when it arrived and the link's last settlement was
at most ``gap`` seconds before (``[publish] sync_send_gap``; 0: never). A publisher that keeps several
messages in flight nearly always has one unsettled when the next arrives; one that sends at a
slow steady pace sends its next message whenever its clock says, mostly long after the last
settlement.
A synchronous publisher that is slower than ``gap`` to send again now and then (its client's
thread scheduled late, a garbage collection) would have that message wait the whole interval:
with Qpid JMS on a 2-core machine 1-10% of sends did (p50 6.2 ms, p90 8.7-11.3 ms, p99 54 ms a
send at the 0.05 s interval; bench/RESULTS.md, "2026-11-29 21:49–22:16 UTC"). So a link
that has shown itself synchronous (its last :data:`SYNC_STREAK` messages each came within ``gap``
of a settlement, nothing in flight) keeps being taken for one while it sends again within
:data:`SYNC_STRETCH` times ``gap``; anything else ends the streak. A slow steady publisher never
builds a streak: its clock, not its outcomes, says when it sends.

The timing alone cannot tell a synchronous publisher from one paced a little slower than a lone
commit: a message every 7 ms, each committed at once in ~5 ms, comes ~2 ms after its
settlement, as a synchronous send does, and once committed at once it stays so, one commit per
message (measured through serve: 300 messages in 125-136 groups against ~42 at the interval;
bench/RESULTS.md, issue 43). What does tell them apart: a synchronous publisher never has a
message arrive while another of its messages is in flight, and a paced one does as soon as a
commit takes longer than its pace, or a group holds two. So a link seen with a message in flight
when the next arrived is not awaited by the timing rules for :data:`PIPELINED_FOR` seconds from
then (a group it is in keeps it so); a synchronous publisher that sent a burst first is awaited
again that long after it.

Where a paced group starts (``[publish] commit_lead``): the embedded fan-out runs one micro-batch
at each multiple of ``[fanout] trigger_interval`` since the epoch (Spark's processing-time trigger
waits for the next multiple of its interval on the wall clock), and a commit that lands just after
such a tick waits a whole interval for the next. So a group held by the interval starts at a
*slot* instead (:func:`slot_floor`): slots come every :func:`slot_period` (the commit interval,
stretched so that a whole number of them fills a trigger interval), each ``lead`` seconds before
a multiple of it (:func:`next_slot`), so that one group a trigger interval ends just before the
tick. A group that need not wait (awaited, or the interval over) starts at once as before.
"""

from __future__ import annotations

import dataclasses
import math

SYNC_STREAK = 3
"""Messages in a row sent within ``gap`` of a settlement, nothing in flight, after which a link is
taken for a synchronous publisher's."""
SYNC_STRETCH = 10.0
"""How many times ``gap`` such a link may take to send again and still be awaited."""
IN_A_ROW = 0.002
"""Seconds within which a link's message came after its message before for a full window to await
it (a window publisher sends what its outcomes free one message right after the other). Not
``sync_send_gap``: the window rule holds with the synchronous-send rule off (gap 0)."""
SYNC_LATELY = 1.0
"""Seconds after a link's message was last taken for a synchronous send (by the timing rules)
during which its messages, unless it keeps several in flight, do not wait for company
(:meth:`PublisherPace.wants_company`)."""
PIPELINED_FOR = 1.0
"""Seconds after a link's message arrived while another of its messages was in flight during
which its messages are not awaited by the timing rules (the credit and window rules still apply)."""


@dataclasses.dataclass(slots=True)
class PublisherPace:
    """One publisher link's messages handed to the committer and not yet settled, when the last
    of them was settled (seconds on the caller's monotonic clock; None: never), and the most it
    had unsettled when outcomes came back (its window, as seen)."""

    unsettled: int = 0
    settled_at: float | None = None
    window: int = 0
    streak: int = 0  # messages in a row sent within ``gap`` of a settlement (at most SYNC_STREAK)
    pipelined_until: float = -math.inf  # timing rules off until then (PIPELINED_FOR)
    arrived_at: float = -math.inf  # when the link's last message came
    synced_at: float = -math.inf  # when a message of the link was last taken for a synchronous send

    def arrived(self, now: float, gap: float, credit_left: int | None = None) -> bool:
        """Count a message handed to the committer at ``now``; whether it is awaited (the module
        docstring's rules). ``credit_left``: the credit its link still has after it (None: not
        known); 0 means its publisher can send nothing more until a settlement."""
        if self.unsettled > 0:
            self.pipelined_until = now + PIPELINED_FOR
        since = now - self.settled_at if gap > 0 and self.unsettled == 0 and self.settled_at is not None else None
        quick = since is not None and since <= gap
        known = since is not None and self.streak >= SYNC_STREAK and since <= gap * SYNC_STRETCH
        if quick:
            self.streak = min(SYNC_STREAK, self.streak + 1)
        elif not known:
            self.streak = 0
        if quick or known:
            self.synced_at = now
        awaited = (quick or known) and now >= self.pipelined_until
        self.unsettled += 1
        in_a_row = now - self.arrived_at <= IN_A_ROW
        self.arrived_at = now
        full = self.window > 1 and self.unsettled >= self.window and in_a_row
        return awaited or full or credit_left == 0

    def wants_company(self, now: float) -> bool:
        """Whether the group of the message that just :meth:`arrived` at ``now`` may wait for
        company (:class:`Company`): yes, unless the link was taken for a synchronous publisher's
        within :data:`SYNC_LATELY` and keeps no other message in flight. Such a publisher that
        was late to send again now and then (its client's thread scheduled late: 1-10% of Qpid
        JMS sends on a slow hour) would have that message wait for company, ~0.15 s, and a few
        such waits took its sends from ~290 to 52-143 msg/s (bench/RESULTS.md, issue 43, "one
        commit, one batch"); it waits for the interval at most, as before company."""
        return now < self.pipelined_until or now - self.synced_at > SYNC_LATELY

    def settled(self, count: int, now: float) -> None:
        """``count`` of the link's messages were settled at ``now`` (accepted or refused)."""
        self.window = max(self.window, self.unsettled)
        self.unsettled = max(0, self.unsettled - count)
        if self.unsettled == 0:
            self.settled_at = now


def slot_period(min_interval: float, trigger_interval: float) -> float:
    """Seconds between two commit slots: at least ``min_interval``, and a whole number of them
    fills ``trigger_interval`` (or a whole number of trigger intervals fills one), so that the
    slots keep one phase to the fan-out's ticks.

        min_interval  trigger_interval  period
        ------------  ----------------  ----------------------------
        0.05          0.1               0.05   (two slots a tick)
        0.03          0.1               0.0333 (three)
        0.1           0.1               0.1
        0.15          0.1               0.2    (one slot every other tick)
    """
    if min_interval <= 0 or trigger_interval <= 0:
        raise ValueError("both intervals must be above 0")
    per_tick = math.floor(trigger_interval / min_interval + 1e-9)
    if per_tick >= 1:
        return trigger_interval / per_tick
    return trigger_interval * math.ceil(min_interval / trigger_interval - 1e-9)


def next_slot(at: float, *, period: float, lead: float) -> float:
    """The first slot at or after ``at`` (seconds since the epoch): a time ``lead`` seconds
    before a multiple of ``period``."""
    return math.ceil((at + lead) / period - 1e-9) * period - lead


def slot_floor(started: float, *, min_interval: float, period: float, lead: float) -> float:
    """The time (seconds since the epoch) before which the group after one that ``started`` then
    waits for more, with slots: the first slot from a tenth of a ``period`` before the interval's
    end.

    That tenth is the committer thread's wake-up: a group held for a slot starts a little after
    it, and the first slot after its start plus the interval would be a whole period late, one
    commit per two slots (measured: half the commits, 164 against 131 ms median at 1k msg/s). No
    more than that: a group that started off the slots (awaited, or after a quiet spell) is
    followed no sooner than the interval less a tenth (the nearest slot, up to half a period
    sooner, made 8-13% more commits at 100 msg/s; bench/RESULTS.md, issue 43).
    """
    return next_slot(started + min_interval - period / 10, period=period, lead=lead)


FULL_GROUP = 512
"""Publishes from which a group is committed without waiting for the interval (:func:`collect_for`).

The interval is there for light traffic, where each commit's fixed cost falls on a few messages.
A group of hundreds has that cost spread thin already; what the wait did to a fast publisher with
a window of 1,000 was leave fewer groups in flight: at 0.05 s it published 16-18k msg/s where it
had 19-20k at 0.02 s. Alternating against the code before issue 43 (0.02 s, no such rule), three
runs each of ``bench/run.py --only publish``: 256 -> 18.1k against 20.5k and 19.2k (more,
smaller commits: 72-76 against 54); 512 -> 20.7k median against 19.4k, 45 commits against 55,
the same CPU per message (bench/RESULTS.md, issue 43). At 1k msg/s a group holds ~50: unchanged."""


@dataclasses.dataclass(frozen=True, slots=True)
class Company:
    """Under light traffic a group waits for company (``[fanout] batch_min_rows`` and
    ``batch_max_wait`` when the fan-out starts its micro-batches at commits): one that holds
    fewer than ``publishes`` when the interval is over waits for them, up to ``wait`` seconds
    from the previous group's start.

    Why in the group: when each commit's signal starts a micro-batch (sharedsub.core.fanout.batch_hold),
    a group commit *is* a micro-batch, and each has a fixed cost (the commit's files and fsyncs
    in the append child, ~5 ms of CPU; Spark's planning and the sink's call, ~20-30 ms). At 100
    msg/s the interval made 20 commits a second, which the fan-out's source then held for
    company and routed in 5 batches on the trigger grid: ~157 ms publish->delivery median. One
    commit per micro-batch, each waiting for company here, routed the same traffic with fewer
    commits and batches in all: ~114 ms, and less CPU (bench/RESULTS.md, issue 43, "one commit,
    one batch"). Under load a group holds ``publishes`` by the interval's end and waits no longer.
    """

    publishes: int
    wait: float


def collect_for(
    floor_until: float,
    now: float,
    awaited: bool,
    publishes: int = 1,
    *,
    company: Company | None = None,
    started: float = -math.inf,
) -> float:
    """Seconds a group that holds ``publishes`` may still wait for more before it is committed:
    until ``floor_until`` (the previous group's start plus the interval); then, with
    ``company``, while it holds fewer than ``company.publishes``, until ``company.wait`` seconds
    after ``started`` (the previous group's start). None when a request of it is awaited, or it
    holds :data:`FULL_GROUP` publishes already. (The caller passes no ``company`` for a group none
    of whose publishes wants it: :meth:`PublisherPace.wants_company`.)

        awaited  publishes        now                        wait
        -------  ---------------  -------------------------  -----------------------------
        yes      any              any                        0
        no       >= FULL_GROUP    any                        0
        no       any              < floor_until              floor_until - now
        no       < company's      < started + company.wait   started + company.wait - now
        no       any other        any other                  0
    """
    if awaited or publishes >= FULL_GROUP:
        return 0.0
    if now < floor_until:
        return floor_until - now
    if company is not None and publishes < company.publishes:
        return max(0.0, started + company.wait - now)
    return 0.0
