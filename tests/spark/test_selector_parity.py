"""Selector parity: Spark SQL (sharedsub.core.selector.sparksql) agrees with the reference evaluator.

Every compiled selector is evaluated by Spark over every message in one ``select`` (one job per
ANSI setting), and compared with :func:`sharedsub.core.selector.evaluate` on the same rows as Arrow
hands them to Python, and with the corpus' hand-written expectations. Random selectors and
messages (hypothesis) are checked the same way, in a few batched jobs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sharedsub.core.selector import ast, parse_selector, to_spark_sql
from sharedsub.storage import schemas
from tests.selector_parity import (
    PARSER_LIMIT_SELECTORS,
    assert_agrees_with_reference,
    assert_corpus_expectations,
    booleans,
    corpus_matrix,
    messages,
)
from tests.spark.selector_corpus import msg

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
    """Spark and Python agree on every (row, selector) pair; return Spark's ``[row][selector]``."""
    matrix = spark_matrix(spark, selectors, rows)
    assert_agrees_with_reference(selectors, python_rows(rows), lambda s, m: matrix[m][s])
    return matrix


@pytest.mark.parametrize("ansi", ["true", "false"])
def test_corpus_agrees_with_spark_and_expectations(spark: SparkSession, ansi: str) -> None:
    selectors, rows = corpus_matrix()
    with ansi_mode(spark, ansi):  # every selector on every message: far more pairs than listed
        matrix = assert_parity(spark, selectors, rows)
    assert_corpus_expectations(selectors, rows, lambda s, m: matrix[m][s])


def test_selectors_at_the_parser_limits_plan_and_agree(spark: SparkSession) -> None:
    """The deepest and largest selectors the parser accepts: Spark parses them (flat AND/OR
    chains, bounded parentheses) and plans them without the exponential cost that conditionals
    nested through arithmetic would have (the test would hang; pytest's timeout ends it)."""
    texts = PARSER_LIMIT_SELECTORS
    selectors = [parse_selector(t) for t in texts]
    assert all(s is not None for s in selectors)
    rows = [msg({"a": 1, "b": 2}), msg({"a": 2.5, "b": 0}), msg({"a": "x"}), msg(priority=1)]
    with ansi_mode(spark, "true"):
        matrix = assert_parity(spark, [s for s in selectors if s is not None], rows)
    assert matrix[0][:3] == [True, True, True]


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
