"""sharedsub.core.fanout.progress_asks: when the fan-out job's main loop asks its query for the
last progress report."""

from __future__ import annotations

import pytest

from sharedsub.core.fanout.progress_asks import ask_progress


@pytest.mark.parametrize(
    ("routing", "since_routed", "since_asked", "expected"),
    [
        (False, None, None, True),  # never asked
        (False, 5.0, None, True),
        (True, 30.0, 0.5, True),  # a batch is being routed
        (False, 0.1, 0.5, True),  # one just ended: its report comes a little later
        (False, 2.0, 0.5, True),
        (False, 2.1, 0.5, False),  # idle: every IDLE_ASK seconds only
        (False, None, 9.9, False),
        (False, None, 10.0, True),
        (False, 60.0, 10.0, True),
    ],
)
def test_the_report_is_asked_for_around_batches_and_seldom_otherwise(
    routing: bool, since_routed: float | None, since_asked: float | None, expected: bool
) -> None:
    assert ask_progress(routing=routing, since_routed=since_routed, since_asked=since_asked) is expected
