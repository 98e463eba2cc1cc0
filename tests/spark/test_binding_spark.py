"""Spark's evaluation of the routing SQL conditions agrees with sharedsub.core.fanout.binding.matches.

Every binding pattern of the unit table, as :func:`sharedsub.core.fanout.routing.condition` writes it for
Spark (what a notebook uses to ask a topic what a subscription receives), is evaluated by Spark
against every routing key of the table (the full cross product, in one job).
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sharedsub.core.fanout.binding import matches
from sharedsub.core.fanout.routing import condition
from tests.builders import subscription
from tests.unit.test_binding import CASES

pytestmark = pytest.mark.spark

PATTERNS = sorted({p for p, _, _ in CASES})
KEYS = sorted({k for _, k, _ in CASES} | {"", ".", "a..b", "it's", "back\\slash", "a.b.c.d.e"})


def spark_routes(spark: SparkSession, patterns: list[str], keys: list[str | None]) -> dict[str | None, set[str]]:
    """For each key: the patterns whose route condition Spark finds true."""
    conditions = [condition(subscription("t", binding=p, name=f"s{i}")) for i, p in enumerate(patterns)]
    rows = pa.table(
        {
            "topic": ["t"] * len(keys),
            "seq": list(range(len(keys))),
            "routing_key": pa.array(keys, pa.string()),
            "publisher": ["p"] * len(keys),
        }
    )
    df = spark.createDataFrame(rows).select("routing_key", *(F.expr(c).alias(f"p{i}") for i, c in enumerate(conditions)))
    return {row.routing_key: {p for i, p in enumerate(patterns) if row[f"p{i}"]} for row in df.collect()}


def test_spark_agrees_with_python_on_every_pattern_and_key(spark: SparkSession) -> None:
    got = spark_routes(spark, PATTERNS, list(KEYS))
    for key in KEYS:
        expected = {p for p in PATTERNS if matches(p, key)}
        assert got[key] == expected, f"key {key!r}"
    # The table's own expectations, to be sure the cross product checked something.
    for pattern, key, expected_match in CASES:
        assert (pattern in got[key]) is expected_match, (pattern, key)


def test_null_routing_key_is_the_empty_key(spark: SparkSession) -> None:
    got = spark_routes(spark, ["#", "", "*", "a"], [None])
    assert got[None] == {p for p in ["#", "", "*", "a"] if matches(p, "")}


def test_a_trailing_line_break_is_part_of_the_key(spark: SparkSession) -> None:
    # Java's '$' would match before a final line terminator; the routing regex ends in \z.
    got = spark_routes(spark, ["a", "a.b", "*"], ["a\n", "a.b\r", "a.\n"])
    assert got == {"a\n": {"*"}, "a.b\r": set(), "a.\n": set()}
