"""What a JMS selector means to sharedsub, for people: ``sharedsub selector check`` prints this; pure.

:func:`explain_selector` parses ``text`` exactly as an attach does (:func:`sharedsub.core.selector.parse_selector`,
so the same :class:`~sharedsub.core.selector.SelectorError` with its position) and describes the result:
the normalised selector (fully parenthesised, :func:`sharedsub.core.selector.ast.render`), every
identifier it reads, each either a JMS header with the AMQP field it maps to (docs/design.md §3) or an
application property, and the Spark SQL condition the selector is equivalent to.
"""

from __future__ import annotations

import dataclasses

from sharedsub.core.selector import ast, parse_selector, to_spark_sql

# Where each JMS header identifier is read from (docs/design.md §3; as the back ends read it).
HEADER_FIELDS: dict[str, str] = {
    "JMSMessageID": "properties.message-id",
    "JMSCorrelationID": "properties.correlation-id",
    "JMSType": "properties.subject",
    "JMSReplyTo": "properties.reply-to",
    "JMSPriority": "header.priority (4 when absent)",
    "JMSDeliveryMode": "header.durable ('PERSISTENT' / 'NON_PERSISTENT')",
    "JMSTimestamp": "properties.creation-time (ms, 0 when absent)",
    "JMSExpiration": "properties.absolute-expiry-time (ms, 0 when absent)",
    "JMSXUserID": "properties.user-id (as UTF-8)",
    "JMSXGroupID": "properties.group-id",
    "JMSXGroupSeq": "properties.group-sequence",
}


@dataclasses.dataclass(frozen=True, slots=True)
class IdentifierUse:
    """One identifier a selector reads."""

    name: str
    kind: str  # "header" (a JMS header) or "property" (an application property)
    reads: str  # the AMQP field, or "application-properties['<name>']"
    type: str  # static type: number, string, boolean for headers; "property" (the message's)


@dataclasses.dataclass(frozen=True, slots=True)
class SelectorExplanation:
    """A parsed selector described; ``normalized`` is None for a blank selector (matches all)."""

    text: str
    normalized: str | None
    identifiers: tuple[IdentifierUse, ...]  # in order of first use
    spark_sql: str | None

    def to_json(self) -> dict[str, object]:
        """JSON-ready dict (``sharedsub selector check --json``)."""
        return {
            "selector": self.text,
            "valid": True,
            "matches_everything": self.normalized is None,
            "normalized": self.normalized,
            "identifiers": [dataclasses.asdict(i) for i in self.identifiers],
            "spark_sql": self.spark_sql,
        }


def explain_selector(text: str) -> SelectorExplanation:
    """Parse and describe ``text``.

    Raises:
        SelectorError: ``text`` is not a valid selector (description names the position).
    """
    selector = parse_selector(text)
    if selector is None:
        return SelectorExplanation(text, None, (), None)
    names: list[str] = []
    for name in _identifiers(selector.expression):
        if name not in names:
            names.append(name)
    uses = tuple(_describe(n) for n in names)
    return SelectorExplanation(text, ast.render(selector.expression), uses, to_spark_sql(selector))


def _describe(name: str) -> IdentifierUse:
    if name in ast.HEADER_TYPES:
        return IdentifierUse(name, "header", HEADER_FIELDS[name], ast.HEADER_TYPES[name].value)
    return IdentifierUse(name, "property", f"application-properties[{name!r}]", ast.Type.ANY.value)


def _identifiers(expr: ast.Expr) -> list[str]:
    """Identifier names in source order (iterative: selector trees can be deep)."""
    out: list[str] = []
    stack: list[ast.Expr] = [expr]
    while stack:
        node = stack.pop()
        match node:
            case ast.Identifier(name=name):
                out.append(name)
            case ast.Unary(operand=a) | ast.Not(operand=a) | ast.In(operand=a) | ast.Like(operand=a) | ast.IsNull(operand=a):
                stack.append(a)
            case ast.Arithmetic(left=l, right=r) | ast.Comparison(left=l, right=r) | ast.Logical(left=l, right=r):
                stack.extend((r, l))
            case ast.Between(operand=a, low=lo, high=hi):
                stack.extend((hi, lo, a))
    return out
