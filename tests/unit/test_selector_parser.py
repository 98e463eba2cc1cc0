"""JMS selector lexer, parser and type checks: what parses to what, and where errors point."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sharedsub.core.conditions import AmqpCondition
from sharedsub.core.errors import SharedSubError
from sharedsub.core.selector import (
    MAX_ARITHMETIC,
    MAX_NODES,
    MAX_SELECTOR_CHARS,
    MAX_SQL_CHARS,
    SelectorError,
    SparkSqlTooLarge,
    check,
    parse_selector,
    to_spark_sql,
)
from sharedsub.core.selector import ast as sa
from sharedsub.core.selector import parser as selector_parser
from sharedsub.core.selector.lexer import KEYWORDS, QUOTED_CHARS, Kind, tokenize
from sharedsub.core.selector.parser import MAX_DEPTH, MAX_NESTING
from sharedsub.core.selector.sparksql import _compile as compile_sql
from tests.spark.selector_corpus import CORPUS


def expr(text: str) -> sa.Expr:
    parsed = parse_selector(text)
    assert parsed is not None
    return parsed.expression


def error(text: str) -> SelectorError:
    with pytest.raises(SelectorError) as info:
        parse_selector(text)
    return info.value


A, B, C = sa.Identifier("a"), sa.Identifier("b"), sa.Identifier("c")


# -- docs/wire.md scenario 32 -----------------------------------------------------------------------


@pytest.mark.parametrize("keyword", sorted(KEYWORDS))
def test_keyword_as_identifier_fails(keyword: str) -> None:
    for spelling in (keyword, keyword.lower(), keyword.capitalize()):
        with pytest.raises(SelectorError):
            parse_selector(f"{spelling} = 0")


@pytest.mark.parametrize("keyword", sorted(KEYWORDS))
def test_quoted_identifier_may_spell_a_keyword(keyword: str) -> None:
    assert expr(f'"{keyword}" = 0') == sa.Comparison("=", sa.Identifier(keyword), sa.Exact(0))


def test_null_equals_zero_fails_at_null() -> None:
    e = error("NULL = 0")
    assert e.position == 1 and e.found == "keyword NULL" and "IS NULL" in e.expected


def test_like_needs_a_string_literal_pattern() -> None:
    e = error("Cost LIKE 2")
    assert (e.position, e.found) == (11, "number 2")
    assert expr("Cost LIKE '2'") == sa.Like(sa.Identifier("Cost"), "2")


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ("10", sa.Exact(10)),
        ("10L", sa.Exact(10)),
        ("10l", sa.Exact(10)),
        ("0x1F", sa.Exact(31)),
        ("0X1f", sa.Exact(31)),
        ("0x1FL", sa.Exact(31)),
        ("017", sa.Exact(15)),
        ("0", sa.Exact(0)),
        ("00", sa.Exact(0)),
        ("9223372036854775807", sa.Exact(2**63 - 1)),
        ("-9223372036854775808", sa.Exact(-(2**63))),
        ("0x7FFFFFFFFFFFFFFF", sa.Exact(2**63 - 1)),
        ("5.", sa.Approx(5.0)),
        (".5", sa.Approx(0.5)),
        ("5.5", sa.Approx(5.5)),
        ("5.5E10", sa.Approx(5.5e10)),
        ("5.5e-10", sa.Approx(5.5e-10)),
        ("5E10", sa.Approx(5e10)),
        ("5E+10", sa.Approx(5e10)),
        (".5E1", sa.Approx(5.0)),
        ("5.E1", sa.Approx(50.0)),
        ("09.5", sa.Approx(9.5)),
        ("1.5F", sa.Approx(1.5)),
        ("1.1f", sa.Approx(1.100000023841858)),  # rounded to a Java float
        ("1.1D", sa.Approx(1.1)),
        ("2d", sa.Approx(2.0)),
        ("-5", sa.Exact(-5)),
        ("+5", sa.Exact(5)),
        ("- -5", sa.Exact(5)),
        ("-(5)", sa.Exact(-5)),
        ("-.5", sa.Approx(-0.5)),
        ("1E-400", sa.Approx(0.0)),
    ],
)
def test_numeric_literals(literal: str, value: sa.Expr) -> None:
    assert expr(f"x = {literal}") == sa.Comparison("=", sa.Identifier("x"), value)


@pytest.mark.parametrize(
    ("text", "position", "expected", "found"),
    [
        ("x = 9223372036854775808", 5, "within the range of a long", "number 9223372036854775808"),
        ("x = -9223372036854775809", 5, "within the range of a long", "number -9223372036854775809"),
        ("x = 0x8000000000000000", 5, "within the range of a long", "number 0x8000000000000000"),
        ("x = - -9223372036854775808", 5, "within the range of a long", "number - -9223372036854775808"),
        ("x = 08", 5, "octal", "number 08"),
        ("x = 0x", 5, "a number", "'0x'"),
        ("x = 5abc", 5, "a number", "'5abc'"),
        ("x = 1.2.3", 5, "a number", "'1.2.3'"),
        ("x = 1E", 5, "a number", "'1E'"),
        ("x = 5L5", 5, "a number", "'5L5'"),
        ("x = 1E400", 5, "range of a double", "number 1E400"),
        ("x = 1E39F", 5, "range of a double", "number 1E39F"),
    ],
)
def test_bad_numeric_literals(text: str, position: int, expected: str, found: str) -> None:
    e = error(text)
    assert (e.position, e.found) == (position, found) and expected in e.expected


# -- errors: positions and messages --------------------------------------------------------------


def test_error_description_names_selector_position_expected_and_found() -> None:
    e = error("color = ")
    assert e.description == 'invalid JMS selector "color = " at position 9: expected a value, found end of input'
    assert str(e) == e.description
    assert (e.selector, e.position, e.expected, e.found) == ("color = ", 9, "a value", "end of input")
    assert isinstance(e, SharedSubError) and e.condition is AmqpCondition.INVALID_FIELD


@pytest.mark.parametrize(
    ("text", "position", "expected", "found"),
    [
        ("", None, None, None),
        ("a = 1 AND", 10, "a value", "end of input"),
        ("a = = 1", 5, "a value", "'='"),
        ("a == 1", 4, "a value", "'='"),
        ("a != 1", 3, "'<>' (there is no '!=')", "character '!'"),
        ("(a = 1", 7, "')'", "end of input"),
        ("a = 1)", 6, "an operator or end of input", "')'"),
        ("a b", 3, "an operator or end of input", "identifier b"),
        ("f(x) = 1", 2, "an operator or end of input", "'('"),
        ("a.b = 1", 2, "a value or an operator", "character '.'"),
        ("a[0] = 1", 2, "a value or an operator", "character '['"),
        ("é = 1", 1, "a value or an operator", "character 'é'"),
        ("a = 'x", 5, "a closing ' for the string literal", "end of input"),
        ('"a = 1', 1, 'a closing " for the quoted identifier', "end of input"),
        ("a = 1 /* open", 7, "'*/' to close the comment", "end of input"),
        ("a = NULL", 5, "a value (NULL is a keyword; test for null with IS NULL)", "keyword NULL"),
        ("a IS 5", 6, "NULL or NOT NULL after IS", "number 5"),
        ("a IS NOT 5", 10, "NULL or NOT NULL after IS", "number 5"),
        ("a NOT NULL", 7, "LIKE, BETWEEN or IN after NOT", "keyword NULL"),
        ("a BETWEEN 1", 12, "AND between the bounds of BETWEEN", "end of input"),
        ("a BETWEEN 1 OR 2", 13, "AND between the bounds of BETWEEN", "keyword OR"),
        ("a IN 'x'", 6, "'(' after IN", "string 'x'"),
        ("a IN ()", 7, "a string literal in the IN list", "')'"),
        ("a IN (1, 2)", 7, "a string literal in the IN list", "number 1"),
        ("a IN ('x', b)", 12, "a string literal in the IN list", "identifier b"),
        ("a IN ('x' 'y')", 11, "',' or ')' in the IN list", "string 'y'"),
        ("a LIKE b", 8, "a string literal pattern after LIKE", "identifier b"),
        ("a LIKE 'x' ESCAPE b", 19, "a string literal after ESCAPE", "identifier b"),
        ("a LIKE 'x' ESCAPE 'ab'", 19, "a single-character ESCAPE string", "string 'ab'"),
        ("a LIKE 'x' ESCAPE ''", 19, "a single-character ESCAPE string", "string ''"),
        ("a LIKE 'ab!' ESCAPE '!'", 8,
         "a character after the ESCAPE character '!' at the end of the LIKE pattern", "string 'ab!'"),
        ("a LIKE 'a!!!' ESCAPE '!'", 8,
         "a character after the ESCAPE character '!' at the end of the LIKE pattern", "string 'a!!!'"),
        ("a NOT LIKE 5", 12, "a string literal pattern after LIKE", "number 5"),
        ("= 1", 1, "a value", "'='"),
        ("NOT", 4, "a value", "end of input"),
        ("a = NOT b", 5, "a value", "keyword NOT"),
        ("TRUE TRUE", 6, "an operator or end of input", "keyword TRUE"),
    ],
)
def test_syntax_errors(text: str, position: int | None, expected: str | None, found: str | None) -> None:
    if position is None:
        assert parse_selector(text) is None
        return
    e = error(text)
    assert (e.position, e.expected, e.found) == (position, expected, found), e.description


@pytest.mark.parametrize(
    ("text", "position", "expected", "found"),
    [
        ("a + 1", 1, "a boolean expression", "arithmetic expression a + 1"),
        ("-a", 1, "a boolean expression", "arithmetic expression -a"),
        ("5", 1, "a boolean expression", "number 5"),
        ("'abc'", 1, "a boolean expression", "string 'abc'"),
        ("JMSType", 1, "a boolean expression", "string header JMSType"),
        ("JMSPriority", 1, "a boolean expression", "number header JMSPriority"),
        ("a AND 1", 7, "a boolean expression", "number 1"),
        ("1 OR a", 1, "a boolean expression", "number 1"),
        ("NOT 5", 5, "a boolean expression", "number 5"),
        ("NOT JMSType", 5, "a boolean expression", "string header JMSType"),
        ("'a' < 'b'", 1, "a number to compare with < (strings and booleans allow = and <> only)", "string 'a'"),
        ("a >= 'b'", 6, "a number to compare with >= (strings and booleans allow = and <> only)", "string 'b'"),
        ("TRUE > FALSE", 1, "a number to compare with > (strings and booleans allow = and <> only)", "boolean TRUE"),
        ("JMSType < 'x'", 1, "a number to compare with < (strings and booleans allow = and <> only)", "string header JMSType"),
        ("a < b < c", 1, "a number to compare with < (strings and booleans allow = and <> only)", "boolean expression a < b"),
        ("'a' BETWEEN 'a' AND 'b'", 1,
         "a number to compare with BETWEEN (strings and booleans allow = and <> only)", "string 'a'"),
        ("a BETWEEN 1 AND 'b'", 17, "a number to compare with BETWEEN (strings and booleans allow = and <> only)", "string 'b'"),
        ("a + 'x' = 1", 5, "a number", "string 'x'"),
        ("'x' * 2 = 1", 1, "a number", "string 'x'"),
        ("-'x' = 1", 2, "a number", "string 'x'"),
        ("(a = 1) + 1 = 2", 2, "a number", "boolean expression a = 1"),
        ("JMSType - 1 = 2", 1, "a number", "string header JMSType"),
        ("JMSPriority = 'x'", 15, "a number to compare with JMSPriority", "string 'x'"),
        ("'x' = 1", 7, "a string to compare with 'x'", "number 1"),
        ("TRUE = 1", 8, "a boolean to compare with TRUE", "number 1"),
        ("(a = 1) = 'x'", 11, "a boolean to compare with a = 1", "string 'x'"),
        ("JMSType = JMSPriority", 11, "a string to compare with JMSType", "number header JMSPriority"),
        ("5 LIKE '5'", 1, "a string before LIKE", "number 5"),
        ("JMSPriority LIKE '5'", 1, "a string before LIKE", "number header JMSPriority"),
        ("(a = 1) LIKE 'x'", 2, "a string before LIKE", "boolean expression a = 1"),
        ("5 IN ('5')", 1, "a string before IN", "number 5"),
        ("a + 1 NOT IN ('5')", 1, "a string before IN", "arithmetic expression a + 1"),
    ],
)
def test_type_errors(text: str, position: int, expected: str, found: str) -> None:
    e = error(text)
    assert (e.position, e.expected, e.found) == (position, expected, found), e.description


def test_positions_count_characters_across_lines() -> None:
    assert error("a = 1\nAND").position == 10
    assert error("/* é */ a = ").position == 13


def test_nesting_and_depth_limits_are_errors_not_crashes() -> None:
    ok = "(" * MAX_NESTING + "a" + ")" * MAX_NESTING
    assert expr(ok) == A
    for deep in ("(" * (MAX_NESTING + 1) + "a" + ")" * (MAX_NESTING + 1), "(" * 5000, "NOT " * 5000 + "a", "- " * 5000 + "a = 1"):
        e = error(deep)
        assert "nested" in e.expected
    # A chain of ORs (or ANDs) is one level, however long: every walk takes it flat.
    assert parse_selector(" OR ".join(["JMSPriority = 1"] * 200)) is not None
    assert parse_selector(" AND ".join(["TRUE"] * 3000)) is not None
    assert parse_selector("a = 1" + " = TRUE" * (MAX_DEPTH - 2)) is not None
    e = error("a = 1" + " = TRUE" * MAX_DEPTH)
    assert "deep" in e.expected


def _or_chain(n: int, comparison: str = "a = {i}") -> str:
    """``n`` comparisons joined by OR: 4 nodes each, one OR between two."""
    return " OR ".join(comparison.format(i=i) for i in range(n))


def _sum(n: int) -> str:
    """A comparison of a sum with ``n`` arithmetic operators, nested at most 1 deep."""
    return "a" + " + 1" * n + " > 0"


def _deep(levels: int) -> str:
    """A left-deep chain of ``=`` whose tree is ``levels`` deep (comparisons count, leaves too)."""
    return "a = 1" + " = TRUE" * (levels - 2)


# (selector at the limit: accepted, one past it: refused, the position, expected, found).
LIMITS = [
    pytest.param(
        "a" * MAX_SELECTOR_CHARS,
        "a" * (MAX_SELECTOR_CHARS + 1),
        MAX_SELECTOR_CHARS + 1,
        f"at most {MAX_SELECTOR_CHARS} characters (the selector length limit)",
        f"{MAX_SELECTOR_CHARS + 1} characters",
        id="length",
    ),
    pytest.param(
        # 2,048 comparisons of 3 nodes and 2,047 ORs: 8,191 nodes, and a NOT: 8,192.
        "NOT " + _or_chain(2048, "a={i}"),
        "NOT NOT " + _or_chain(2048, "a={i}"),
        1,
        f"at most {MAX_NODES} operators and operands (the selector size limit)",
        f"{MAX_NODES + 1}",
        id="nodes",
    ),
    pytest.param(
        _sum(MAX_ARITHMETIC),
        _sum(MAX_ARITHMETIC + 1),
        1,
        f"at most {MAX_ARITHMETIC} arithmetic operators (the selector arithmetic limit)",
        f"{MAX_ARITHMETIC + 1}",
        id="arithmetic",
    ),
    pytest.param(
        _deep(MAX_DEPTH),
        _deep(MAX_DEPTH + 1),
        1,
        f"an expression at most {MAX_DEPTH} operators deep (the selector depth limit)",
        f"one {MAX_DEPTH + 1} deep",
        id="depth",
    ),
    pytest.param(
        "(" * MAX_NESTING + "a" + ")" * MAX_NESTING,
        "(" * (MAX_NESTING + 1) + "a" + ")" * (MAX_NESTING + 1),
        MAX_NESTING + 1,
        f"at most {MAX_NESTING} nested parentheses, signs or NOTs (the selector nesting limit)",
        "'('",
        id="nesting",
    ),
    pytest.param(
        "NOT " * MAX_NESTING + "a",
        "NOT " * (MAX_NESTING + 1) + "a",
        4 * MAX_NESTING + 1,
        f"at most {MAX_NESTING} nested parentheses, signs or NOTs (the selector nesting limit)",
        "keyword NOT",
        id="nesting-not",
    ),
]


@pytest.mark.parametrize(("at_limit", "past_limit", "position", "expected", "found"), LIMITS)
def test_limits_accept_at_the_limit_and_refuse_past_it_naming_limit_and_value(
    at_limit: str, past_limit: str, position: int, expected: str, found: str
) -> None:
    check(at_limit)
    e = error(past_limit)
    assert (e.position, e.expected, e.found) == (position, expected, found), e.description
    assert e.condition is AmqpCondition.INVALID_FIELD
    assert f"expected {expected}, found {found}" in e.description
    with pytest.raises(SelectorError):
        check(past_limit)


def test_length_is_checked_before_anything_else() -> None:
    # Too long and broken: the length is what is named (a huge text is not even tokenized).
    e = error("'" + "x" * MAX_SELECTOR_CHARS)
    assert "length limit" in e.expected
    # Blanks and comments count: the limit is on what the client sends.
    e = error("a = 1 " + " " * MAX_SELECTOR_CHARS)
    assert "length limit" in e.expected
    assert parse_selector(" " * MAX_SELECTOR_CHARS) is None  # blank, within the limit


@pytest.mark.parametrize(
    ("text", "nodes"),
    [
        ("a", 1),
        ("a = 1", 3),
        ("-a = -1", 4),  # a sign on a literal is folded into it, on a property it is a node
        ("a IN ('x', 'y', 'z')", 2),  # the list belongs to IN
        ("a LIKE 'x%' ESCAPE '!'", 2),
        ("a BETWEEN 1 AND 2", 4),
        ("a IS NOT NULL", 2),
        ("((a)) AND NOT b OR c", 6),  # parentheses are none
    ],
)
def test_what_counts_as_a_node(text: str, nodes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(selector_parser, "MAX_NODES", nodes)
    check(text)
    monkeypatch.setattr(selector_parser, "MAX_NODES", nodes - 1)
    e = error(text)
    assert (e.expected, e.found) == (f"at most {nodes - 1} operators and operands (the selector size limit)", str(nodes))


def test_signs_on_properties_are_arithmetic_and_signs_on_literals_are_not() -> None:
    check(" AND ".join(["a = -1"] * 200))
    check(" AND ".join(["-a = 1"] * MAX_ARITHMETIC))
    e = error(" AND ".join(["-a = 1"] * (MAX_ARITHMETIC + 1)))
    assert "arithmetic limit" in e.expected


def test_selectors_the_old_spark_sql_size_limit_refused_are_accepted() -> None:
    # Acceptance no longer depends on the Spark SQL back end: 100 comparisons of a property
    # compile to ~50 KB of SQL (over MAX_SQL_CHARS) and are a valid selector.
    text = _or_chain(100)
    check(text)
    selector = parse_selector(text)
    assert selector is not None
    assert len(compile_sql(selector.expression).condition()) > MAX_SQL_CHARS


@pytest.mark.parametrize(
    "text",
    [_or_chain(100), _sum(MAX_ARITHMETIC).replace("+ 1", "+ b"), _or_chain(2000, "p{i} = {i}")],
    ids=["100-comparisons", "sum-of-properties", "2000-properties"],
)
def test_spark_sql_too_large_for_a_valid_selector_is_a_clear_error(text: str) -> None:
    """The Spark SQL back end refuses, with its own typed error, what the tree check accepts."""
    check(text)
    selector = parse_selector(text)
    assert selector is not None
    with pytest.raises(SparkSqlTooLarge) as info:
        to_spark_sql(selector)
    e = info.value
    assert isinstance(e, SelectorError)  # reported where selector errors are
    assert e.size > MAX_SQL_CHARS
    assert e.description.startswith('JMS selector "')
    assert "is valid" in e.description and "invalid" not in e.description
    assert f"its Spark SQL would be {e.size} characters, over the limit of {MAX_SQL_CHARS}" in e.description
    assert str(e) == e.description


def test_routing_condition_of_such_a_selector_raises_the_clear_error_and_routing_still_works() -> None:
    """The one caller of the Spark SQL back end outside tests (querying a topic in Spark for a
    subscription) gets SparkSqlTooLarge; the fan-out's routing plan (Arrow) routes it."""
    import pyarrow as pa

    from sharedsub.core.fanout.routing import build_plan, condition, parsed_selector
    from sharedsub.storage import schemas
    from tests.builders import subscription
    from tests.spark.selector_corpus import msg

    record = subscription("t", selector=_or_chain(100))
    assert parsed_selector(record) is not None
    with pytest.raises(SparkSqlTooLarge, match="too large for the Spark SQL back end"):
        condition(record)
    plan = build_plan([record])
    rows = [{**msg({"a": 99}), "topic": "t", "seq": 1}, {**msg({"a": 100}), "topic": "t", "seq": 2}]
    schema = pa.schema([pa.field("topic", pa.string()), *[f for f in schemas.TOPIC if f.name != "message"]])
    batch = pa.RecordBatch.from_pylist(rows, schema=schema)
    assert plan.route(batch, ["seq"]).column("seq").to_pylist() == [1]


