"""sharedsub.core.fanout.batch_hold as a table: when a held latestOffset starts a batch, sleeps or gives up."""

from __future__ import annotations

import math

import pytest

from sharedsub.core.fanout.batch_hold import GIVE_UP, START, Hold, next_step

INF = math.inf


@pytest.mark.parametrize(
    ("waiting", "admitted_in", "since_start", "interval", "hold_left", "step"),
    [
        # Nothing new: sleep out the hold, woken by a commit signal; then give up (Spark asks again).
        (False, 0.0, INF, 0.1, 0.1, Hold(sleep=0.1)),
        (False, 0.0, 0.02, 0.1, 0.03, Hold(sleep=0.03)),
        (False, 0.0, INF, 0.1, 0.0, GIVE_UP),
        # Admitted commits and the interval passed: start, even when the hold is over.
        (True, 0.0, INF, 0.1, 0.1, START),
        (True, 0.0, 0.1, 0.1, 0.05, START),
        (True, 0.0, 0.5, 0.1, -0.01, START),
        (True, -0.3, 0.2, 0.1, 0.05, START),
        (True, 0.0, 0.0, 0.0, 0.1, START),  # interval 0: back to back
        # Admitted, but the last batch began less than an interval ago: sleep until it has, deaf to
        # signals (another commit changes nothing); within the hold.
        (True, 0.0, 0.03, 0.1, 0.1, Hold(sleep=0.07, signal=False)),
        (True, 0.0, 0.03, 0.1, 0.02, Hold(sleep=0.02, signal=False)),
        (True, 0.0, 0.03, 0.1, 0.0, GIVE_UP),
        # Waiting for company: until admitted (or the interval, whichever is later), woken by a
        # signal (more rows may admit them sooner); within the hold.
        (True, 0.04, INF, 0.1, 0.1, Hold(sleep=0.04)),
        (True, 0.04, 0.08, 0.1, 0.1, Hold(sleep=0.04)),
        (True, 0.01, 0.05, 0.1, 0.1, Hold(sleep=0.05)),
        (True, 0.12, INF, 0.1, 0.1, Hold(sleep=0.1)),
        (True, 0.12, INF, 0.1, 0.0, GIVE_UP),
    ],
)
def test_next_step(waiting: bool, admitted_in: float, since_start: float, interval: float, hold_left: float, step: Hold) -> None:
    got = next_step(waiting=waiting, admitted_in=admitted_in, since_start=since_start, interval=interval, hold_left=hold_left)
    assert got.start == step.start and got.signal == step.signal
    assert got.sleep == pytest.approx(step.sleep)


@pytest.mark.parametrize(
    ("gated", "newest_age", "since_start", "hold_left", "step"),
    [
        # The fan-out keeps up (the call waited for the interval), the newest commit is old: wait
        # for the next commit's signal, at most align (0.05) past the interval, within the hold.
        (True, 0.03, 0.1, 0.2, Hold(sleep=0.05)),
        (True, 0.03, 0.12, 0.2, Hold(sleep=0.03)),
        (True, 0.03, 0.12, 0.01, Hold(sleep=0.01)),
        (True, 0.03, 0.15, 0.2, START),  # waited align already
        (True, 0.03, 0.12, 0.0, START),  # the hold is over: the batch starts all the same
        (True, 0.005, 0.1, 0.2, START),  # a commit just landed: aligned
        (False, 0.03, 0.1, 0.2, START),  # behind (the call came after the interval): at once
    ],
)
def test_a_gated_batch_waits_for_the_next_commit(
    gated: bool, newest_age: float, since_start: float, hold_left: float, step: Hold
) -> None:
    got = next_step(
        waiting=True,
        admitted_in=0.0,
        since_start=since_start,
        interval=0.1,
        hold_left=hold_left,
        gated=gated,
        newest_age=newest_age,
        align=0.05,
    )
    assert got.start == step.start and got.signal == step.signal
    assert got.sleep == pytest.approx(step.sleep)


def test_without_align_a_gated_batch_starts_with_the_interval() -> None:
    got = next_step(waiting=True, admitted_in=0.0, since_start=0.1, interval=0.1, hold_left=0.2, gated=True, newest_age=0.05)
    assert got == START


@pytest.mark.parametrize(
    ("admitted_in", "since_start", "hold_left", "step"),
    [
        # Waiting for company, due within this hold and one more: waited for here, even past the
        # hold (a give-up would cost Spark an ask for nothing).
        (0.12, INF, 0.1, Hold(sleep=0.12)),
        (0.05, INF, 0.0, Hold(sleep=0.05)),
        (0.05, 0.02, 0.0, Hold(sleep=0.08)),  # the interval is later than the admission
        # Due later than that: the hold's rules as before.
        (0.25, INF, 0.1, Hold(sleep=0.1)),
        (0.15, INF, 0.0, GIVE_UP),
    ],
)
def test_a_batch_due_within_one_more_hold_is_waited_for_in_this_call(
    admitted_in: float, since_start: float, hold_left: float, step: Hold
) -> None:
    got = next_step(waiting=True, admitted_in=admitted_in, since_start=since_start, interval=0.1, hold_left=hold_left, hold=0.1)
    assert got.start == step.start and got.signal == step.signal
    assert got.sleep == pytest.approx(step.sleep)
