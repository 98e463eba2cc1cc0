"""sharedsub.core.fanout.batch_hold as a table: when a held latestOffset starts a batch, sleeps or gives up."""

from __future__ import annotations

import math

import pytest

from sharedsub.core.fanout.batch_hold import GIVE_UP, START, Hold, Pace, next_step

INF = math.inf


@pytest.mark.parametrize(
    ("waiting", "admitted_in", "pace_left", "hold_left", "step"),
    [
        # Nothing new: sleep out the hold, woken by a commit signal; then give up (Spark asks again).
        (False, 0.0, -INF, 0.1, Hold(sleep=0.1)),
        (False, 0.0, 0.08, 0.03, Hold(sleep=0.03)),
        (False, 0.0, -INF, 0.0, GIVE_UP),
        # Admitted commits and the pace allows: start, even when the hold is over.
        (True, 0.0, -INF, 0.1, START),
        (True, 0.0, 0.0, 0.05, START),
        (True, 0.0, -0.4, -0.01, START),
        (True, -0.3, -0.1, 0.05, START),
        # Admitted, but the pace does not allow a batch yet: sleep until it does, deaf to
        # signals (another commit changes nothing); within the hold.
        (True, 0.0, 0.07, 0.1, Hold(sleep=0.07, signal=False)),
        (True, 0.0, 0.07, 0.02, Hold(sleep=0.02, signal=False)),
        (True, 0.0, 0.07, 0.0, GIVE_UP),
        # Waiting for company: until admitted (or the pace, whichever is later), woken by a
        # signal (more rows may admit them sooner); within the hold.
        (True, 0.04, -INF, 0.1, Hold(sleep=0.04)),
        (True, 0.04, 0.02, 0.1, Hold(sleep=0.04)),
        (True, 0.01, 0.05, 0.1, Hold(sleep=0.05)),
        (True, 0.12, -INF, 0.1, Hold(sleep=0.1)),
        (True, 0.12, -INF, 0.0, GIVE_UP),
    ],
)
def test_next_step(waiting: bool, admitted_in: float, pace_left: float, hold_left: float, step: Hold) -> None:
    got = next_step(waiting=waiting, admitted_in=admitted_in, pace_left=pace_left, hold_left=hold_left)
    assert got.start == step.start and got.signal == step.signal
    assert got.sleep == pytest.approx(step.sleep)


@pytest.mark.parametrize(
    ("gated", "newest_age", "pace_left", "hold_left", "step"),
    [
        # The fan-out keeps up (the call waited for the pace), the newest commit is old: wait
        # for the next commit's signal, at most align (0.05) past the pace's moment, within the hold.
        (True, 0.03, 0.0, 0.2, Hold(sleep=0.05)),
        (True, 0.03, -0.02, 0.2, Hold(sleep=0.03)),
        (True, 0.03, -0.02, 0.01, Hold(sleep=0.01)),
        (True, 0.03, -0.05, 0.2, START),  # waited align already
        (True, 0.03, -0.02, 0.0, START),  # the hold is over: the batch starts all the same
        (True, 0.005, 0.0, 0.2, START),  # a commit just landed: aligned
        (False, 0.03, 0.0, 0.2, START),  # behind (the call came after the pace's moment): at once
    ],
)
def test_a_gated_batch_waits_for_the_next_commit(
    gated: bool, newest_age: float, pace_left: float, hold_left: float, step: Hold
) -> None:
    got = next_step(
        waiting=True,
        admitted_in=0.0,
        pace_left=pace_left,
        hold_left=hold_left,
        gated=gated,
        newest_age=newest_age,
        align=0.05,
    )
    assert got.start == step.start and got.signal == step.signal
    assert got.sleep == pytest.approx(step.sleep)


def test_without_align_a_gated_batch_starts_with_the_pace() -> None:
    got = next_step(waiting=True, admitted_in=0.0, pace_left=0.0, hold_left=0.2, gated=True, newest_age=0.05)
    assert got == START


@pytest.mark.parametrize(
    ("admitted_in", "pace_left", "hold_left", "step"),
    [
        # Waiting for company, due within this hold and one more: waited for here, even past the
        # hold (a give-up would cost Spark an ask for nothing).
        (0.12, -INF, 0.1, Hold(sleep=0.12)),
        (0.05, -INF, 0.0, Hold(sleep=0.05)),
        (0.05, 0.08, 0.0, Hold(sleep=0.08)),  # the pace is later than the admission
        # Due later than that: the hold's rules as before.
        (0.25, -INF, 0.1, Hold(sleep=0.1)),
        (0.15, -INF, 0.0, GIVE_UP),
    ],
)
def test_a_batch_due_within_one_more_hold_is_waited_for_in_this_call(
    admitted_in: float, pace_left: float, hold_left: float, step: Hold
) -> None:
    got = next_step(waiting=True, admitted_in=admitted_in, pace_left=pace_left, hold_left=hold_left, hold=0.1)
    assert got.start == step.start and got.signal == step.signal
    assert got.sleep == pytest.approx(step.sleep)


@pytest.mark.parametrize(
    ("due", "now", "left", "due_after_start"),
    [
        (-INF, 5.0, -INF, 5.1),  # none started yet: at once; the next due one interval later
        (5.1, 5.1, -0.05, 5.2),  # on time
        (5.1, 5.05, 0.0, 5.2),  # half an interval early: allowed, and the schedule kept
        (5.1, 5.04, 0.01, None),  # earlier than that: not yet
        (5.1, 5.3, -0.25, 5.4),  # late: the next is due one interval after this start
    ],
)
def test_pace(due: float, now: float, left: float, due_after_start: float | None) -> None:
    pace = Pace(0.1, due)
    assert pace.left(now) == pytest.approx(left)
    if due_after_start is not None:
        assert pace.started(now).due == pytest.approx(due_after_start)


def test_a_pace_follows_a_jittery_cadence_as_long_as_its_own_and_bounds_a_faster_one() -> None:
    # Commits every 0.1 s, each a little early or late: a pace of 0.1 s (a least gap of 0.1 s,
    # as before, held every early one back to the next commit) starts a batch at every commit.
    pace, started = Pace(0.1), 0
    for n in range(100):
        now = n * 0.1 + (0.008 if n % 2 else -0.008)
        if pace.left(now) <= 0:
            pace, started = pace.started(now), started + 1
    assert started == 100
    # Commits every 0.02 s: over 10 s at most 1 + (10 + 0.05) / 0.1 starts.
    pace, started = Pace(0.1), 0
    for n in range(500):
        if pace.left(n * 0.02) <= 0:
            pace, started = pace.started(n * 0.02), started + 1
    assert started <= 1 + (10 + 0.05) / 0.1
    assert started >= 10 / 0.1


def test_a_pace_of_0_always_allows_a_batch() -> None:
    pace = Pace(0.0).started(5.0)
    assert pace.left(5.0) <= 0 and pace.started(5.0).left(5.0) <= 0  # back to back
    got = next_step(waiting=True, admitted_in=0.0, pace_left=pace.left(5.0), hold_left=0.1)
    assert got == START
