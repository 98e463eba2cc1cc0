"""Reference evaluator: a parsed selector applied to one topic row, in plain Python.

This module *defines* selector semantics; sharedsub.core.selector.sparksql must agree with it on
every input (tests/spark/test_selector_parity.py checks both against a corpus and random cases).

A row is one row of ``schemas.TOPIC`` as ``pyarrow.Table.to_pylist()`` gives it: a dict of
columns, ``application_properties`` a list of ``(name, struct-dict)`` pairs (a dict is accepted
too). The rules:

* **Values** are exact numbers (Java long), approximate numbers (double), strings, booleans,
  null, or *opaque*: a property that is present but of a type a selector cannot compare (binary,
  uuid, list, map, …, or a NaN double). Opaque values are not null (``IS NULL`` is false) but
  every comparison, arithmetic and LIKE/IN with them is unknown.
* **Headers** (docs/design.md §3): JMSMessageID, JMSCorrelationID, JMSType, JMSReplyTo, JMSXGroupID are
  the string columns (null when absent); JMSPriority is ``priority`` (4 when null);
  JMSDeliveryMode is 'PERSISTENT' when ``durable`` else 'NON_PERSISTENT'; JMSTimestamp and
  JMSExpiration are ``creation_time`` and ``absolute_expiry_time`` in ms, 0 when absent;
  JMSXGroupSeq is ``group_sequence`` (null when absent); JMSXUserID is ``user_id`` decoded as
  UTF-8, null when absent or not valid UTF-8.
* **Properties**: any other name looks up ``application_properties`` (first entry of that name);
  missing, or of AMQP type null → null. Numeric types (byte … ulong, timestamp, float, double)
  are an exact number from ``long`` when it is set, else an approximate number from ``double``
  (float, double, a ulong beyond the long range); string/symbol/char are strings, boolean
  booleans; anything else, or a type whose value field is missing, is opaque.
* **Comparisons** are true, false or unknown (None). Numbers compare with numbers: long with
  long exactly, otherwise both as doubles (as Java converts). Strings and booleans compare with
  their own type by ``=``/``<>`` only; ``<`` on strings is unknown. Any other pairing, a null or
  an opaque operand → unknown (docs/design.md §3; Broker-J says false, which only differs under NOT).
* **Arithmetic** on anything but two numbers is null. long op long stays a long: ``/`` truncates
  toward zero, ``%`` takes the dividend's sign (Java). A long result that does not fit a long
  (``9223372036854775807 + 1``, ``-9223372036854775808 / -1``) is computed in double instead,
  as if the operands were doubles: an approximate number, not Java's wrap-around. With a double
  operand the operation is done in double. Division or remainder by zero (long or double) is
  null, as is a NaN result (``inf - inf``).
* **Logic** is SQL three-valued (AND, OR, NOT); ``BETWEEN a AND b`` is ``>= a AND <= b``; IN and
  LIKE need a string (else unknown); a property used as a condition must be a boolean.
* **LIKE** matches the whole string, case-sensitively: ``%`` any run of characters (line breaks
  too), ``_`` exactly one character (a code point, so one emoji), and the ESCAPE character makes
  the character after it literal, whichever it is (Broker-J's rule); an ESCAPE character at the
  very end of the pattern is a parse error.
* A selector matches a message only when the result is True.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from sharedsub.core.selector import ast


class _Opaque:
    """A present value that no operator can use (not null, never comparable)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "OPAQUE"


OPAQUE = _Opaque()
Value: TypeAlias = int | float | str | bool | _Opaque | None
# A schemas.TOPIC row, and a PROPERTY_VALUE struct in it, as pyarrow's ``Table.to_pylist()`` gives them
# (the rules read them by column, as the module docstring says).
TopicRow: TypeAlias = Mapping[str, Any]  # Any: pyarrow's to_pylist() values are untyped
PropertyStruct: TypeAlias = Mapping[str, Any]  # Any: as TopicRow

# AMQP type names (schemas.PROPERTY_VALUE.type) of the values a selector can compare.
NUMERIC_TYPES = frozenset(
    {"byte", "short", "int", "long", "ubyte", "ushort", "uint", "ulong", "timestamp", "float", "double"}
)
STRING_TYPES = frozenset({"string", "symbol", "char"})


