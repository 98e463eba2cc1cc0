"""JMS 2.0 message selectors: parse, validate, evaluate in Python, over Arrow, or as Spark SQL; pure.

Public API (no pyspark import anywhere in this package)::

    from sharedsub.core.selector import SelectorError, check, evaluate, parse_selector, to_spark_sql

    sel = parse_selector("color = 'red' AND weight > 2")  # Selector, or None for a blank one
    evaluate(sel, row)      # True / False / None (unknown) for one schemas.TOPIC row dict
    to_spark_sql(sel)       # Spark SQL boolean text over the fan-out source columns (raises
                            # SparkSqlTooLarge past MAX_SQL_CHARS; routing never needs it)
    # sharedsub.core.selector.arrow.compile_arrow(sel).evaluate(Rows(batch)): a whole Arrow batch
    check(text)             # raises SelectorError: the attach-time validator (docs/design.md §4.8),
                            # deciding on the text and tree only (no back end involved)

A blank selector (empty, whitespace or comments only) is "no selector": ``parse_selector``
returns None and every message matches. A selector matches a message only when it evaluates to
True; False and unknown (None, SQL NULL) both mean no match. The language and its semantics
are described in :mod:`sharedsub.core.selector.parser` (grammar, type checks) and
:mod:`sharedsub.core.selector.evaluate` (values, comparisons, arithmetic, identifiers).

Note: the attribute ``sharedsub.core.selector.evaluate`` is the function; import other names of the
module with ``from sharedsub.core.selector.evaluate import ...``.
"""

from __future__ import annotations

from sharedsub.core.selector.ast import Selector
from sharedsub.core.selector.evaluate import evaluate
from sharedsub.core.selector.lexer import SelectorError
from sharedsub.core.selector.parser import (
    MAX_ARITHMETIC,
    MAX_DEPTH,
    MAX_NESTING,
    MAX_NODES,
    MAX_SELECTOR_CHARS,
    parse,
)
from sharedsub.core.selector.sparksql import MAX_SQL_CHARS, SparkSqlTooLarge, to_spark_sql

__all__ = [
    "MAX_ARITHMETIC",
    "MAX_DEPTH",
    "MAX_NESTING",
    "MAX_NODES",
    "MAX_SELECTOR_CHARS",
    "MAX_SQL_CHARS",
    "Selector",
    "SelectorError",
    "SparkSqlTooLarge",
    "check",
    "evaluate",
    "parse_selector",
    "to_spark_sql",
]


def parse_selector(text: str) -> Selector | None:
    """``text`` parsed and type-checked; None for a blank selector (no selector).

    Acceptance is decided on the text and the tree alone, whatever back end evaluates the
    selector: at most :data:`MAX_SELECTOR_CHARS` characters, :data:`MAX_NESTING` nested
    parentheses, signs or NOTs, :data:`MAX_DEPTH` levels, :data:`MAX_NODES` nodes and
    :data:`MAX_ARITHMETIC` arithmetic operators (see :mod:`sharedsub.core.selector.parser`). The
    Spark SQL form has a size limit of its own (:data:`MAX_SQL_CHARS`), which
    :func:`to_spark_sql` enforces when asked for it; it does not decide acceptance.

    Raises:
        SelectorError: a syntax or type error (at its position), or a selector over one of the
            limits (the description names the limit and its value).
    """
    return parse(text)


def check(text: str) -> None:
    """Validate selector ``text`` (blank is valid: no selector); the attach-time validator.

    Raises:
        SelectorError: the text does not parse or type-check, or is over one of the limits of
            :func:`parse_selector`; ``condition`` is ``amqp:invalid-field`` and the description
            names the selector and the position (and, for a limit, the limit and its value).
    """
    parse_selector(text)
