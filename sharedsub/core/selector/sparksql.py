"""Spark SQL back end: a parsed selector as one boolean Spark SQL expression over topic columns.

:func:`to_spark_sql` gives text over the fan-out source's columns (``schemas.ROUTING_COLUMNS``)
that is true when the selector matches, false or NULL otherwise, with exactly the semantics of
:mod:`sharedsub.core.selector.evaluate` (the reference; see its docstring for the rules). It never
throws at run time whatever ``spark.sql.ansi.enabled`` says: long arithmetic goes through
``try_add``/``try_subtract``/``try_multiply``/``try_mod`` and a ``try_divide``/``try_cast`` of
decimals, double division through ``try_divide``, and no other cast can fail.

How dynamic types become static SQL: Spark needs one type per expression, a property has its
type per message. So every value compiles to a :class:`_Value`, parallel typed columns of which
only those of the value's type are non-null in a row:

* ``long`` (BIGINT): non-null iff the value is an exact number;
* ``double`` (DOUBLE): non-null iff the value is a number (an exact one converted, as Java
  converts a long for mixed comparisons); an arithmetic result may hold NaN, which
  :meth:`_Value.number` reads as NULL;
* ``string``, ``boolean``: non-null iff the value has that type;
* ``present`` (only properties): the value is not null, which an opaque value (binary, uuid, …)
  is although all its typed columns are null.

A comparison is ``coalesce`` over the type pairings that can compare (long/long exactly, then
number/number as doubles, then string/string and boolean/boolean for ``=``/``<>``): each is NULL
unless both sides have that type, so any other pairing is NULL. Columns known to be NULL at
compile time (a string literal's ``long``) are left out, so literals and headers compile to
short SQL. Text size matters: Spark's analyzer time grows with it, for every subscription.

String literals are quoted for Spark's default parser mode, in which backslash escapes
(``spark.sql.parser.escapedStringLiterals=false``; the fan-out job pins it).

Size: whether a selector is accepted is decided on its tree (:mod:`sharedsub.core.selector.parser`'s
limits), not here. Most selectors compile to SQL about as long as their text, but arithmetic
grows with the square of its chains and a property compiles to ~400 characters, so a selector
within the parser's limits can compile to megabytes, more than Spark plans in useful time.
:func:`to_spark_sql` then raises :class:`SparkSqlTooLarge` rather than hand it to Spark. Routing
never asks (it evaluates with Arrow); querying a topic for such a subscription in Spark
(:func:`sharedsub.core.fanout.routing.condition`) and ``sharedsub selector check`` get that error.
"""

from __future__ import annotations

import dataclasses
import re

from sharedsub.core.selector import ast
from sharedsub.core.selector.evaluate import NUMERIC_TYPES, STRING_TYPES
from sharedsub.core.selector.lexer import SelectorError, quoted

MAX_SQL_CHARS = 32_768
"""Longest Spark SQL :func:`to_spark_sql` returns: about 60 comparisons of a property with a
literal, or a sum of 14 properties; the test corpus' largest selector compiles to ~3.4 KB. Spark
plans a single expression in time that grows faster than its text (a 36 KB selector took seconds
on its own). Until this limit moved to the parser's tree limits, it decided which selectors
were accepted; now it only refuses the translation."""

_NULL_BOOLEAN = "CAST(NULL AS BOOLEAN)"


class SparkSqlTooLarge(SelectorError):
    """A valid selector (it passed :func:`sharedsub.core.selector.check`) whose Spark SQL would be
    over :data:`MAX_SQL_CHARS`: the Spark SQL back end refuses to translate it.

    A :class:`SelectorError` so that what reports selector errors reports this one too, with
    its own description (not "invalid"): the selector routes as usual with the Arrow back end.
    ``size`` is the length the SQL would have had.
    """

    def __init__(self, selector: str, size: int) -> None:
        super().__init__(selector, 1, f"at most {MAX_SQL_CHARS} characters of Spark SQL", f"{size}")
        self.size = size
        self.description = (
            f'JMS selector "{quoted(selector)}" is valid (subscriptions route with it) but too large for the '
            f"Spark SQL back end: its Spark SQL would be {size} characters, over the limit of {MAX_SQL_CHARS}"
        )
        self.args = (self.description,)
