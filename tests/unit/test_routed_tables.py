"""The fan-out's announcement of the tables a batch wrote (sharedsub.core.fanout.routed_tables),
and how long a tailed table waits between probes (sharedsub.core.ops.poll_backoff), as tables."""

from __future__ import annotations

import pytest

from sharedsub.core.fanout.routed_tables import ROUTED_LINE, parse_routed, routed_line
from sharedsub.core.ops.poll_backoff import ANNOUNCED_IDLE, ANNOUNCED_PROBES_PER_SECOND, MAX_FEED_IDLE, feed_idle_interval


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (ROUTED_LINE, (True, None)),
        (f'{ROUTED_LINE} ["subscriptions/a/g1","subscriptions/b/g2"]', (True, frozenset({"subscriptions/a/g1", "subscriptions/b/g2"}))),  # noqa: E501
        (f"{ROUTED_LINE} []", (True, frozenset())),
        (f"{ROUTED_LINE} [broken", (True, None)),
        (f'{ROUTED_LINE} {{"a": 1}}', (True, None)),
        (f"{ROUTED_LINE} [1, 2]", (True, None)),
        ("sharedsub fanout running", (False, None)),
        (f"{ROUTED_LINE}x", (False, None)),
        ("", (False, None)),
    ],
)
def test_a_routed_line_names_its_tables_or_any(line: str, expected: tuple[bool, frozenset[str] | None]) -> None:
    assert parse_routed(line) == expected


def test_a_line_made_for_tables_reads_back_as_those_tables() -> None:
    tables = ["subscriptions/durable~c~s 1~ab/g1", 'subscriptions/q"uote/g2', "subscriptions/a/g1", "subscriptions/a/g1"]
    line = routed_line(tables)
    assert "\n" not in line
    assert parse_routed(line) == (True, frozenset(tables))


@pytest.mark.parametrize(
    ("feeds", "base", "idle", "expected"),
    [
        (0, 0.005, 0.005, 0.005),
        (1, 0.005, 0.005, 0.005),
        (100, 0.005, 0.005, 0.1),
        (1_000, 0.005, 0.005, 1.0),
        (10_000, 0.005, 0.005, MAX_FEED_IDLE),
        (10_000, 0.1, 5.0, 5.0),
        (1, 0.1, 1.0, 1.0),
    ],
)
def test_a_tailed_table_waits_longer_the_more_tables_are_tailed(feeds: int, base: float, idle: float, expected: float) -> None:
    assert feed_idle_interval(feeds, base=base, idle=idle) == pytest.approx(expected)
    # With the fan-out's announcements the probes only find what none named: seldom.
    assert feed_idle_interval(feeds, base=base, idle=idle, announced=True) == pytest.approx(
        max(expected, ANNOUNCED_IDLE, feeds / ANNOUNCED_PROBES_PER_SECOND)
    )


@pytest.mark.parametrize(("feeds", "expected"), [(1, 60.0), (100, 200.0), (1_000, 2_000.0)])
def test_announced_tables_are_probed_at_most_half_a_time_a_second_in_all(feeds: int, expected: float) -> None:
    # (the safety net of serve's tailer on a bucket: 1,000 consumed subscriptions, 0.5 GET/s)
    assert feed_idle_interval(feeds, base=0.1, idle=1.0, announced=True) == pytest.approx(expected)