def test_spark_sql_within_its_limit_is_returned() -> None:
    selector = parse_selector(_or_chain(50))
    assert selector is not None
    assert len(to_spark_sql(selector)) <= MAX_SQL_CHARS


def test_error_descriptions_quote_a_long_selector_cut() -> None:
    text = "a = 1 AND " * 200 + "b = "
    e = error(text)
    assert e.selector == text
    assert f'"{text[:QUOTED_CHARS]}… ({len(text)} characters)" at position {len(text) + 1}' in e.description
    assert len(e.description) < QUOTED_CHARS + 200
    short = "color = "
    assert f'"{short}"' in error(short).description


# -- structure: precedence and associativity -----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("a OR b AND c", sa.Logical("OR", A, sa.Logical("AND", B, C))),
        ("a AND b OR c", sa.Logical("OR", sa.Logical("AND", A, B), C)),
        ("a AND b AND c", sa.Logical("AND", sa.Logical("AND", A, B), C)),
        ("NOT a AND b", sa.Logical("AND", sa.Not(A), B)),
        ("NOT a = 1", sa.Not(sa.Comparison("=", A, sa.Exact(1)))),
        ("NOT NOT a", sa.Not(sa.Not(A))),
        ("a = 1 = TRUE", sa.Comparison("=", sa.Comparison("=", A, sa.Exact(1)), sa.Boolean(True))),
        ("a > 1 = TRUE", sa.Comparison("=", sa.Comparison(">", A, sa.Exact(1)), sa.Boolean(True))),
        ("a IS NULL = TRUE", sa.Comparison("=", sa.IsNull(A), sa.Boolean(True))),
        ("a IS NOT NULL", sa.IsNull(A, negated=True)),
        ("1 + 2 * 3 = a", sa.Comparison("=", sa.Arithmetic("+", sa.Exact(1), sa.Arithmetic("*", sa.Exact(2), sa.Exact(3))), A)),
        ("a - b - c = 0", sa.Comparison("=", sa.Arithmetic("-", sa.Arithmetic("-", A, B), C), sa.Exact(0))),
        ("a / b % c = 0", sa.Comparison("=", sa.Arithmetic("%", sa.Arithmetic("/", A, B), C), sa.Exact(0))),
        ("-a * b = 0", sa.Comparison("=", sa.Arithmetic("*", sa.Unary("-", A), B), sa.Exact(0))),
        ("a + 1 BETWEEN b AND c + 1", sa.Between(sa.Arithmetic("+", A, sa.Exact(1)), B, sa.Arithmetic("+", C, sa.Exact(1)))),
        ("a NOT BETWEEN 1 AND 2 AND b", sa.Logical("AND", sa.Between(A, sa.Exact(1), sa.Exact(2), True), B)),
        ("a IN ('x')", sa.In(A, ("x",))),
        ("a NOT IN ('x', 'it''s')", sa.In(A, ("x", "it's"), True)),
        ("a LIKE 'x%' ESCAPE '!'", sa.Like(A, "x%", "!")),
        ("a NOT LIKE 'x'", sa.Like(A, "x", None, True)),
        ("a", A),
        ('"a" = "b"', sa.Comparison("=", A, B)),
        ('"a""b" IS NULL', sa.IsNull(sa.Identifier('a"b'))),
        ("$_x9 IS NULL", sa.IsNull(sa.Identifier("$_x9"))),
        ("((a))", A),
        ("a = 'x' -- c\n AND /* d */ b", sa.Logical("AND", sa.Comparison("=", A, sa.String("x")), B)),
        ("a = 1--2", sa.Comparison("=", A, sa.Exact(1))),
    ],
)
def test_trees(text: str, tree: sa.Expr) -> None:
    assert expr(text) == tree