_TRY = {"+": "try_add", "-": "try_subtract", "*": "try_multiply"}


def sql_string(value: str) -> str:
    r"""``value`` as a Spark SQL string literal: backslashes and single quotes escaped.

    Backslashes are doubled (Spark unescapes ``\\`` to one backslash, so no other escape
    sequence such as ``\u0041`` can be formed) and single quotes are doubled (``''``).
    """
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


@dataclasses.dataclass(frozen=True, slots=True)
class _Value:
    """Typed SQL columns of one selector value; None: NULL whatever the row."""

    long: str | None = None
    double: str | None = None
    string: str | None = None
    boolean: str | None = None
    present: str | None = None
    constant: bool = False  # a literal: its non-None columns are never null
    may_be_nan: bool = False  # an arithmetic result: ``double`` may be NaN (see _arithmetic)

    def number(self) -> str | None:
        """The ``double`` column with NaN as NULL."""
        if self.double is None or not self.may_be_nan:
            return self.double
        return _nanvl(self.double)

    def is_present(self) -> str:
        """SQL: the value is not null."""
        if self.present is not None:
            return self.present
        if self.constant:
            return "TRUE"
        checks = [f"{c} IS NOT NULL" for c in (self.number(), self.string, self.boolean) if c is not None]
        return "(" + " OR ".join(checks) + ")" if checks else "FALSE"

    def condition(self) -> str:
        """SQL BOOLEAN: this value as a condition (NULL unless it is a boolean)."""
        return self.boolean if self.boolean is not None else _NULL_BOOLEAN


def to_spark_sql(selector: ast.Selector) -> str:
    """Spark SQL boolean expression: true exactly for the rows ``selector`` matches.

    Raises:
        SparkSqlTooLarge: the expression would be over :data:`MAX_SQL_CHARS` characters.
    """
    sql = _compile(selector.expression).condition()
    if len(sql) > MAX_SQL_CHARS:
        raise SparkSqlTooLarge(selector.text, len(sql))
    return sql


def _long_literal(value: int) -> str:
    # Parenthesised when negative, so that no '-' ever meets another '-' (a '--' comment).
    return f"{value}L" if value >= 0 else f"({value}L)"


def _double_literal(value: float) -> str:
    text = repr(value).upper() + "D"  # repr is exact (round-trips); '5E-324D', '1.5E+16D'
    return text if not text.startswith("-") else f"({text})"


def _exact(sql: str) -> _Value:
    return _Value(long=sql, double=f"CAST({sql} AS DOUBLE)")


def _column(name: str) -> str:
    return f"`{name}`"


HEADERS: dict[str, _Value] = {
    "JMSMessageID": _Value(string=_column("message_id")),
    "JMSCorrelationID": _Value(string=_column("correlation_id")),
    "JMSType": _Value(string=_column("subject")),
    "JMSReplyTo": _Value(string=_column("reply_to")),
    "JMSPriority": _exact("CAST(coalesce(`priority`, 4) AS BIGINT)"),
    "JMSDeliveryMode": _Value(string="CASE WHEN coalesce(`durable`, FALSE) THEN 'PERSISTENT' ELSE 'NON_PERSISTENT' END"),
    "JMSTimestamp": _exact("coalesce(`creation_time`, 0L)"),
    "JMSExpiration": _exact("coalesce(`absolute_expiry_time`, 0L)"),
    # CAST(binary AS STRING) keeps the bytes as they are; invalid UTF-8 is null, as in evaluate.
    "JMSXUserID": _Value(string="CASE WHEN is_valid_utf8(CAST(`user_id` AS STRING)) THEN CAST(`user_id` AS STRING) END"),
    "JMSXGroupID": _Value(string=_column("group_id")),
    "JMSXGroupSeq": _exact(_column("group_sequence")),
}


