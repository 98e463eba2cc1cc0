"""Selector parity: Spark SQL (sharedsub.selector.sparksql) agrees with the reference evaluator.

Every compiled selector is evaluated by Spark over every message in one ``select`` (one job per
ANSI setting), and compared with :func:`sharedsub.selector.evaluate` on the same rows as Arrow
hands them to Python, and with the corpus' hand-written expectations. Random selectors and
messages (hypothesis) are checked the same way, in a few batched jobs.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sharedsub.selector import ast, evaluate, parse_selector, to_spark_sql
from sharedsub.selector.parser import MAX_DEPTH, MAX_NESTING
from sharedsub.storage import schemas
from tests.spark.selector_corpus import CORPUS, LONG_MAX, LONG_MIN, msg, typed

pytestmark = pytest.mark.spark

ANSI = "spark.sql.ansi.enabled"


@contextlib.contextmanager
def ansi_mode(spark: SparkSession, enabled: str) -> Iterator[None]:
    """Run with ``spark.sql.ansi.enabled`` set to ``enabled``, then restore it."""
    before = spark.conf.get(ANSI)
    spark.conf.set(ANSI, enabled)
    try:
        yield
    finally:
        spark.conf.set(ANSI, before)


def _key(row: dict[str, Any]) -> str:
    return json.dumps(row, default=repr, sort_keys=True)


def spark_matrix(spark: SparkSession, selectors: Sequence[ast.Selector], rows: Sequence[dict[str, Any]]) -> list[list[Any]]:
    """``result[m][s]``: Spark's value of selector ``s`` on row ``m``, all in one job."""
    table = pa.Table.from_pylist(list(rows), schema=schemas.TOPIC)
    frame = spark.createDataFrame(table).withColumn("_m", F.monotonically_increasing_id())
    columns = [F.expr(to_spark_sql(s)).alias(f"s{i}") for i, s in enumerate(selectors)]
    collected = frame.select("_m", *columns).collect()
    by_row = sorted(collected, key=lambda r: r["_m"])  # ids grow with the input order
    return [[r[f"s{i}"] for i in range(len(selectors))] for r in by_row]


def python_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows as the evaluator gets them: through Arrow, like the fan-out's data."""
    return pa.Table.from_pylist(list(rows), schema=schemas.TOPIC).to_pylist()


def assert_parity(spark: SparkSession, selectors: Sequence[ast.Selector], rows: Sequence[dict[str, Any]]) -> list[list[Any]]:
    """Spark and Python agree on every (row, selector) pair; return Spark's matrix."""
    matrix = spark_matrix(spark, selectors, rows)
    plain = python_rows(rows)
    mismatches = [
        (sel.text, plain[m], matrix[m][s], evaluate(sel, plain[m]))
        for s, sel in enumerate(selectors)
        for m in range(len(rows))
        if matrix[m][s] is not evaluate(sel, plain[m])
    ]
    assert not mismatches, f"{len(mismatches)} disagreements, first: {mismatches[0]}"
    return matrix


@pytest.mark.parametrize("ansi", ["true", "false"])
def test_corpus_agrees_with_spark_and_expectations(spark: SparkSession, ansi: str) -> None:
    selectors: dict[str, ast.Selector] = {}
    rows: dict[str, dict[str, Any]] = {}
    for case in CORPUS:
        parsed = parse_selector(case.selector)
        assert parsed is not None, case.selector
        selectors.setdefault(case.selector, parsed)
        rows.setdefault(_key(case.message), case.message)
    sel_index = {text: i for i, text in enumerate(selectors)}
    row_index = {key: i for i, key in enumerate(rows)}

    # Every selector on every message: far more pairs than the corpus lists.
    with ansi_mode(spark, ansi):
        matrix = assert_parity(spark, list(selectors.values()), list(rows.values()))

    wrong = [
        (case.selector, case.expected, got)
        for case in CORPUS
        if (got := matrix[row_index[_key(case.message)]][sel_index[case.selector]]) is not case.expected
    ]
    assert not wrong, wrong


