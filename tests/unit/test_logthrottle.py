"""sharedsub.core.ops.logthrottle: which occurrences of a lasting fault are logged, over a fake clock."""

from __future__ import annotations

import logging

import pytest

from sharedsub.core.ops.logthrottle import FaultRule, Line, ThrottledLog

# (time, event on key "a" or "b", expected line or None). every = 60 s.
TIMELINE: list[tuple[float, str, Line | None]] = [
    (0.0, "clear a", None),  # never failed: nothing to say
    (1.0, "fail a", Line("start", 0, 1.0, 0.0)),
    (1.005, "fail a", None),
    (1.010, "fail a", None),
    (30.0, "fail b", Line("start", 0, 30.0, 0.0)),  # another key is throttled on its own
    (60.9, "fail a", None),  # 59.9 s after the last line of a
    (61.0, "fail a", Line("repeat", 3, 1.0, 60.0)),  # 3 not logged since the start line
    (62.0, "fail a", None),
    (100.0, "clear a", Line("clear", 1, 1.0, 99.0)),
    (100.5, "clear a", None),  # cleared once only
    (101.0, "fail a", Line("start", 0, 101.0, 0.0)),  # a new fault starts afresh
    (200.0, "fail a", Line("repeat", 0, 101.0, 99.0)),
    (200.0, "clear b", Line("clear", 0, 30.0, 170.0)),
]


def test_timeline() -> None:
    rule = FaultRule(every=60.0)
    for now, event, expected in TIMELINE:
        what, key = event.split()
        got = rule.occurred(key, now) if what == "fail" else rule.cleared(key, now)
        assert got == expected, (now, event)


def test_forget_drops_a_fault_without_a_line() -> None:
    rule = FaultRule(every=60.0)
    rule.occurred("t", 0.0)
    assert rule.failing("t")
    rule.forget("t")
    assert not rule.failing("t")
    assert rule.cleared("t", 1.0) is None


def test_throttled_log_writes_start_repeat_and_clear_lines(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    throttled = ThrottledLog(logging.getLogger("test.throttle"), every=300.0, clock=lambda: now[0])
    caplog.set_level(logging.INFO, logger="test.throttle")
    error = IsADirectoryError(21, "Is a directory")
    for _ in range(1000):  # a 5 ms poll for 5 s
        throttled.fault("tbl", "reading %s failed", "tbl", error=error)
        now[0] += 0.005
    now[0] = 301.0
    assert throttled.fault("tbl", "reading %s failed", "tbl", error=error)
    assert not throttled.fault("tbl", "reading %s failed", "tbl", error=error)
    assert throttled.clear("tbl", "reading %s works again", "tbl")
    assert not throttled.clear("tbl", "reading %s works again", "tbl")
    lines = [(r.levelname, r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert lines == [
        ("ERROR", "reading tbl failed", True),
        ("ERROR", "reading tbl failed (still failing after 301 s; 999 repeats not logged): "
         "IsADirectoryError: [Errno 21] Is a directory", False),
        ("INFO", "reading tbl works again (after 301 s; 1 repeats not logged)", False),
    ]