def _in_list(names: frozenset[str]) -> str:
    return "(" + ", ".join(sql_string(n) for n in sorted(names)) + ")"


def _property(name: str) -> _Value:
    # map[key] is NULL for a missing key, with ANSI mode on too (the parity tests run both).
    entry = f"`application_properties`[{sql_string(name)}]"
    kind = f"{entry}.`type`"
    numeric = f"{kind} IN {_in_list(NUMERIC_TYPES)}"
    return _Value(
        long=f"CASE WHEN {numeric} THEN {entry}.`long` END",
        double=f"CASE WHEN {numeric} THEN {_nanvl(f'coalesce(CAST({entry}.`long` AS DOUBLE), {entry}.`double`)')} END",
        string=f"CASE WHEN {kind} IN {_in_list(STRING_TYPES)} THEN {entry}.`string` END",
        boolean=f"CASE WHEN {kind} = 'boolean' THEN {entry}.`bool` END",
        present=f"(coalesce({kind}, 'null') <> 'null')",
    )


def _nanvl(sql: str) -> str:
    return f"nanvl({sql}, NULL)"


def _boolean(sql: str) -> _Value:
    return _Value(boolean=sql)


def _compile(expr: ast.Expr) -> _Value:
    match expr:
        case ast.Exact(value=v):
            return _Value(long=_long_literal(v), double=_double_literal(float(v)), constant=True)
        case ast.Approx(value=v):
            return _Value(double=_double_literal(v), constant=True)
        case ast.String(value=v):
            return _Value(string=sql_string(v), constant=True)
        case ast.Boolean(value=v):
            return _Value(boolean="TRUE" if v else "FALSE", constant=True)
        case ast.Identifier(name=name):
            return HEADERS.get(name) or _property(name)
        case ast.Unary(op=op, operand=operand):
            return _unary(op, _compile(operand))
        case ast.Arithmetic(op=op, left=left, right=right):
            return _arithmetic(op, _compile(left), _compile(right))
        case ast.Comparison(op=op, left=left, right=right):
            return _boolean(_compare(op, _compile(left), _compile(right)))
        case ast.Not(operand=operand):
            return _boolean(f"(NOT {_compile(operand).condition()})")
        case ast.Logical(op=op):
            # Flat: Spark's parser recurses on parentheses but collects a flat AND/OR chain.
            return _boolean("(" + f" {op} ".join(_compile(e).condition() for e in ast.chain(expr)) + ")")
        case ast.Between(operand=operand, low=low, high=high, negated=negated):
            value = _compile(operand)
            inside = f"({_compare('>=', value, _compile(low))} AND {_compare('<=', value, _compile(high))})"
            return _boolean(f"(NOT {inside})" if negated else inside)
        case ast.In(operand=operand, values=values, negated=negated):
            listed = ", ".join(sql_string(v) for v in values)
            return _string_test(_compile(operand), f"IN ({listed})", negated)
        case ast.Like(operand=operand, pattern=pattern, escape=escape, negated=negated):
            return _string_test(_compile(operand), f"RLIKE {sql_string(like_regex(pattern, escape))}", negated)
        case ast.IsNull(operand=operand, negated=negated):
            present = _compile(operand).is_present()
            return _boolean(present if negated else f"(NOT {present})")
    raise TypeError(f"not a selector expression: {expr!r}")


def _string_test(value: _Value, test: str, negated: bool) -> _Value:
    if value.string is None:
        return _boolean(_NULL_BOOLEAN)
    sql = f"({value.string} {test})"
    return _boolean(f"(NOT {sql})" if negated else sql)


def _unary(op: str, x: _Value) -> _Value:
    if op == "+":  # a number stays; anything else is null
        return _Value(long=x.long, double=x.double, may_be_nan=x.may_be_nan)
    if x.double is None:
        return _Value()
    # -x is exact in double too; -MIN does not fit a long: its double view is then the result.
    long = None if x.long is None else f"try_subtract(0L, {x.long})"
    return _Value(long=long, double=f"negative({x.double})", may_be_nan=x.may_be_nan)