def test_selectors_at_the_parser_limits_plan_and_agree(spark: SparkSession) -> None:
    """The deepest and largest selectors the parser accepts: Spark parses them (flat AND/OR
    chains, bounded parentheses) and plans them without the exponential cost that conditionals
    nested through arithmetic would have (the test would hang; pytest's timeout ends it)."""
    texts = [
        "(" * MAX_NESTING + "a" + " + 1)" * MAX_NESTING + " = 51",
        "(" * 6 + "a" + " / 2 * b - -1)" * 6 + " > 0",
        "a = 1" + " = TRUE" * (MAX_DEPTH - 2),
        " AND ".join(["NOT a = 2"] * 40),
        " OR ".join(["JMSPriority = 1"] * 200),
        "NOT (" * (MAX_NESTING // 2) + "a IS NULL" + ")" * (MAX_NESTING // 2),
    ]
    selectors = [parse_selector(t) for t in texts]
    assert all(s is not None for s in selectors)
    rows = [msg({"a": 1, "b": 2}), msg({"a": 2.5, "b": 0}), msg({"a": "x"}), msg(priority=1)]
    with ansi_mode(spark, "true"):
        matrix = assert_parity(spark, [s for s in selectors if s is not None], rows)
    assert matrix[0][:3] == [True, True, True]


# -- random selectors and messages ---------------------------------------------------------------

NUMBER_NAMES = ["a", "b", "JMSPriority", "JMSXGroupSeq", "JMSTimestamp"]
STRING_NAMES = ["s", "a", "JMSType", "JMSXUserID"]
BOOLEAN_NAMES = ["p", "a"]
ALPHABET = "ab%_!\\'é😀\n"

exact_values = st.sampled_from([0, 1, -1, 2, 3, 7, 10, 2**31, 2**62, LONG_MAX, LONG_MIN, LONG_MAX - 1]) | st.integers(
    LONG_MIN, LONG_MAX
)
approx_values = st.sampled_from([0.0, -0.0, 0.5, 1.5, 2.0, 1e308, 5e-324, 9.223372036854776e18, 0.1]) | st.floats(
    allow_nan=False, allow_infinity=False
)
texts = st.text(alphabet=ALPHABET, max_size=4)


def numbers(depth: int) -> st.SearchStrategy[ast.Expr]:
    leaves = st.one_of(
        exact_values.map(ast.Exact),
        approx_values.map(ast.Approx),
        st.sampled_from(NUMBER_NAMES).map(ast.Identifier),
    )
    if depth <= 0:
        return leaves
    sub = numbers(depth - 1)
    return st.one_of(
        leaves,
        st.builds(ast.Arithmetic, st.sampled_from("+-*/%"), sub, sub),
        st.builds(ast.Unary, st.sampled_from("+-"), st.sampled_from(NUMBER_NAMES).map(ast.Identifier)),
    )


strings = st.one_of(texts.map(ast.String), st.sampled_from(STRING_NAMES).map(ast.Identifier))


@st.composite
def like_patterns(draw: st.DrawFn) -> tuple[str, str | None]:
    escape = draw(st.sampled_from([None, "!", "\\", "%", "_"]))
    pattern = draw(texts)
    i = 0
    while escape is not None and i < len(pattern):  # an escape needs a character after it
        if pattern[i] == escape:
            if i + 1 == len(pattern):
                pattern += "a"
            i += 2
        else:
            i += 1
    return pattern, escape


def booleans(depth: int) -> st.SearchStrategy[ast.Expr]:
    num = numbers(2)
    leaves = st.one_of(
        st.booleans().map(ast.Boolean),
        st.sampled_from(BOOLEAN_NAMES).map(ast.Identifier),
        st.builds(ast.Comparison, st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), num, num),
        st.builds(ast.Comparison, st.sampled_from(["=", "<>"]), strings, strings),
        st.builds(ast.Between, num, num, num, st.booleans()),
        st.builds(ast.In, strings, st.lists(texts, min_size=1, max_size=3).map(tuple), st.booleans()),
        st.builds(lambda o, pe, n: ast.Like(o, pe[0], pe[1], n), strings, like_patterns(), st.booleans()),
        st.builds(ast.IsNull, st.one_of(num, strings), st.booleans()),
    )
    if depth <= 0:
        return leaves
    sub = booleans(depth - 1)
    return st.one_of(
        leaves,
        st.builds(ast.Logical, st.sampled_from(["AND", "OR"]), sub, sub),
        st.builds(ast.Not, sub),
        st.builds(ast.Comparison, st.sampled_from(["=", "<>"]), sub, sub),
    )


property_values = st.one_of(
    exact_values.map(lambda v: typed("long", long=v)),
    exact_values.filter(lambda v: -(2**31) <= v < 2**31).map(lambda v: typed("int", long=v)),
    st.sampled_from([1.8446744073709552e19, 1e19]).map(lambda v: typed("ulong", double=v)),
    approx_values.map(lambda v: typed("double", double=v)),
    st.sampled_from([math.nan, math.inf, -math.inf]).map(lambda v: typed("double", double=v)),
    st.floats(width=32, allow_nan=False).map(lambda v: typed("float", double=v)),
    texts.map(lambda v: typed("string", string=v)),
    texts.map(lambda v: typed("symbol", string=v)),
    st.booleans().map(lambda v: typed("boolean", bool=v)),
    st.just(typed("null")),
    st.just(typed("binary", string="ab")),
)


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(["a", "b", "s", "p"]), unique=True))
    props = {name: draw(property_values) for name in names}
    return msg(
        props,
        priority=draw(st.sampled_from([None, 0, 4, 9])),
        subject=draw(st.none() | texts),
        user_id=draw(st.none() | st.sampled_from([b"ab", b"\xc3\x28", "é".encode()])),
        group_sequence=draw(st.none() | exact_values),
        creation_time=draw(st.none() | st.sampled_from([0, 1_700_000_000_000, LONG_MAX])),
    )


# 8 examples x 40 selectors x 10 messages: 320 random selectors, 3200 pairs, 8 Spark jobs. No
# shrinking: each shrink step is a Spark job (minutes in all); the assertion already names the
# first disagreeing selector and row.
@settings(
    max_examples=8,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.lists(booleans(2), min_size=40, max_size=40),
    st.lists(messages(), min_size=10, max_size=10),
    st.sampled_from(["true", "false"]),
)
def test_random_selectors_agree(spark: SparkSession, exprs: list[ast.Expr], rows: list[dict[str, Any]], ansi: str) -> None:
    selectors = []
    for expr in exprs:
        text = ast.render(expr)
        parsed = parse_selector(text)  # the generator only builds well-typed trees
        # Equal up to the grouping of AND/OR chains, which render writes flat.
        assert parsed is not None and ast.render(parsed.expression) == text, text
        selectors.append(parsed)
    with ansi_mode(spark, ansi):
        assert_parity(spark, selectors, rows)
