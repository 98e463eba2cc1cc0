"""JMS 2.0 message selectors: parse, validate, evaluate in Python, over Arrow, or as Spark SQL; pure.

Public API (no pyspark import anywhere in this package)::

    from sharedsub.selector import SelectorError, check, evaluate, parse_selector, to_spark_sql

    sel = parse_selector("color = 'red' AND weight > 2")  # Selector, or None for a blank one
    evaluate(sel, row)      # True / False / None (unknown) for one schemas.TOPIC row dict
    to_spark_sql(sel)       # Spark SQL boolean text over the fan-out source columns
    # sharedsub.selector.arrow.compile_arrow(sel).evaluate(Rows(batch)): a whole Arrow batch
    check(text)             # raises SelectorError: the attach-time validator (DESIGN §4.8)

A blank selector (empty, whitespace or comments only) is "no selector": ``parse_selector``
returns None and every message matches. A selector matches a message only when it evaluates to
True; False and unknown (None, SQL NULL) both mean no match. The language and its semantics
are described in :mod:`sharedsub.selector.parser` (grammar, type checks) and
:mod:`sharedsub.selector.evaluate` (values, comparisons, arithmetic, identifiers).

Note: the attribute ``sharedsub.selector.evaluate`` is the function; import other names of the
module with ``from sharedsub.selector.evaluate import ...``.
"""

from __future__ import annotations

from sharedsub.selector.ast import Selector
from sharedsub.selector.evaluate import evaluate
from sharedsub.selector.lexer import SelectorError
from sharedsub.selector.parser import parse
from sharedsub.selector.sparksql import to_spark_sql

__all__ = ["MAX_SQL_CHARS", "Selector", "SelectorError", "check", "evaluate", "parse_selector", "to_spark_sql"]

MAX_SQL_CHARS = 32_768
"""Longest Spark SQL a selector may compile to: about 60 comparisons of a property with a
literal, or a sum of 14 properties (arithmetic SQL grows with the square of the chain, as each
partial result is needed exact and as a double); the test corpus' largest selector compiles to
~3.4 KB. The fan-out routes with the Arrow back end, but every selector must stay usable in
Spark SQL too (querying a topic for what a subscription receives, :func:`sharedsub.routing.condition`),
and Spark plans a single expression in time that grows faster than its text (a 36 KB selector
took seconds on its own)."""


def parse_selector(text: str) -> Selector | None:
    """``text`` parsed and type-checked; None for a blank selector (no selector).

    Raises:
        SelectorError: a syntax or type error (at its position), or a selector whose Spark SQL
            would exceed :data:`MAX_SQL_CHARS` (position 1).
    """
    selector = parse(text)
    if selector is not None:
        size = len(to_spark_sql(selector))
        if size > MAX_SQL_CHARS:
            raise SelectorError(
                text, 1, f"a simpler selector (at most {MAX_SQL_CHARS} characters of Spark SQL)", f"one of {size}"
            )
    return selector


def check(text: str) -> None:
    """Validate selector ``text`` (blank is valid: no selector).

    Raises:
        SelectorError: the text does not parse or type-check; ``condition`` is
            ``amqp:invalid-field`` and the description names the selector and the position.
    """
    parse_selector(text)
