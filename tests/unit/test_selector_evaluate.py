"""JMS selector semantics in the reference evaluator, and the pure parts of the Spark SQL back end.

The corpus (tests/spark/selector_corpus.py, plain data) is checked here against the evaluator;
tests/spark/test_selector_parity.py checks the same corpus against Spark.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any

import pyarrow as pa
import pytest

from sharedsub.core.fanout import routing
from sharedsub.core.selector import ast, evaluate, parse_selector, sparksql, to_spark_sql
from sharedsub.core.selector.evaluate import HEADERS as EVALUATOR_HEADERS
from sharedsub.core.selector.evaluate import OPAQUE, arithmetic, compare, like, property_value
from sharedsub.storage import schemas
from tests.spark.selector_corpus import CORPUS, LONG_MAX, LONG_MIN, msg, typed


def run(selector: str, row: dict[str, Any]) -> bool | None:
    parsed = parse_selector(selector)
    assert parsed is not None
    return evaluate(parsed, row)


def test_corpus_is_large_and_covers_every_operator() -> None:
    assert len(CORPUS) >= 300
    text = " ".join(c.selector.upper() for c in CORPUS)
    for token in ["=", "<>", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", " AND ", " OR ", "NOT ", "BETWEEN", " IN ",
                  "LIKE", "ESCAPE", "IS NULL", "IS NOT NULL", "0X", "L ", "E", '"', "--", "/*"]:
        assert token in text, token
    assert {c.expected for c in CORPUS} == {True, False, None}


def test_corpus_expectations_hold_in_python() -> None:
    rows = pa.Table.from_pylist([c.message for c in CORPUS], schema=schemas.TOPIC).to_pylist()
    wrong = [
        (c.selector, c.expected, got)
        for c, row in zip(CORPUS, rows, strict=True)
        if (got := run(c.selector, row)) is not c.expected
    ]
    assert not wrong, wrong


# -- values --------------------------------------------------------------------------------------


def test_properties_may_be_a_dict_or_pairs_and_the_first_of_a_name_wins() -> None:
    assert property_value({"application_properties": {"x": typed("long", long=1)}}, "x") == 1
    pairs = [("x", typed("long", long=1)), ("x", typed("long", long=2))]
    assert property_value({"application_properties": pairs}, "x") == 1
    assert property_value({"application_properties": None}, "x") is None
    assert property_value({}, "x") is None


@pytest.mark.parametrize(
    ("value", "decoded"),
    [
        (typed("long", long=5), 5),
        (typed("ulong", double=1.8e19), 1.8e19),
        (typed("double", double=2.5), 2.5),
        (typed("float", double=2.5), 2.5),
        (typed("double", double=math.nan), OPAQUE),
        (typed("double", double=math.inf), math.inf),
        (typed("string", string="s"), "s"),
        (typed("symbol", string="s"), "s"),
        (typed("char", string="s"), "s"),
        (typed("boolean", bool=False), False),
        (typed("null"), None),
        (typed(None), None),
        (typed("binary", string="ab"), OPAQUE),
        (typed("uuid", string="u"), OPAQUE),
        (typed("int"), OPAQUE),
        (typed("string"), OPAQUE),
        (typed("boolean"), OPAQUE),
    ],
)
def test_property_decoding(value: dict[str, Any], decoded: Any) -> None:
    got = property_value({"application_properties": [("x", value)]}, "x")
    assert got is decoded or (type(got) is type(decoded) and got == decoded)


def test_headers_are_the_same_in_every_layer() -> None:
    assert set(EVALUATOR_HEADERS) == set(ast.HEADER_TYPES) == set(sparksql.HEADERS)


@pytest.mark.parametrize(
    ("op", "a", "b", "result"),
    [
        ("+", 1, 2, 3),
        ("+", LONG_MAX, 1, 2.0**63),  # does not fit a long: computed in double
        ("-", LONG_MIN, 1, -(2.0**63)),
        ("*", 2**32, 2**31, 2.0**63),
        ("+", LONG_MAX - 1, 1, LONG_MAX),
        ("*", -(2**32), 2**31, LONG_MIN),
        ("/", 7, 2, 3),
        ("/", -7, 2, -3),
        ("/", 7, -2, -3),
        ("/", LONG_MIN, -1, 2.0**63),
        ("/", -(2**62), -1, 2**62),
        ("/", 1, 0, None),
        ("%", -7, 2, -1),
        ("%", 7, -2, 1),
        ("%", LONG_MIN, -1, 0),
        ("%", 1, 0, None),
        ("+", 1, 0.5, 1.5),
        ("/", 1.0, 0.0, None),
        ("/", 1.0, -0.0, None),
        ("%", -7.5, 2, -1.5),
        ("%", math.inf, 2, None),
        ("%", 5, math.inf, 5.0),
        ("-", math.inf, math.inf, None),
        ("*", 1e308, 10, math.inf),
        ("+", "a", 1, None),
        ("+", True, 1, None),
        ("+", None, 1, None),
        ("+", OPAQUE, 1, None),
    ],
)
def test_arithmetic(op: str, a: Any, b: Any, result: Any) -> None:
    got = arithmetic(op, a, b)
    assert got == result and type(got) is type(result)


@pytest.mark.parametrize(
    ("op", "a", "b", "result"),
    [
        ("=", 1, 1.0, True),
        ("=", LONG_MAX, LONG_MAX - 1, False),
        ("=", LONG_MAX, float(LONG_MAX - 1), True),  # a long meets a double as a double (Java)
        ("<", LONG_MAX - 1, LONG_MAX, True),
        ("=", "a", "a", True),
        ("<>", "a", "b", True),
        ("<", "a", "b", None),
        ("=", True, True, True),
        ("<", False, True, None),
        ("=", True, 1, None),
        ("=", "1", 1, None),
        ("=", None, None, None),
        ("=", OPAQUE, OPAQUE, None),
        ("<>", OPAQUE, 1, None),
        ("=", -0.0, 0, True),
    ],
)
def test_compare(op: str, a: Any, b: Any, result: bool | None) -> None:
    assert compare(op, a, b) is result


# -- LIKE ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "pattern", "escape", "result"),
    [
        ("abc", "abc", None, True),
        ("abc", "ab", None, False),
        ("abc", "a%", None, True),
        ("abc", "%c", None, True),
        ("abc", "%b%", None, True),
        ("abc", "a_c", None, True),
        ("abc", "a__c", None, False),
        ("", "", None, True),
        ("", "%", None, True),
        ("", "_", None, False),
        ("a%", "a!%", "!", True),
        ("ab", "a!%", "!", False),
        ("a_", "a!_", "!", True),
        ("ab", "a!_", "!", False),
        ("a!", "a!!", "!", True),
        ("ax", "a!x", "!", True),
        ("a%b", "a%%b", "%", True),
        ("axb", "a%%b", "%", False),
        ("a\nb", "a_b", None, True),
        ("a\nb", "a%", None, True),
        ("😀", "_", None, True),
        ("日本語", "日_語", None, True),
        ("mississippi", "%iss%ppi", None, True),
        ("mississippi", "%iss%ppx", None, False),
        ("aaa", "%a%a%a%", None, True),
        ("aa", "%a%a%a%", None, False),
        ("a.c", "a.c", None, True),
        ("abc", "a.c", None, False),
        ("a\\c", "a\\c", None, True),
    ],
)
def test_like(value: str, pattern: str, escape: str | None, result: bool) -> None:
    assert like(value, pattern, escape) is result
    regex = sparksql.like_regex(pattern, escape)
    # The Spark regex, read by Python's engine (same syntax for these constructs but \x{...} and \z).
    py = regex.replace("\\z", "\\Z")
    py = re.sub(r"\\x\{([0-9A-F]+)\}", lambda m: re.escape(chr(int(m.group(1), 16))), py)
    assert (re.search(py, value) is not None) is result


def test_like_is_linear_on_pathological_patterns() -> None:
    started = time.monotonic()
    assert like("a" * 20_000, "%a%a%a%a%a%a%b", None) is False
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize(
    ("pattern", "escape", "regex"),
    [
        ("abc", None, "(?s)\\Aabc\\z"),
        ("a%b_c", None, "(?s)\\Aa.*b.c\\z"),
        ("%%%", None, "(?s)\\A.*\\z"),
        ("a.b", None, "(?s)\\Aa\\x{2E}b\\z"),
        ("a!%", "!", "(?s)\\Aa\\x{25}\\z"),
        ("\\", None, "(?s)\\A\\x{5C}\\z"),
        ("é😀", None, "(?s)\\A\\x{E9}\\x{1F600}\\z"),
        ("\\Q", None, "(?s)\\A\\x{5C}Q\\z"),
    ],
)
def test_like_regex(pattern: str, escape: str | None, regex: str) -> None:
    assert sparksql.like_regex(pattern, escape) == regex


# -- Spark SQL text (pure checks; tests/spark runs it) ---------------------------------------------


def outside_literals(sql: str) -> str:
    return re.sub(r"'(?:[^'\\]|''|\\.)*'|`[^`]*`", "", sql)


def test_compiled_sql_has_no_comment_markers_outside_literals() -> None:
    for text in {c.selector for c in CORPUS}:
        parsed = parse_selector(text)
        assert parsed is not None
        rest = outside_literals(to_spark_sql(parsed))
        assert "--" not in rest and "/*" not in rest, text


def test_sql_string_is_the_routing_one() -> None:
    assert routing.sql_string is sparksql.sql_string


@pytest.mark.parametrize(
    ("selector", "sql"),
    [
        ("TRUE", "TRUE"),
        ("1 < 2.5", "(1.0D < 2.5D)"),
        ("-9223372036854775808 = 0", "((-9223372036854775808L) = 0L)"),
        ("JMSType = 'it''s\\'", "(`subject` = 'it''s\\\\')"),
        ("JMSType IN ('a', 'b')", "(`subject` IN ('a', 'b'))"),
        ("JMSType NOT LIKE 'a%'", "(NOT (`subject` RLIKE '(?s)\\\\Aa.*\\\\z'))"),
        ("JMSXGroupID IS NULL", "(NOT (`group_id` IS NOT NULL))"),
        ("JMSPriority > 4",
         "coalesce(CAST(coalesce(`priority`, 4) AS BIGINT) > 4L, "
         "CAST(CAST(coalesce(`priority`, 4) AS BIGINT) AS DOUBLE) > 4.0D)"),
        ("NOT (TRUE AND FALSE)", "(NOT (TRUE AND FALSE))"),
    ],
)
def test_sql_shapes(selector: str, sql: str) -> None:
    parsed = parse_selector(selector)
    assert parsed is not None
    assert to_spark_sql(parsed) == sql


def test_property_sql_reads_the_typed_struct_by_name() -> None:
    parsed = parse_selector("\"it's\" = 'x'")
    assert parsed is not None
    sql = to_spark_sql(parsed)
    assert sql == (
        "(CASE WHEN `application_properties`['it''s'].`type` IN ('char', 'string', 'symbol') "
        "THEN `application_properties`['it''s'].`string` END = 'x')"
    )


def test_header_columns_exist_in_the_topic_schema() -> None:
    sql = " ".join(v.long or v.string or "" for v in sparksql.HEADERS.values())
    assert set(re.findall(r"`([a-z_]+)`", sql)) <= set(schemas.ROUTING_COLUMNS)


def test_rows_need_only_routing_columns() -> None:
    row = {k: v for k, v in msg({"x": 1}, priority=7).items() if k in schemas.ROUTING_COLUMNS}
    assert run("x = 1 AND JMSPriority = 7", row) is True
