"""Routing plan: subscription records → Spark SQL conditions (evaluated for real in tests/spark)."""

from __future__ import annotations

import dataclasses

import pytest

from sharedsub.model import SubscriptionState
from sharedsub.routing import NORMALISED_KEY_SQL, build_plan, condition, java_regex, sql_string
from sharedsub.selector import parse_selector, to_spark_sql
from tests.builders import subscription

# (value, Spark SQL literal): backslashes doubled, single quotes doubled, nothing else touched.
LITERALS = [
    ("orders", "'orders'"),
    ("", "''"),
    ("it's", "'it''s'"),
    ("''", "''''''"),
    ("a\\b", "'a\\\\b'"),
    ("x\\", "'x\\\\'"),
    ("\\'", "'\\\\'''"),
    ("\\u0041", "'\\\\u0041'"),
    ("a\nb", "'a\nb'"),
    ("é😀%_", "'é😀%_'"),
]


@pytest.mark.parametrize(("value", "literal"), LITERALS)
def test_sql_string(value: str, literal: str) -> None:
    assert sql_string(value) == literal


KEY = NORMALISED_KEY_SQL


def _sql(selector: str) -> str:
    parsed = parse_selector(selector)
    assert parsed is not None
    return to_spark_sql(parsed)


ANY = "[^.]*"
BASE = "(`topic` = 't') AND (`seq` >= 0)"
# (record overrides, expected condition)
CONDITIONS = [
    ({"topic": "t"}, BASE),
    ({"topic": "t", "binding": "#.#"}, BASE),
    ({"topic": "t", "start_seq": 42}, "(`topic` = 't') AND (`seq` >= 42)"),
    ({"topic": "t", "binding": "a.*"}, f"{BASE} AND ({KEY} RLIKE '^\\\\.a\\\\.{ANY}\\\\z')"),
    ({"topic": "t", "binding": "a.#"}, f"{BASE} AND ({KEY} RLIKE '^\\\\.a(\\\\.{ANY})*\\\\z')"),
    ({"topic": "t", "binding": "it's"}, f"{BASE} AND ({KEY} RLIKE '^\\\\.it''s\\\\z')"),
    (
        {"topic": "o'k", "no_local": True, "namespace": "c'1\\"},
        "(`topic` = 'o''k') AND (`seq` >= 0) AND (`publisher` IS DISTINCT FROM 'c''1\\\\')",
    ),
    ({"topic": "t", "selector": "JMSType = 'a'"}, f"{BASE} AND ((`subject` = 'a'))"),
    ({"topic": "t", "selector": "JMSPriority > 4 OR TRUE"}, f"{BASE} AND ({_sql('JMSPriority > 4 OR TRUE')})"),
    ({"topic": "t", "selector": "   "}, BASE),
    ({"topic": "t", "selector": "-- nothing but a comment"}, BASE),
    (
        {"topic": "t", "binding": "a.*", "no_local": True, "selector": "x IS NULL"},
        f"{BASE} AND ({KEY} RLIKE '^\\\\.a\\\\.{ANY}\\\\z') AND (`publisher` IS DISTINCT FROM 'container-1') "
        f"AND ({_sql('x IS NULL')})",
    ),
]


@pytest.mark.parametrize(("overrides", "expected"), CONDITIONS)
def test_condition(overrides: dict[str, object], expected: str) -> None:
    topic = str(overrides.pop("topic"))
    assert condition(subscription(topic, **overrides)) == expected  # type: ignore[arg-type]


def test_normalised_key_sql_strips_trailing_dots_at_the_very_end() -> None:
    assert KEY == "concat('.', regexp_replace(coalesce(`routing_key`, ''), '\\\\.+\\\\z', ''))"


@pytest.mark.parametrize(
    ("pattern", "regex"),
    [("#", "^(\\.[^.]*)*\\z"), ("a.*", "^\\.a\\.[^.]*\\z"), ("a$", "^\\.a\\$\\z"), ("", "^\\.\\z")],
)
def test_java_regex_anchors_at_the_very_end(pattern: str, regex: str) -> None:
    assert java_regex(pattern) == regex


def test_build_plan_routes_selectors_and_skips_invalid_ones_and_inactive_records() -> None:
    a = subscription("t", name="a")
    sel = subscription("t", name="sel", selector="color = 'red'")
    bad = subscription("t", name="bad", selector="color = ")
    gone = dataclasses.replace(subscription("t", name="gone"), state=SubscriptionState.DELETED)
    b = subscription("u", name="b", binding="x.*")
    plan = build_plan([a, sel, bad, gone, b])
    assert [(r.index, r.record) for r in plan.routes] == [(0, a), (1, sel), (2, b)]
    assert plan.routes[1].condition == f"{BASE} AND ({_sql(sel.selector or '')})"
    assert [s.record for s in plan.skipped] == [bad]
    reason = plan.skipped[0].reason
    assert bad.key in reason and "invalid JMS selector" in reason and "position 9" in reason
    assert plan.topics == frozenset({"t", "u"})


def test_route_expression_lists_every_route_by_index() -> None:
    plan = build_plan([subscription("t", name="a"), subscription("u", name="b")])
    c0, c1 = (r.condition for r in plan.routes)
    assert plan.route_expression() == (
        f"filter(array(CASE WHEN {c0} THEN 0 END, CASE WHEN {c1} THEN 1 END), _route -> _route IS NOT NULL)"
    )


def test_empty_plan_has_no_expression() -> None:
    plan = build_plan([])
    assert plan.routes == () and plan.topics == frozenset()
    with pytest.raises(ValueError):
        plan.route_expression()
