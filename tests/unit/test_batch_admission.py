"""sharedsub.core.fanout.batch_admission as a table: when waiting commits start a micro-batch."""

from __future__ import annotations

import pytest

from sharedsub.core.fanout.batch_admission import admitted_in


@pytest.mark.parametrize(
    ("rows", "waited", "min_rows", "max_wait", "starts"),
    [
        (1, 0.0, 100, 0.0, True),  # waiting off: at once
        (None, 0.0, 100, 0.2, True),  # a commit that does not say its rows: at once, as before
        (100, 0.0, 100, 0.2, True),  # enough rows: at once
        (250, 0.01, 100, 0.2, True),
        (99, 0.0, 100, 0.2, False),  # a few rows, just committed: wait for company
        (5, 0.19, 100, 0.2, False),
        (5, 0.2, 100, 0.2, True),  # waited long enough
        (5, 3.0, 100, 0.2, True),
        (0, 0.05, 100, 0.2, False),  # a commit without rows (a topic's creation) waits too
        (0, 0.2, 100, 0.2, True),
        (1, 0.0, 1, 0.2, True),  # min_rows 1: never waits for rows
    ],
)
def test_starts_now(rows: int | None, waited: float, min_rows: int, max_wait: float, starts: bool) -> None:
    # The module docstring's table: a batch starts now when nothing is left to wait.
    assert (admitted_in(rows=rows, waited=waited, min_rows=min_rows, max_wait=max_wait) <= 0) is starts


@pytest.mark.parametrize(
    ("rows", "waited", "min_rows", "max_wait", "seconds"),
    [
        (1, 0.0, 100, 0.0, 0.0),  # waiting off
        (None, 0.0, 100, 0.2, 0.0),  # rows unknown
        (100, 0.0, 100, 0.2, 0.0),  # enough rows
        (5, 0.05, 100, 0.2, 0.15),  # the oldest has 0.15 s to go
        (5, 0.2, 100, 0.2, 0.0),
        (5, 3.0, 100, 0.2, 0.0),  # never negative
    ],
)
def test_admitted_in(rows: int | None, waited: float, min_rows: int, max_wait: float, seconds: float) -> None:
    got = admitted_in(rows=rows, waited=waited, min_rows=min_rows, max_wait=max_wait)
    assert got == pytest.approx(seconds)
