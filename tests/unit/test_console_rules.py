"""The web console's pure parts as tables: who may read and do what
(sharedsub.core.ops.console_access), the chart samples (sharedsub.core.ops.figure_series) and a
backlog page (sharedsub.core.ops.backlog_page)."""

from __future__ import annotations

import math

import pytest

from sharedsub.core.errors import ConfigError
from sharedsub.core.ops.backlog_page import pending_after, take_page
from sharedsub.core.ops.console_access import ConsoleAccess, Need, allowed, parse_access
from sharedsub.core.ops.figure_series import FigureSeries
from sharedsub.core.selector import parse_selector

R, T, OFF = ConsoleAccess.READ_ONLY, ConsoleAccess.TOKEN, ConsoleAccess.OFF


@pytest.mark.parametrize(
    ("access", "need", "authorized", "answered"),
    [
        (R, Need.PAGE, False, True),
        (R, Need.FIGURES, False, True),  # what /metrics shows anyway
        (R, Need.CONTENTS, False, False),  # message contents: the token
        (R, Need.ACTION, False, False),
        (R, Need.CONTENTS, True, True),
        (R, Need.ACTION, True, True),
        (T, Need.PAGE, False, True),  # the page itself, which asks for the token
        (T, Need.FIGURES, False, False),
        (T, Need.CONTENTS, False, False),
        (T, Need.FIGURES, True, True),
        (T, Need.ACTION, True, True),
        (OFF, Need.PAGE, True, False),  # off is off, token or not
        (OFF, Need.FIGURES, True, False),
    ],
)
def test_who_may_read_and_do_what(access: ConsoleAccess, need: Need, authorized: bool, answered: bool) -> None:
    assert allowed(access, need, authorized) is answered


@pytest.mark.parametrize(("text", "access"), [("read-only", R), (" Token ", T), ("off", OFF)])
def test_the_setting_parses(text: str, access: ConsoleAccess) -> None:
    assert parse_access(text) is access


def test_an_unknown_setting_names_the_key_and_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"server\.console.*'read-only', 'token', 'off'.*'open'"):
        parse_access("open")


# ---------------------------------------------------------------- figure series


def test_samples_come_back_oldest_first_and_gaps_are_left_out() -> None:
    series = FigureSeries(window_s=30, interval_s=10)  # 4 samples kept
    series.add(0, {"a": 1})
    series.add(10, {"a": 2, "b": 7})
    series.add(20, {"b": 8})
    assert series.points("a") == [(0, 1), (10, 2)]
    assert series.points("b") == [(10, 7), (20, 8)]
    assert series.points("unknown") == []


def test_the_window_keeps_its_capacity_and_drops_the_oldest() -> None:
    series = FigureSeries(window_s=20, interval_s=10)
    assert series.capacity == 3
    for t in range(6):
        series.add(t * 10.0, {"a": float(t)})
    assert series.points("a") == [(30, 3), (40, 4), (50, 5)]
    assert len(series) == 3


def test_a_figure_missing_for_a_whole_window_is_forgotten() -> None:
    series = FigureSeries(window_s=20, interval_s=10)
    series.add(0, {"gone": 1, "kept": 1})
    series.add(10, {"kept": 2})
    series.add(20, {"kept": 3})
    assert "gone" in series.names()  # its one sample is still in the window
    series.add(30, {"kept": 4})
    assert series.names() == ["kept"]


@pytest.mark.parametrize(
    ("samples", "rates"),
    [
        ([(0, 0), (10, 50), (20, 150)], [(10, 5.0), (20, 10.0)]),
        ([(0, 100), (10, 30)], [(10, 3.0)]),  # the counter went down: its process restarted, counted from 0
        ([(0, 5), (10, None), (20, 9)], []),  # a gap on either side: no rate
        ([(0, 5)], []),
    ],
)
def test_counters_become_rates_per_second(samples: list[tuple[float, float | None]], rates: list[tuple[float, float]]) -> None:
    series = FigureSeries(window_s=100, interval_s=10)
    for at, value in samples:
        series.add(at, {} if value is None else {"c": value})
    assert series.rates("c") == rates
    assert series.latest_rate("c") == (rates[-1][1] if rates and rates[-1][0] == samples[-1][0] else 0.0)


def test_a_window_shorter_than_an_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one interval"):
        FigureSeries(window_s=1, interval_s=5)
    assert math.isfinite(FigureSeries(window_s=5, interval_s=5).capacity)


# ---------------------------------------------------------------- backlog page


@pytest.mark.parametrize(
    ("routed", "settled", "after", "pending"),
    [
        ([3, 1, 2, 2], set(), None, [1, 2, 3]),
        ([1, 2, 3, 4], {2, 4}, None, [1, 3]),
        ([1, 2, 3, 4], {2}, 1, [3, 4]),
        ([1, 2], {1, 2}, None, []),
    ],
)
def test_pending_is_routed_minus_settled_above_the_cursor(
    routed: list[int], settled: set[int], after: int | None, pending: list[int]
) -> None:
    assert pending_after(routed, settled, after) == pending


def _rows(*colors: str) -> list[dict[str, object]]:
    def prop(color: str) -> list[tuple[str, dict[str, object]]]:
        return [("color", {"type": "string", "string": color})]

    return [{"seq": i + 1, "application_properties": prop(c)} for i, c in enumerate(colors)]


RED = parse_selector("color = 'red'")


@pytest.mark.parametrize(
    ("colors", "selector", "limit", "max_scan", "more_after", "seqs", "next_after", "scanned"),
    [
        (["red", "blue", "red"], None, 5, 100, False, [1, 2, 3], None, 3),  # all of it, last page
        (["red", "blue", "red", "red"], RED, 2, 100, False, [1, 3], 3, 4),  # a 3rd match proves a next page
        (["red", "blue", "red"], RED, 2, 100, False, [1, 3], None, 3),  # exactly full, nothing after
        (["red", "blue", "red"], RED, 2, 100, True, [1, 3], 3, 3),  # full, unread seqs remain
        (["blue", "blue", "red"], RED, 2, 100, True, [3], 3, 3),  # not full, unread seqs remain: go on after 3
        (["blue", "blue", "blue", "red"], RED, 2, 2, False, [], 2, 2),  # the scan bound: on after the last looked at
        (["red", "blue", "blue", "red"], RED, 5, 3, False, [1], 3, 3),
        ([], RED, 2, 100, False, [], None, 0),
    ],
)
def test_a_page_of_the_backlog(
    colors: list[str], selector: object, limit: int, max_scan: int, more_after: bool,
    seqs: list[int], next_after: int | None, scanned: int,
) -> None:
    page = take_page(_rows(*colors), selector, limit, max_scan, more_after)  # type: ignore[arg-type]
    assert ([r["seq"] for r in page.rows], page.next_after, page.scanned) == (seqs, next_after, scanned)


def test_rates_of_one_figure_counted_by_several_members_add_up_and_a_member_that_goes_leaves_no_dip() -> None:
    series = FigureSeries(window_s=100, interval_s=10)
    series.add(0, {"p@0": 0, "p@1": 0})
    series.add(10, {"p@0": 10, "p@1": 40})
    series.add(20, {"p@0": 30})  # member 1 is gone: no value, no rate, no negative spike
    series.add(30, {"p@0": 60, "p@1": 5})  # it came back, counting from 0 again
    assert series.summed_rates(["p@0", "p@1"]) == [(10, 5.0), (20, 2.0), (30, 3.0)]
