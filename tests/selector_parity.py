"""Shared by the selector parity tests of every back end (tests/spark/test_selector_parity.py for
Spark SQL, tests/unit/test_selector_arrow.py for Arrow): the corpus as a selector × message
matrix, the comparison with the reference evaluator, and hypothesis strategies for well-typed
random selectors and messages.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st

from sharedsub.core.selector import ast, evaluate, parse_selector
from sharedsub.core.selector.parser import MAX_DEPTH, MAX_NESTING
from tests.spark.selector_corpus import CORPUS, LONG_MAX, LONG_MIN, msg, typed

# The deepest and largest selectors the parser accepts (every back end must plan and agree).
PARSER_LIMIT_SELECTORS = [
    "(" * MAX_NESTING + "a" + " + 1)" * MAX_NESTING + " = 51",
    "(" * 6 + "a" + " / 2 * b - -1)" * 6 + " > 0",
    "a = 1" + " = TRUE" * (MAX_DEPTH - 2),
    " AND ".join(["NOT a = 2"] * 40),
    " OR ".join(["JMSPriority = 1"] * 200),
    "NOT (" * (MAX_NESTING // 2) + "a IS NULL" + ")" * (MAX_NESTING // 2),
]

# A back end's answer for (selector index, message index).
Lookup = Callable[[int, int], Any]


def message_key(message: dict[str, Any]) -> str:
    return json.dumps(message, default=repr, sort_keys=True)


def corpus_matrix() -> tuple[list[ast.Selector], list[dict[str, Any]]]:
    """Every distinct corpus selector (parsed) and every distinct corpus message, in order."""
    selectors: dict[str, ast.Selector] = {}
    rows: dict[str, dict[str, Any]] = {}
    for case in CORPUS:
        parsed = parse_selector(case.selector)
        assert parsed is not None, case.selector
        selectors.setdefault(case.selector, parsed)
        rows.setdefault(message_key(case.message), case.message)
    return list(selectors.values()), list(rows.values())


def assert_agrees_with_reference(selectors: Sequence[ast.Selector], plain: Sequence[dict[str, Any]], got: Lookup) -> None:
    """``got(s, m)`` is the reference evaluator's answer for every selector and (plain) row."""
    mismatches = [
        (sel.text, plain[m], got(s, m), evaluate(sel, plain[m]))
        for s, sel in enumerate(selectors)
        for m in range(len(plain))
        if got(s, m) is not evaluate(sel, plain[m])
    ]
    assert not mismatches, f"{len(mismatches)} disagreements, first: {mismatches[0]}"


def assert_corpus_expectations(selectors: Sequence[ast.Selector], rows: Sequence[dict[str, Any]], got: Lookup) -> None:
    """``got`` gives every corpus case its hand-written expected answer."""
    sel_index = {s.text: i for i, s in enumerate(selectors)}
    row_index = {message_key(r): i for i, r in enumerate(rows)}
    wrong = [
        (case.selector, case.expected, answer)
        for case in CORPUS
        if (answer := got(sel_index[case.selector], row_index[message_key(case.message)])) is not case.expected
    ]
    assert not wrong, wrong

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


