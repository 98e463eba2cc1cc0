"""Selector parity: the Arrow back end (sharedsub.core.selector.arrow) agrees with the reference evaluator.

No Spark here: the Arrow back end is plain pyarrow, so the whole corpus (every selector on every
corpus message) and many random selectors run in seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sharedsub.core.selector import ast, parse_selector
from sharedsub.core.selector.arrow import Rows, compile_arrow
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


def _rows(rows: Sequence[dict[str, Any]]) -> tuple[Rows, list[dict[str, Any]]]:
    """The messages as one Arrow batch, and as the evaluator reads them (through Arrow too)."""
    table = pa.Table.from_pylist(list(rows), schema=schemas.TOPIC)
    batches = table.combine_chunks().to_batches()
    batch = batches[0] if batches else pa.RecordBatch.from_pylist([], schema=schemas.TOPIC)
    return Rows(batch), table.to_pylist()


def assert_parity(selectors: Sequence[ast.Selector], rows: Sequence[dict[str, Any]]) -> list[list[Any]]:
    """Arrow and Python agree on every (row, selector) pair; return Arrow's ``[selector][row]``."""
    batch, plain = _rows(rows)
    matrix = [compile_arrow(s).evaluate(batch).to_pylist() for s in selectors]
    assert_agrees_with_reference(selectors, plain, lambda s, m: matrix[s][m])
    return matrix


def test_corpus_agrees_with_reference_and_expectations() -> None:
    selectors, rows = corpus_matrix()
    matrix = assert_parity(selectors, rows)  # every selector on every message
    assert_corpus_expectations(selectors, rows, lambda s, m: matrix[s][m])


def test_selectors_at_the_parser_limits_agree() -> None:
    texts = PARSER_LIMIT_SELECTORS
    selectors = [s for t in texts if (s := parse_selector(t)) is not None]
    assert len(selectors) == len(texts)
    rows = [msg({"a": 1, "b": 2}), msg({"a": 2.5, "b": 0}), msg({"a": "x"}), msg(priority=1)]
    matrix = assert_parity(selectors, rows)
    assert [matrix[i][0] for i in range(3)] == [True, True, True]


def test_like_patterns_that_backtrack_in_java_run_in_linear_time() -> None:
    # RE2 has no backtracking: this would take exponential time in a backtracking engine.
    selector = parse_selector("s LIKE '" + "%a" * 30 + "%b'")
    assert selector is not None
    rows = [msg({"s": "a" * 5000}), msg({"s": "a" * 40 + "b"})]
    assert assert_parity([selector], rows) == [[False, True]]


def test_an_empty_batch_gives_an_empty_result() -> None:
    selector = parse_selector("a > 1 AND s LIKE 'x%'")
    assert selector is not None
    assert assert_parity([selector], []) == [[]]


def test_results_are_cached_per_batch_by_selector_text() -> None:
    batch, _ = _rows([msg({"a": 2}), msg({"a": 0})])
    first = compile_arrow(parse_selector("a > 1"))  # type: ignore[arg-type]
    again = compile_arrow(parse_selector("a > 1"))  # type: ignore[arg-type]
    assert batch.selector_result(first) is batch.selector_result(again)
    assert batch.selector_result(first).to_pylist() == [True, False]


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(booleans(2), min_size=20, max_size=20), st.lists(messages(), min_size=10, max_size=10))
def test_random_selectors_agree(exprs: list[ast.Expr], rows: list[dict[str, Any]]) -> None:
    selectors = []
    for expr in exprs:
        parsed = parse_selector(ast.render(expr))  # the generator only builds well-typed trees
        assert parsed is not None
        selectors.append(parsed)
    assert_parity(selectors, rows)
