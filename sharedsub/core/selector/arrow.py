"""Arrow back end: a parsed selector evaluated over a whole batch of topic rows at once.

:func:`compile_arrow` turns a selector into an :class:`ArrowSelector`, whose
:meth:`~ArrowSelector.evaluate` takes a :class:`Rows` (a ``pyarrow.RecordBatch`` of topic rows,
``schemas.ROUTING_COLUMNS`` or a superset) and returns a boolean array: true, false or null
(unknown) per row, with exactly the semantics of :mod:`sharedsub.core.selector.evaluate` (the
reference; tests/unit/test_selector_arrow.py checks both on the shared corpus and on random
selectors). The fan-out job routes with it (:mod:`sharedsub.core.fanout.routing`): its cost grows with the
number of subscriptions times the batch, never with a query plan, so 1,000 subscriptions cost
what 1,000 small vectorised evaluations cost.

How it works — as in the Spark SQL back end, a value is a set of parallel typed columns
(:class:`_Value`), each null except where the value has that type: ``long`` (exact numbers),
``double`` (every number, never NaN: NaN is opaque), ``string``, ``boolean`` and ``present``
(not null, for opaque properties). Each is a ``pyarrow.Array``, a ``pyarrow.Scalar`` (literals) or
None (null whatever the row). Comparisons, logic (Kleene AND/OR, which is SQL's three-valued
logic), IN, LIKE and IS NULL are Arrow compute kernels. Arithmetic, rare in selectors and full
of Java corner cases (overflow to double, truncating division, fmod), runs row by row through
the reference's own :func:`~sharedsub.core.selector.evaluate.arithmetic`, so it cannot disagree.
LIKE compiles to the same anchored regex as the Spark back end, run by RE2 (linear time: no
pattern backtracks).

:class:`Rows` caches what several selectors share per batch: each property's typed columns,
and each distinct selector's result (:meth:`Rows.selector_result`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from sharedsub.core.selector import ast
from sharedsub.core.selector.evaluate import NUMERIC_TYPES, STRING_TYPES, arithmetic, negate
from sharedsub.core.selector.sparksql import like_regex

Datum: TypeAlias = pa.Array | pa.Scalar

_NULL_BOOL = pa.scalar(None, pa.bool_())
_NULL_LONG = pa.scalar(None, pa.int64())
_NULL_DOUBLE = pa.scalar(None, pa.float64())
_NULL_STRING = pa.scalar(None, pa.string())
_NUMERIC = pa.array(sorted(NUMERIC_TYPES))
_STRINGS = pa.array(sorted(STRING_TYPES))


@dataclasses.dataclass(frozen=True, slots=True)
class _Value:
    """Typed columns of one selector value over a batch; None: null in every row."""

    long: Datum | None = None
    double: Datum | None = None  # never NaN
    string: Datum | None = None
    boolean: Datum | None = None
    present: Datum | None = None  # set for properties (opaque values are present, untyped)
    constant: bool = False  # a literal: its non-None columns are scalars that are never null

    def condition(self) -> Datum:
        """The value as a condition: its boolean column (null unless it is a boolean)."""
        return self.boolean if self.boolean is not None else _NULL_BOOL

    def is_present(self) -> Datum:
        """True where the value is not null."""
        if self.present is not None:
            return self.present
        if self.constant:
            return pa.scalar(True)
        checks = [pc.is_valid(c) for c in (self.double, self.string, self.boolean) if c is not None]
        if not checks:
            return pa.scalar(False)
        result = checks[0]
        for check in checks[1:]:
            result = pc.or_(result, check)
        return result


class Rows:
    """One batch of topic rows and the per-batch results selectors share."""

    def __init__(self, batch: pa.RecordBatch) -> None:
        self.batch = batch
        self.num_rows = batch.num_rows
        self._properties: dict[str, _Value] = {}
        self._results: dict[str, pa.BooleanArray] = {}
        self._user_id: Datum | None = None

    def column(self, name: str) -> pa.Array:
        """The batch's column ``name``."""
        return self.batch.column(name)

    def property(self, name: str) -> _Value:
        """Typed columns of application property ``name`` (first entry of that name)."""
        value = self._properties.get(name)
        if value is None:
            value = self._properties[name] = _property_columns(self.column("application_properties"), name)
        return value

    def user_id(self) -> Datum:
        """JMSXUserID: ``user_id`` as UTF-8 text, null where absent or not valid UTF-8."""
        if self._user_id is None:
            column = self.column("user_id")
            try:
                self._user_id = pc.cast(column, pa.string())
            except pa.ArrowInvalid:  # some row is not UTF-8: decide row by row
                self._user_id = pa.array([_utf8(v) for v in column.to_pylist()], pa.string())
        return self._user_id

    def selector_result(self, selector: ArrowSelector) -> pa.BooleanArray:
        """``selector.evaluate(self)``, computed once per batch per selector text."""
        result = self._results.get(selector.text)
        if result is None:
            result = self._results[selector.text] = selector.evaluate(self)
        return result

    def full(self, datum: Datum) -> pa.Array:
        """``datum`` as an array of :attr:`num_rows` (a scalar is repeated)."""
        if isinstance(datum, pa.Scalar):
            return pa.array([datum.as_py()] * self.num_rows, datum.type)
        return datum


