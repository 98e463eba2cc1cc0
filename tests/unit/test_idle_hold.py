"""sharedsub.core.fanout.idle_hold as a table: how long the source, on the trigger grid, holds an
ask that found nothing once traffic has stopped."""

from __future__ import annotations

import pytest

from sharedsub.core.fanout.idle_hold import QUIET, idle_wait


@pytest.mark.parametrize(
    ("waiting", "listening", "quiet_for", "hold", "wait", "why"),
    [
        (False, True, QUIET, 0.5, 0.5, "nothing found for a while: held until a signal, at most the hold"),
        (False, True, 3600.0, 0.5, 0.5, "an idle service: one ask per hold"),
        (True, True, 3600.0, 0.5, 0.0, "commits wait (for company, or the next tick): the grid's"),
        (False, True, QUIET - 0.01, 0.5, 0.0, "traffic stopped only just: the grid's cadence"),
        (False, False, 3600.0, 0.5, 0.0, "no signal reaches this source: holding would only sleep"),
        (False, True, 3600.0, 0.0, 0.0, "idle_hold = 0: off"),
    ],
)
def test_idle_wait(waiting: bool, listening: bool, quiet_for: float, hold: float, wait: float, why: str) -> None:
    assert idle_wait(waiting=waiting, listening=listening, quiet_for=quiet_for, hold=hold) == wait, why