def _arithmetic(op: str, x: _Value, y: _Value) -> _Value:
    """``x op y`` without any conditional expression that nests.

    Spark's subexpression elimination walks the first child of every CASE/IF/coalesce/nanvl
    twice, so conditionals nested through an arithmetic chain cost 2^depth at planning time (a
    20-deep ``(((a + 1) + 1) ...)`` took seconds, 30 never finished). Hence: the long column uses
    try_* functions (a decimal division for ``/``); the double column is
    ``coalesce(CAST(long AS DOUBLE), x.double op y.double)``, whose nesting goes through the
    second argument only; NaN is left in place and turned into NULL where values are used
    (:meth:`_Value.number`).
    """
    if x.double is None or y.double is None:
        return _Value()
    long: str | None = None
    if op in _TRY:
        double = f"({x.double} {op} {y.double})"
        if x.long is not None and y.long is not None:
            long = f"{_TRY[op]}({x.long}, {y.long})"
    elif op == "/":
        double = f"try_divide({x.double}, {y.double})"
        if x.long is not None and y.long is not None:
            # DECIMAL(38,19) quotient: exact enough that truncating it never rounds up; NULL for
            # a zero divisor (try_divide) and for MIN / -1 (try_cast).
            long = f"try_cast(try_divide(CAST({x.long} AS DECIMAL(19,0)), CAST({y.long} AS DECIMAL(19,0))) AS BIGINT)"
    else:  # '%': Java's remainder (sign of the dividend) for long and double alike
        double = f"try_mod({x.double}, {y.double})"
        if x.long is not None and y.long is not None:
            long = f"try_mod({x.long}, {y.long})"
    if long is not None:
        double = f"coalesce(CAST({long} AS DOUBLE), {double})"
    return _Value(long=long, double=double, may_be_nan=True)


def _compare(op: str, x: _Value, y: _Value) -> str:
    # One comparison per type pairing, each NULL unless both sides have that type; the first
    # non-null one decides. long/long comes before the double pairing, so exact numbers compare
    # exactly; a long and a double meet only in the double pairing, as Java converts them.
    pairs: list[tuple[str | None, str | None]] = [(x.long, y.long), (x.number(), y.number())]
    if op in ("=", "<>"):
        pairs += [(x.string, y.string), (x.boolean, y.boolean)]
    tests = [f"{a} {op} {b}" for a, b in pairs if a is not None and b is not None]
    if not tests:
        return _NULL_BOOLEAN
    if len(tests) == 1 or (x.constant and y.constant):
        return f"({tests[0]})"  # two literals have one type each: the first pairing is theirs
    return f"coalesce({', '.join(tests)})"


_PLAIN = re.compile(r"[A-Za-z0-9]")


def like_regex(pattern: str, escape: str | None) -> str:
    r"""Java regex (for ``RLIKE``) matching exactly the strings LIKE ``pattern`` matches.

    ``(?s)`` so that ``.`` matches line breaks too; ``\A`` … ``\z`` anchor the whole string
    (RLIKE searches). Every literal character but an ASCII letter or digit is written as
    ``\x{hex}`` (a code point), so no regex metacharacter can slip through. Runs of ``%``
    become one ``.*``.
    """
    out = ["(?s)\\A"]
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if escape is not None and c == escape and i + 1 < len(pattern):
            out.append(_regex_char(pattern[i + 1]))
            i += 2
            continue
        if c == "%":
            if out[-1] != ".*":
                out.append(".*")
        elif c == "_":
            out.append(".")
        else:
            out.append(_regex_char(c))
        i += 1
    out.append("\\z")
    return "".join(out)


def _regex_char(c: str) -> str:
    return c if c.isascii() and _PLAIN.match(c) else f"\\x{{{ord(c):X}}}"
