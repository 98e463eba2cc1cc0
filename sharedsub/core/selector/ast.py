"""Expression tree of a parsed JMS selector: frozen dataclasses, plus static types and rendering.

Every node carries ``start``/``end``, the 0-based source span it was parsed from (for error
messages); they take no part in equality, so trees compare by structure and values only.

Static types (:func:`static_type`) are what the parser knows without a message: literals,
operators and JMS headers have a fixed type, application properties (:class:`Identifier` not in
:data:`HEADER_TYPES`) are :attr:`Type.ANY` and are checked when evaluated.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from typing import TypeAlias

from sharedsub.core.selector.lexer import KEYWORDS

LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1



def _span() -> int:
    """A source offset field: kept for error messages, left out of equality and repr."""
    return dataclasses.field(default=0, compare=False, repr=False)


class Type(enum.Enum):
    """Static type of an expression."""

    NUMBER = "number"
    STRING = "string"
    BOOLEAN = "boolean"
    ANY = "property"  # an application property: its type is the message's business


# JMS header identifiers and their types (docs/design.md §3; JMSReplyTo as Broker-J maps it). How each
# is read is the back ends' business (evaluate.HEADERS, sparksql.HEADERS name the same keys).
HEADER_TYPES: dict[str, Type] = {
    "JMSMessageID": Type.STRING,
    "JMSCorrelationID": Type.STRING,
    "JMSType": Type.STRING,
    "JMSReplyTo": Type.STRING,
    "JMSPriority": Type.NUMBER,
    "JMSDeliveryMode": Type.STRING,
    "JMSTimestamp": Type.NUMBER,
    "JMSExpiration": Type.NUMBER,
    "JMSXUserID": Type.STRING,
    "JMSXGroupID": Type.STRING,
    "JMSXGroupSeq": Type.NUMBER,
}


@dataclasses.dataclass(frozen=True, slots=True)
class Exact:
    """Exact numeric literal (a Java long)."""

    value: int
    start: int = _span()
    end: int = _span()


@dataclasses.dataclass(frozen=True, slots=True)
class Approx:
    """Approximate numeric literal (a Java double, never NaN or infinite)."""

    value: float
    start: int = _span()
    end: int = _span()


@dataclasses.dataclass(frozen=True, slots=True)
class String:
    """String literal."""

    value: str
    start: int = _span()
    end: int = _span()


@dataclasses.dataclass(frozen=True, slots=True)
class Boolean:
    """TRUE or FALSE."""

    value: bool
    start: int = _span()
    end: int = _span()


@dataclasses.dataclass(frozen=True, slots=True)
class Identifier:
    """A header (``name`` in :data:`HEADER_TYPES`) or an application property."""

    name: str
    start: int = _span()
    end: int = _span()


@dataclasses.dataclass(frozen=True, slots=True)
class Unary:
    """``+x`` or ``-x`` on a non-literal (literals are folded by the parser)."""

    op: str  # '+' | '-'
    operand: Expr
    start: int = _span()
    end: int = _span()


@dataclasses.dataclass(frozen=True, slots=True)
class Arithmetic:
    """``left op right`` with a numeric operator."""

    op: str  # '+' | '-' | '*' | '/' | '%'
    left: Expr
    right: Expr
    start: int = _span()
    end: int = _span()


@dataclasses.dataclass(frozen=True, slots=True)
class Comparison:
    """``left op right`` with a comparison operator."""

    op: str  # '=' | '<>' | '<' | '<=' | '>' | '>='
    left: Expr
    right: Expr
    start: int = _span()
    end: int = _span()


@dataclasses.dataclass(frozen=True, slots=True)
class Not:
    """``NOT operand``."""

    operand: Expr
    start: int = _span()
    end: int = _span()


@dataclasses.dataclass(frozen=True, slots=True)
class Logical:
    """``left AND right`` or ``left OR right``."""

    op: str  # 'AND' | 'OR'
    left: Expr
    right: Expr
    start: int = _span()
    end: int = _span()


@dataclasses.dataclass(frozen=True, slots=True)
class Between:
    """``operand [NOT] BETWEEN low AND high`` (both bounds included)."""

    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False
    start: int = _span()
    end: int = _span()


@dataclasses.dataclass(frozen=True, slots=True)
class In:
    """``operand [NOT] IN (values)``; the values are string literals."""

    operand: Expr
    values: tuple[str, ...]
    negated: bool = False
    start: int = _span()
    end: int = _span()


@dataclasses.dataclass(frozen=True, slots=True)
class Like:
    """``operand [NOT] LIKE pattern [ESCAPE escape]``; ``escape`` is one character or None."""

    operand: Expr
    pattern: str
    escape: str | None = None
    negated: bool = False
    start: int = _span()
    end: int = _span()


@dataclasses.dataclass(frozen=True, slots=True)
class IsNull:
    """``operand IS [NOT] NULL``."""

    operand: Expr
    negated: bool = False
    start: int = _span()
    end: int = _span()


Expr: TypeAlias = (
    Exact | Approx | String | Boolean | Identifier | Unary | Arithmetic | Comparison | Not | Logical | Between | In
    | Like | IsNull
)


@dataclasses.dataclass(frozen=True, slots=True)
class Selector:
    """A parsed selector: its source ``text`` and boolean (or property) ``expression``."""

    text: str
    expression: Expr


def static_type(expr: Expr) -> Type:
    """The type ``expr`` has whatever the message (ANY for an application property)."""
    match expr:
        case Exact() | Approx() | Unary() | Arithmetic():
            return Type.NUMBER
        case String():
            return Type.STRING
        case Identifier(name=name):
            return HEADER_TYPES.get(name, Type.ANY)
        case _:
            return Type.BOOLEAN


def chain(expr: Logical) -> list[Expr]:
    """Operands of ``expr`` and of every ``expr.op`` directly under it, left to right.

    ``a OR b OR c`` parses left-deep; walking such chains iteratively keeps every back end
    (and Spark's SQL parser, which collects flat AND/OR chains) free of deep recursion.
    """
    out: list[Expr] = []
    stack: list[Expr] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, Logical) and node.op == expr.op:
            stack.append(node.right)
            stack.append(node.left)
        else:
            out.append(node)
    return out


_BARE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")


def render(expr: Expr) -> str:
    """Selector text for ``expr`` that parses back to an equal tree (fully parenthesised).

    Never produces ``--`` (a comment): a unary minus is followed by a space.
    """
    match expr:
        case Exact(value=v):
            return str(v)
        case Approx(value=v):
            return repr(v)
        case String(value=v):
            return "'" + v.replace("'", "''") + "'"
        case Boolean(value=v):
            return "TRUE" if v else "FALSE"
        case Identifier(name=name):
            if _BARE.match(name) and name.upper() not in KEYWORDS:
                return name
            return '"' + name.replace('"', '""') + '"'
        case Unary(op=op, operand=operand):
            return f"({op} {render(operand)})"
        case Arithmetic(op=op, left=left, right=right) | Comparison(op=op, left=left, right=right):
            return f"({render(left)} {op} {render(right)})"
        case Logical(op=op):
            return "(" + f" {op} ".join(render(e) for e in chain(expr)) + ")"
        case Not(operand=operand):
            return f"(NOT {render(operand)})"
        case Between(operand=operand, low=low, high=high, negated=negated):
            return f"({render(operand)} {_not(negated)}BETWEEN {render(low)} AND {render(high)})"
        case In(operand=operand, values=values, negated=negated):
            listed = ", ".join(render(String(v)) for v in values)
            return f"({render(operand)} {_not(negated)}IN ({listed}))"
        case Like(operand=operand, pattern=pattern, escape=escape, negated=negated):
            tail = "" if escape is None else f" ESCAPE {render(String(escape))}"
            return f"({render(operand)} {_not(negated)}LIKE {render(String(pattern))}{tail})"
        case IsNull(operand=operand, negated=negated):
            return f"({render(operand)} IS {_not(negated)}NULL)"
    raise TypeError(f"not a selector expression: {expr!r}")


def _not(negated: bool) -> str:
    return "NOT " if negated else ""