def evaluate(selector: ast.Selector, row: TopicRow) -> bool | None:
    """True if ``selector`` matches ``row``, False if it does not, None when unknown (no match)."""
    return _truth(_eval(selector.expression, row))


def _truth(value: Value) -> bool | None:
    return value if type(value) is bool else None


def _utf8(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return None


def _zero_if_null(value: int | None) -> int:
    return 0 if value is None else int(value)


HEADERS: dict[str, Callable[[TopicRow], Value]] = {
    "JMSMessageID": lambda row: row.get("message_id"),
    "JMSCorrelationID": lambda row: row.get("correlation_id"),
    "JMSType": lambda row: row.get("subject"),
    "JMSReplyTo": lambda row: row.get("reply_to"),
    "JMSPriority": lambda row: 4 if row.get("priority") is None else int(row["priority"]),
    "JMSDeliveryMode": lambda row: "PERSISTENT" if row.get("durable") else "NON_PERSISTENT",
    "JMSTimestamp": lambda row: _zero_if_null(row.get("creation_time")),
    "JMSExpiration": lambda row: _zero_if_null(row.get("absolute_expiry_time")),
    "JMSXUserID": lambda row: _utf8(row.get("user_id")),
    "JMSXGroupID": lambda row: row.get("group_id"),
    "JMSXGroupSeq": lambda row: row.get("group_sequence"),
}


def property_value(row: TopicRow, name: str) -> Value:
    """Application property ``name`` of ``row`` as a selector value (see the module rules)."""
    props = row.get("application_properties")
    if props is None:
        return None
    entry: PropertyStruct | None
    if isinstance(props, Mapping):
        entry = props.get(name)
    else:
        entry = next((v for k, v in props if k == name), None)
    if entry is None:
        return None
    kind = entry.get("type")
    if kind is None or kind == "null":
        return None
    if kind in NUMERIC_TYPES:
        # ``long`` when set (the integer types), else ``double`` (float, double, and a ulong
        # beyond the long range).
        if entry.get("long") is not None:
            return int(entry["long"])
        return _double(entry.get("double"))
    if kind in STRING_TYPES:
        return OPAQUE if entry.get("string") is None else str(entry["string"])
    if kind == "boolean":
        return OPAQUE if entry.get("bool") is None else bool(entry["bool"])
    return OPAQUE


def _double(value: float | None) -> Value:
    if value is None or math.isnan(value):
        return OPAQUE
    return float(value)


def _is_number(value: Value) -> bool:
    # ``type(...) is`` rather than isinstance: bool is an int subclass and is not a number here.
    return type(value) is int or type(value) is float


def _eval(expr: ast.Expr, row: TopicRow) -> Value:
    match expr:
        case ast.Exact(value=v) | ast.Approx(value=v) | ast.String(value=v) | ast.Boolean(value=v):
            return v
        case ast.Identifier(name=name):
            header = HEADERS.get(name)
            return header(row) if header is not None else property_value(row, name)
        case ast.Unary(op=op, operand=operand):
            return negate(_eval(operand, row)) if op == "-" else _plus(_eval(operand, row))
        case ast.Arithmetic(op=op, left=left, right=right):
            return arithmetic(op, _eval(left, row), _eval(right, row))
        case ast.Comparison(op=op, left=left, right=right):
            return compare(op, _eval(left, row), _eval(right, row))
        case ast.Not(operand=operand):
            return _not(_truth(_eval(operand, row)))
        case ast.Logical(op=op):
            combine = _and if op == "AND" else _or
            result: bool | None = op == "AND"  # TRUE is AND's identity, FALSE is OR's
            for operand in ast.chain(expr):
                result = combine(result, _truth(_eval(operand, row)))
            return result
        case ast.Between(operand=operand, low=low, high=high, negated=negated):
            value = _eval(operand, row)
            inside = _and(compare(">=", value, _eval(low, row)), compare("<=", value, _eval(high, row)))
            return _not(inside) if negated else inside
        case ast.In(operand=operand, values=values, negated=negated):
            value = _eval(operand, row)
            if type(value) is not str:
                return None
            return (value in values) != negated
        case ast.Like(operand=operand, pattern=pattern, escape=escape, negated=negated):
            value = _eval(operand, row)
            if type(value) is not str:
                return None
            return like(value, pattern, escape) != negated
        case ast.IsNull(operand=operand, negated=negated):
            return (_eval(operand, row) is None) != negated
    raise TypeError(f"not a selector expression: {expr!r}")


def _not(a: bool | None) -> bool | None:
    return None if a is None else not a


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _plus(a: Value) -> Value:
    return a if _is_number(a) else None


def negate(a: Value) -> Value:
    """``-a``: a number negated (``-MIN`` becomes a double, as overflow does), anything else null."""
    if type(a) is int:
        return -a if -a <= ast.LONG_MAX else -float(a)  # only -MIN overflows
    if type(a) is float:
        return -a
    return None


def arithmetic(op: str, a: Value, b: Value) -> Value:
    """``a op b`` for op in ``+ - * / %`` (rules in the module docstring)."""
    if not (_is_number(a) and _is_number(b)):
        return None
    if type(a) is int and type(b) is int:
        if op in "/%" and b == 0:
            return None
        exact = _long_arithmetic(op, a, b)
        if ast.LONG_MIN <= exact <= ast.LONG_MAX:
            return exact
    return _double_arithmetic(op, float(a), float(b))  # type: ignore[arg-type]


def _long_arithmetic(op: str, a: int, b: int) -> int:
    """The exact (unbounded) result; ``b`` is not 0 for ``/`` and ``%``."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # truncated toward zero
    if op == "/":
        return quotient
    return a - b * quotient  # remainder with the sign of the dividend


def _double_arithmetic(op: str, x: float, y: float) -> float | None:
    if op in "/%" and y == 0.0:
        return None
    if op == "+":
        result = x + y
    elif op == "-":
        result = x - y
    elif op == "*":
        result = x * y
    elif op == "/":
        result = x / y
    else:
        # Java's double % is C's fmod; fmod(±inf, y) is NaN there but an error in Python.
        result = math.nan if math.isinf(x) else math.fmod(x, y)
    return None if math.isnan(result) else result


# Each is applied to two values of one type (two ints, two floats, two strings or two booleans):
# Any: no single Callable type states "two of one type"; compare() picks the pairs
_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda x, y: x == y,
    "<>": lambda x, y: x != y,
    "<": lambda x, y: x < y,
    "<=": lambda x, y: x <= y,
    ">": lambda x, y: x > y,
    ">=": lambda x, y: x >= y,
}


def compare(op: str, a: Value, b: Value) -> bool | None:
    """``a op b`` three-valued (rules in the module docstring)."""
    if _is_number(a) and _is_number(b):
        if type(a) is int and type(b) is int:
            return _ORDER[op](a, b)
        # Python compares int with float exactly; Java (and Spark) convert the long to double.
        return _ORDER[op](float(a), float(b))  # type: ignore[arg-type]
    if op in ("=", "<>") and type(a) is type(b) and type(a) in (str, bool):
        return _ORDER[op](a, b)
    return None


def like(value: str, pattern: str, escape: str | None) -> bool:
    """Whether all of ``value`` matches the LIKE ``pattern``: ``%`` any run of characters, ``_``
    exactly one character (code point), ``escape`` makes the next character literal.

    Implemented without regular expressions (the Spark back end uses one), as the classic
    two-pointer wildcard match: linear backtracking to the last ``%``.
    """
    items: list[str | None] = []  # a literal character, "%" as None-run marker, "_" as ""
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if escape is not None and c == escape and i + 1 < len(pattern):
            items.append(pattern[i + 1])
            i += 2
            continue
        items.append(None if c == "%" else "" if c == "_" else c)
        i += 1
    v = p = 0
    star_p, star_v = -1, 0
    while v < len(value):
        if p < len(items) and items[p] is not None and (items[p] == "" or items[p] == value[v]):
            v += 1
            p += 1
        elif p < len(items) and items[p] is None:
            star_p, star_v = p, v
            p += 1
        elif star_p >= 0:
            star_v += 1
            v, p = star_v, star_p + 1
        else:
            return False
    return all(item is None for item in items[p:])
