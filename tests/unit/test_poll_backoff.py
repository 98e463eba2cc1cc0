"""The back-off of probes for new commits while nothing comes (sharedsub.core.ops.poll_backoff)."""

from __future__ import annotations

import pytest

from sharedsub.core.ops.poll_backoff import next_interval


@pytest.mark.parametrize(
    ("current", "found", "base", "idle", "expected"),
    [
        (0.1, False, 0.1, 1.0, 0.2),  # nothing: double
        (0.4, False, 0.1, 1.0, 0.8),
        (0.8, False, 0.1, 1.0, 1.0),  # up to the idle interval
        (1.0, False, 0.1, 1.0, 1.0),
        (1.0, True, 0.1, 1.0, 0.1),  # news: back to the base at once
        (0.005, False, 0.005, 0.005, 0.005),  # idle <= base (a local dir): never moves
        (0.0, False, 0.1, 1.0, 0.1),  # never below the base
    ],
)
def test_next_interval(current: float, found: bool, base: float, idle: float, expected: float) -> None:
    assert next_interval(current, found=found, base=base, idle=idle) == pytest.approx(expected)


def test_an_idle_spell_reaches_the_idle_interval_in_a_few_probes() -> None:
    interval, steps = 0.1, 0
    while interval < 1.0:
        interval, steps = next_interval(interval, found=False, base=0.1, idle=1.0), steps + 1
    assert steps == 4  # 0.2, 0.4, 0.8, 1.0: about 1.5 s of probes before the slow cadence
