"""JMS 2.0 message selectors: parse, validate, evaluate in Python, compile to Spark SQL; pure.

Public API (no pyspark import anywhere in this package)::

    from sharedsub.selector import SelectorError, check, evaluate, parse_selector, to_spark_sql

    sel = parse_selector("color = 'red' AND weight > 2")  # Selector, or None for a blank one
    evaluate(sel, row)      # True / False / None (unknown) for one schemas.TOPIC row dict
    to_spark_sql(sel)       # Spark SQL boolean text over the fan-out source columns
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
from sharedsub.selector.parser import parse as parse_selector
from sharedsub.selector.sparksql import to_spark_sql

__all__ = ["Selector", "SelectorError", "check", "evaluate", "parse_selector", "to_spark_sql"]


def check(text: str) -> None:
    """Validate selector ``text`` (blank is valid: no selector).

    Raises:
        SelectorError: the text does not parse or type-check; ``condition`` is
            ``amqp:invalid-field`` and the description names the selector and the position.
    """
    parse_selector(text)
