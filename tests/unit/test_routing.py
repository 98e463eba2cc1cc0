"""Routing: the Arrow plan the fan-out routes with, and each subscription's Spark SQL condition.

The SQL conditions are evaluated for real in tests/spark; the plan's routing runs here on Arrow
batches, checked against the pure rules (binding.matches, selector.evaluate)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa
import pytest

from sharedsub.core.fanout.binding import matches
from sharedsub.core.fanout.routing import (
    NORMALISED_KEY_SQL,
    ROUTE_COLUMN,
    build_plan,
    condition,
    java_regex,
    plan_for,
    sql_string,
)
from sharedsub.core.model import SubscriptionRecord, SubscriptionState
from sharedsub.core.selector import evaluate, parse_selector, to_spark_sql
from sharedsub.storage import schemas
from tests.builders import subscription
from tests.unit.test_binding import CASES

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
    assert [r.selector.text if r.selector else None for r in plan.routes] == [None, "color = 'red'", None]
    assert [s.record for s in plan.skipped] == [bad]
    reason = plan.skipped[0].reason
    assert bad.key in reason and "invalid JMS selector" in reason and "position 9" in reason
    assert plan.topics == frozenset({"t", "u"})


def test_identical_selectors_share_one_compilation_and_plans_are_remembered() -> None:
    records = (subscription("t", name="a", selector="x > 1"), subscription("t", name="b", selector="x > 1"))
    plan = build_plan(records)
    assert plan.routes[0].selector is plan.routes[1].selector
    assert plan_for(records) is plan_for(tuple(records))


def test_empty_plan_routes_nothing() -> None:
    plan = build_plan([])
    assert plan.routes == () and plan.topics == frozenset()
    out = plan.route(_batch([_row(0)]), COLUMNS)
    assert out.num_rows == 0 and out.schema.names == [*COLUMNS, ROUTE_COLUMN]


# -- routing Arrow batches ---------------------------------------------------------------------------

COLUMNS = ("topic", "seq", "routing_key")


def _row(seq: int, topic: str = "t", **columns: Any) -> dict[str, Any]:
    return {"topic": topic, "seq": seq, **columns}


def _batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    schema = pa.schema([pa.field("topic", pa.string()), *[f for f in schemas.TOPIC if f.name != "message"]])
    return pa.RecordBatch.from_pylist(rows, schema=schema)


def _routed(plan_records: list[SubscriptionRecord], rows: list[dict[str, Any]]) -> set[tuple[str, int]]:
    """(subscription name, seq) of every routed row."""
    plan = build_plan(plan_records)
    out = plan.route(_batch(rows), COLUMNS).to_pylist()
    return {(plan.routes[r[ROUTE_COLUMN]].record.identity.name, r["seq"]) for r in out}


def test_route_applies_topic_start_seq_binding_and_no_local() -> None:
    records = [
        subscription("t", name="all"),
        subscription("t", name="late", start_seq=2),
        subscription("t", name="a-star", binding="a.*"),
        subscription("t", name="remote", no_local=True, namespace="me"),
        subscription("u", name="other-topic"),
    ]
    rows = [
        _row(0, routing_key="a.b", publisher="me"),
        _row(1, routing_key="a", publisher=None),
        _row(2, routing_key=None, publisher="you"),
        _row(3, routing_key="a.c", publisher="you"),
        _row(0, topic="u", routing_key="z"),
    ]
    assert _routed(records, rows) == {
        ("all", 0), ("all", 1), ("all", 2), ("all", 3),
        ("late", 2), ("late", 3),
        ("a-star", 0), ("a-star", 3),
        ("remote", 1), ("remote", 2), ("remote", 3),
        ("other-topic", 0),
    }  # fmt: skip


def test_route_output_is_grouped_by_route_in_batch_order() -> None:
    plan = build_plan(
        [subscription("t", name="x", start_seq=1), subscription("t", name="y", selector="n > 1"), subscription("u")]
    )
    rows = [_row(i, application_properties=[("n", {"type": "int", "long": i})]) for i in range(4)]
    positions, indexes = plan.matches(_batch(rows))
    assert list(zip(positions.to_pylist(), indexes.to_pylist(), strict=True)) == [(1, 0), (2, 0), (3, 0), (2, 1), (3, 1)]
    out = plan.route(_batch(rows), COLUMNS)
    assert out.column("seq").to_pylist() == [1, 2, 3, 2, 3]
    assert out.column(ROUTE_COLUMN).to_pylist() == [0, 0, 0, 1, 1]
    assert out.column("topic").to_pylist() == ["t"] * 5


PATTERNS = sorted({p for p, _, _ in CASES})
KEYS = sorted({k for _, k, _ in CASES} | {"", ".", "a..b", "it's", "back\\slash", "a.b.c.d.e", "a\n", "a.\n"})


def test_every_binding_pattern_routes_every_key_as_binding_matches() -> None:
    records = [subscription("t", binding=p, name=f"p{i}") for i, p in enumerate(PATTERNS)]
    rows = [_row(i, routing_key=k) for i, k in enumerate(KEYS)] + [_row(len(KEYS), routing_key=None)]
    got = _routed(records, rows)
    for i, pattern in enumerate(PATTERNS):
        for seq, key in enumerate([*KEYS, None]):
            assert ((f"p{i}", seq) in got) is matches(pattern, key or ""), (pattern, key)
    for pattern, key, expected in CASES:  # the table's own expectations
        assert ((f"p{PATTERNS.index(pattern)}", KEYS.index(key)) in got) is expected, (pattern, key)


def test_selector_routes_exactly_the_rows_the_reference_evaluator_matches() -> None:
    selectors = ["n > 1", "n > 1 OR s LIKE 'a%'", "NOT (s = 'ab')", "JMSPriority >= 5", "n / 0 IS NULL"]
    records = [subscription("t", name=f"s{i}", selector=text) for i, text in enumerate(selectors)]
    rows = [
        _row(0, application_properties=[("n", {"type": "long", "long": 2}), ("s", {"type": "string", "string": "ab"})]),
        _row(1, application_properties=[("n", {"type": "string", "string": "2"})], priority=7),
        _row(2, application_properties=None, priority=None),
        _row(3, application_properties=[("s", {"type": "symbol", "string": "ax"})]),
    ]
    got = _routed(records, rows)
    plain = _batch(rows).to_pylist()
    for i, text in enumerate(selectors):
        parsed = parse_selector(text)
        assert parsed is not None
        for row in plain:
            assert ((f"s{i}", row["seq"]) in got) is (evaluate(parsed, row) is True), (text, row["seq"])


# -- partitions: each starts where the subscription was saved ------------------------------------

P1 = 1 << 40  # the first seq of partition 1 (sharedsub.core.layout.partition_seq_base)
P2 = 2 << 40

# (start_seq, start_seqs, seq, routed): a record saved in partition 0 at seq 5 knowing partition
# 1 at P1 + 7; partition 2 had no table then, so all of it is newer.
PARTITION_STARTS = [
    (5, ((1, P1 + 7),), 4, False),
    (5, ((1, P1 + 7),), 5, True),
    (5, ((1, P1 + 7),), P1 + 6, False),
    (5, ((1, P1 + 7),), P1 + 7, True),
    (5, ((1, P1 + 7),), P2, True),
    # saved by the front end of partition 1, which knew partition 0 at 3
    (P1 + 2, ((0, 3),), 2, False),
    (P1 + 2, ((0, 3),), 3, True),
    (P1 + 2, ((0, 3),), P1 + 1, False),
    (P1 + 2, ((0, 3),), P1 + 2, True),
    (P1 + 2, ((0, 3),), P2 + 1, True),
    # a single front end's record: partition 0 only
    (9, (), 8, False),
    (9, (), 9, True),
    (9, (), P1, True),
]


@pytest.mark.parametrize(("start_seq", "start_seqs", "seq", "routed"), PARTITION_STARTS)
def test_a_subscription_starts_in_each_partition_where_it_was_saved(
    start_seq: int, start_seqs: tuple[tuple[int, int], ...], seq: int, routed: bool
) -> None:
    record = dataclasses.replace(subscription("t", name="s", start_seq=start_seq), start_seqs=start_seqs)
    assert (record.start_in(seq >> 40) <= seq) is routed
    assert _routed([record], [_row(seq)]) == ({("s", seq)} if routed else set())


def test_rows_of_several_partitions_in_one_batch_route_by_each_partition_start() -> None:
    record = dataclasses.replace(subscription("t", name="s", start_seq=P1 + 2), start_seqs=((0, 3),))
    plain = subscription("t", name="plain", start_seq=1)
    seqs = [0, 3, P1, P1 + 1, P1 + 2, 1, 4, P1 + 5, P2]
    got = _routed([record, plain], [_row(s) for s in seqs])
    assert got == {("s", s) for s in (3, P1 + 2, 4, P1 + 5, P2)} | {("plain", s) for s in seqs if s >= 1}


def test_partition_starts_as_spark_sql() -> None:
    record = dataclasses.replace(subscription("t", start_seq=P1 + 2), start_seqs=((0, 3),))
    part = "shiftright(`seq`, 40)"
    assert condition(record) == (
        f"(`topic` = 't') AND (({part} = 1 AND `seq` >= {P1 + 2}) OR ({part} = 0 AND `seq` >= 3) "
        f"OR {part} NOT IN (1, 0))"
    )


def test_start_seqs_survive_the_catalog_row() -> None:
    record = dataclasses.replace(subscription("t", start_seq=P1 + 2), start_seqs=((0, 3), (2, P2)))
    row = record.to_row()
    assert row["start_seqs"] == '{"0": 3, "2": 2199023255552}'
    assert SubscriptionRecord.from_row(row) == record
    plain = subscription("t")
    assert plain.to_row()["start_seqs"] is None
    assert SubscriptionRecord.from_row({**plain.to_row(), "start_seqs": None}) == plain
    older = {k: v for k, v in plain.to_row().items() if k != "start_seqs"}
    assert SubscriptionRecord.from_row(older) == plain
