"""sharedsub.core.fanout.batch_summary as a table: which routing batches give an INFO line, and what it says."""

from __future__ import annotations

import pytest

from sharedsub.core.fanout.batch_summary import Line, Summary

# (time the batch ended, messages, rows committed, its seconds) -> the line due then, if any.
Batch = tuple[float, int, int, float]


@pytest.mark.parametrize(
    ("batches", "lines"),
    [
        # The first batch is logged whole by the caller: no summary line for it.
        ([(0.0, 5, 5, 0.01)], [None]),
        # Then nothing until the interval has passed since the first; then the batches since it.
        (
            [(0.0, 5, 5, 0.01), (30.0, 10, 20, 0.02), (59.9, 10, 20, 0.05), (60.0, 1, 2, 0.03)],
            [None, None, None, Line(batches=3, seconds=60.0, messages=21, committed=42, slowest=0.05)],
        ),
        # The next line counts from the last one, not from the first batch.
        (
            [(0.0, 1, 1, 0.01), (61.0, 2, 2, 0.01), (100.0, 3, 6, 0.2), (121.0, 4, 8, 0.1)],
            [None, Line(1, 61.0, 2, 2, 0.01), None, Line(2, 60.0, 7, 14, 0.2)],
        ),
        # A batch long after the last line (traffic paused): one line for it alone.
        ([(0.0, 1, 1, 0.01), (3600.0, 7, 7, 0.004)], [None, Line(1, 3600.0, 7, 7, 0.004)]),
    ],
)
def test_summary_lines(batches: list[Batch], lines: list[Line | None]) -> None:
    summary = Summary(interval=60.0)
    assert summary.first()
    assert [summary.add(*batch) for batch in batches] == lines
    assert not summary.first()