def _utf8(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _property_columns(properties: pa.Array, name: str) -> _Value:
    entry = pc.map_lookup(properties, pa.scalar(name), "first")
    # flatten() applies the struct's own nulls (missing key) to its fields.
    kind, long, double, string, boolean = entry.flatten()
    numeric = pc.is_in(kind, value_set=_NUMERIC)  # false, not null, where kind is null
    as_double = pc.coalesce(pc.cast(long, pa.float64(), safe=False), double)
    return _Value(
        long=pc.if_else(numeric, long, _NULL_LONG),
        double=pc.if_else(pc.and_(numeric, pc.invert(pc.is_nan(as_double))), as_double, _NULL_DOUBLE),
        string=pc.if_else(pc.is_in(kind, value_set=_STRINGS), string, _NULL_STRING),
        boolean=pc.if_else(pc.fill_null(pc.equal(kind, "boolean"), False), boolean, _NULL_BOOL),
        present=pc.fill_null(pc.not_equal(kind, "null"), False),
    )


_Compiled: TypeAlias = Callable[[Rows], _Value]


def _column(name: str, kind: str) -> _Compiled:
    return lambda rows: _Value(**{kind: rows.column(name)})


def _exact_column(expr: Callable[[Rows], pa.Array]) -> _Compiled:
    def read(rows: Rows) -> _Value:
        long = pc.cast(expr(rows), pa.int64())
        return _Value(long=long, double=pc.cast(long, pa.float64(), safe=False))

    return read


HEADERS: dict[str, _Compiled] = {
    "JMSMessageID": _column("message_id", "string"),
    "JMSCorrelationID": _column("correlation_id", "string"),
    "JMSType": _column("subject", "string"),
    "JMSReplyTo": _column("reply_to", "string"),
    "JMSPriority": _exact_column(lambda rows: pc.fill_null(rows.column("priority"), 4)),
    "JMSDeliveryMode": lambda rows: _Value(
        string=pc.if_else(pc.fill_null(rows.column("durable"), False), "PERSISTENT", "NON_PERSISTENT")
    ),
    "JMSTimestamp": _exact_column(lambda rows: pc.fill_null(rows.column("creation_time"), 0)),
    "JMSExpiration": _exact_column(lambda rows: pc.fill_null(rows.column("absolute_expiry_time"), 0)),
    "JMSXUserID": lambda rows: _Value(string=rows.user_id()),
    "JMSXGroupID": _column("group_id", "string"),
    "JMSXGroupSeq": _exact_column(lambda rows: rows.column("group_sequence")),
}


@dataclasses.dataclass(frozen=True, slots=True)
class ArrowSelector:
    """A selector compiled for Arrow batches; ``text`` is its source (the cache key in Rows)."""

    text: str
    _root: _Compiled

    def evaluate(self, rows: Rows) -> pa.BooleanArray:
        """Per row: true (matches), false, or null (unknown: does not match)."""
        return rows.full(self._root(rows).condition())


def compile_arrow(selector: ast.Selector) -> ArrowSelector:
    """``selector`` compiled for :meth:`ArrowSelector.evaluate`."""
    return ArrowSelector(selector.text, _compile(selector.expression))


def _constant(**columns: pa.Scalar) -> _Compiled:
    value = _Value(constant=True, **columns)
    return lambda rows: value


def _compile(expr: ast.Expr) -> _Compiled:  # noqa: C901 (one case per node kind of the selector grammar)
    match expr:
        case ast.Exact(value=v):
            return _constant(long=pa.scalar(v, pa.int64()), double=pa.scalar(float(v), pa.float64()))
        case ast.Approx(value=v):
            return _constant(double=pa.scalar(v, pa.float64()))
        case ast.String(value=v):
            return _constant(string=pa.scalar(v, pa.string()))
        case ast.Boolean(value=v):
            return _constant(boolean=pa.scalar(v, pa.bool_()))
        case ast.Identifier(name=name):
            header = HEADERS.get(name)
            if header is not None:
                return header
            return lambda rows: rows.property(name)
        case ast.Unary(op=op, operand=operand):
            inner = _compile(operand)
            if op == "+":  # a number stays a number; anything else is null
                return lambda rows: _keep_number(inner(rows))
            return lambda rows: _row_by_row(rows, negate, inner(rows))
        case ast.Arithmetic(op=op, left=left, right=right):
            lhs, rhs = _compile(left), _compile(right)
            return lambda rows: _row_by_row(rows, lambda a, b: arithmetic(op, a, b), lhs(rows), rhs(rows))
        case ast.Comparison(op=op, left=left, right=right):
            lhs, rhs = _compile(left), _compile(right)
            return lambda rows: _Value(boolean=_compare(op, lhs(rows), rhs(rows)))
        case ast.Not(operand=operand):
            inner = _compile(operand)
            return lambda rows: _Value(boolean=pc.invert(inner(rows).condition()))
        case ast.Logical(op=op):
            parts = [_compile(e) for e in ast.chain(expr)]
            combine = pc.and_kleene if op == "AND" else pc.or_kleene
            return lambda rows: _Value(boolean=_fold(combine, [p(rows).condition() for p in parts]))
        case ast.Between(operand=operand, low=low, high=high, negated=negated):
            value, lo, hi = _compile(operand), _compile(low), _compile(high)

            def between(rows: Rows) -> _Value:
                v = value(rows)
                inside = pc.and_kleene(_compare(">=", v, lo(rows)), _compare("<=", v, hi(rows)))
                return _Value(boolean=pc.invert(inside) if negated else inside)

            return between
        case ast.In(operand=operand, values=values, negated=negated):
            inner = _compile(operand)
            value_set = pa.array(values, pa.string())
            return lambda rows: _string_test(inner(rows), lambda s: pc.is_in(s, value_set=value_set), negated)
        case ast.Like(operand=operand, pattern=pattern, escape=escape, negated=negated):
            inner = _compile(operand)
            regex = like_regex(pattern, escape)  # \A \z (?s) \x{..}: RE2 reads Java's syntax here
            return lambda rows: _string_test(inner(rows), lambda s: pc.match_substring_regex(s, regex), negated)
        case ast.IsNull(operand=operand, negated=negated):
            inner = _compile(operand)

            def is_null(rows: Rows) -> _Value:
                present = inner(rows).is_present()
                return _Value(boolean=present if negated else pc.invert(present))

            return is_null
    raise TypeError(f"not a selector expression: {expr!r}")


def _fold(combine: Callable[[Datum, Datum], Datum], conditions: list[Datum]) -> Datum:
    result = conditions[0]
    for condition in conditions[1:]:
        result = combine(result, condition)
    return result


def _keep_number(x: _Value) -> _Value:
    return _Value(long=x.long, double=x.double, constant=x.constant)


def _string_test(value: _Value, test: Callable[[Datum], Datum], negated: bool) -> _Value:
    s = value.string
    if s is None:
        return _Value(boolean=_NULL_BOOL)
    # is_in says false for a null string; the selector says unknown.
    result = pc.if_else(pc.is_valid(s), test(s), _NULL_BOOL)
    return _Value(boolean=pc.invert(result) if negated else result)


_COMPARE = {
    "=": pc.equal,
    "<>": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def _compare(op: str, x: _Value, y: _Value) -> Datum:
    """Three-valued ``x op y``: one comparison per type pairing, the first non-null decides.

    long/long comes before the double pairing, so exact numbers compare exactly; a long meets a
    double only as doubles (Java's conversion). Strings and booleans take ``=`` and ``<>`` only.
    """
    pairs = [(x.long, y.long), (x.double, y.double)]
    if op in ("=", "<>"):
        pairs += [(x.string, y.string), (x.boolean, y.boolean)]
    tests = [_COMPARE[op](a, b) for a, b in pairs if a is not None and b is not None]
    if not tests:
        return _NULL_BOOL
    if len(tests) == 1 or (x.constant and y.constant):
        return tests[0]  # two literals have one type each: the first pairing is theirs
    return pc.coalesce(*tests)


def _numbers(rows: Rows, value: _Value) -> list[int | float | None]:
    """Per row: the value as the reference evaluator's number (long, double) or None."""
    longs = rows.full(value.long).to_pylist() if value.long is not None else [None] * rows.num_rows
    doubles = rows.full(value.double).to_pylist() if value.double is not None else [None] * rows.num_rows
    return [lv if lv is not None else dv for lv, dv in zip(longs, doubles, strict=True)]


# ``op`` is the reference's negate or arithmetic, typed to return any selector Value; on numbers it
# returns a number or None, which the float() below relies on.
# Any: evaluate.negate / arithmetic return Value, narrower here than their annotation says
def _row_by_row(rows: Rows, op: Callable[..., Any], *operands: _Value) -> _Value:
    """Apply the reference's number operation ``op`` row by row; back to typed columns."""
    results = [op(*args) for args in zip(*(_numbers(rows, o) for o in operands), strict=True)]
    longs = [r if type(r) is int else None for r in results]
    doubles = [float(r) if type(r) in (int, float) else None for r in results]
    return _Value(long=pa.array(longs, pa.int64()), double=pa.array(doubles, pa.float64()))