@pytest.mark.parametrize("blank", ["", "   ", "\t\r\n\f", "-- only a comment", "/* only */", "/* a */ -- b\n"])
def test_blank_selector_is_no_selector(blank: str) -> None:
    assert parse_selector(blank) is None
    check(blank)


def test_check_raises_selector_error() -> None:
    check("a = 1")
    with pytest.raises(SelectorError):
        check("a =")


def test_tokens_and_spans() -> None:
    tokens = tokenize("a<>'x''y' AND \"q\"\"\" >= .5e1")
    assert [(t.kind, t.value) for t in tokens] == [
        (Kind.IDENTIFIER, "a"),
        (Kind.OPERATOR, "<>"),
        (Kind.STRING, "x'y"),
        (Kind.KEYWORD, "AND"),
        (Kind.IDENTIFIER, 'q"'),
        (Kind.OPERATOR, ">="),
        (Kind.APPROX, 5.0),
        (Kind.EOF, ""),
    ]
    assert [(t.start, t.end) for t in tokens][:3] == [(0, 1), (1, 3), (3, 9)]


def test_string_literals_keep_everything_but_doubled_quotes() -> None:
    assert expr("a = 'x\\n%_\"\n--/*'") == sa.Comparison("=", A, sa.String('x\\n%_"\n--/*'))


# -- render and round trips ----------------------------------------------------------------------


@pytest.mark.parametrize("text", sorted({c.selector for c in CORPUS}))
def test_render_round_trips_every_corpus_selector(text: str) -> None:
    tree = expr(text)
    rendered = sa.render(tree)
    assert "--" not in outside_quotes(rendered)
    assert expr(rendered) == tree


def outside_quotes(text: str) -> str:
    """``text`` without its string literals and quoted identifiers."""
    return re.sub(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"", "", text)


@settings(max_examples=300, deadline=None, database=None)
@given(st.text(alphabet="ab1 .'\"()=<>+-*/%!_\\\nE0xLNOTANDISNULLIKEBETWEEN,é", max_size=30))
def test_any_text_parses_or_raises_selector_error(text: str) -> None:
    try:
        parse_selector(text)
    except SelectorError as e:
        assert 1 <= e.position <= len(text) + 1  # noqa: PT017 (parsing or a refusal are both passes)
