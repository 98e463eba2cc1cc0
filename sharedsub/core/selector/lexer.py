"""Tokens of the JMS 2.0 message selector language, and the error every selector stage raises.

:func:`tokenize` turns selector text into :class:`Token` s ending in one ``EOF`` token. It
follows the JMS 2.0 spec §3.8.1.1 and Broker-J's grammar (docs/wire.md §2.13):

* whitespace is space, tab, CR, LF and form feed; ``-- …`` runs to the end of the line (or of
  the input) and ``/* … */`` may span lines; both are skipped like whitespace;
* ``'…'`` string literals with ``''`` for a quote; ``"…"`` quoted identifiers with ``""``;
* identifiers start with an ASCII letter, ``_`` or ``$`` and go on with those or digits; the
  keywords NOT AND OR BETWEEN LIKE ESCAPE IN IS TRUE FALSE NULL match case-insensitively and are
  never identifiers (a quoted identifier may spell one: ``"NULL"`` is a property);
* exact numerics: decimal, ``0x`` hex and leading-``0`` octal, each with an optional ``L``;
  approximate numerics: ``5.``, ``.5``, ``5.5E10``, ``5E10``, with an optional ``F``/``D``
  suffix (Java floating-point literal syntax, as JMS says); ``F`` rounds to a Java float;
* operators ``= <> < <= > >= + - * / %`` and ``( ) ,``. There is no ``!=``.

Exact literals are returned unbounded: the parser checks the long range after folding a unary
minus (so that ``-9223372036854775808`` is a valid literal).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
import struct

from sharedsub.core.conditions import AmqpCondition
from sharedsub.core.errors import SharedSubError

KEYWORDS = frozenset({"NOT", "AND", "OR", "BETWEEN", "LIKE", "ESCAPE", "IN", "IS", "TRUE", "FALSE", "NULL"})

_WHITESPACE = " \t\r\n\f"
_IDENT_START = re.compile(r"[A-Za-z_$]")
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
# Longest operators first, so '<=' is not read as '<' then '='.
_OPERATORS = ("<>", "<=", ">=", "<", ">", "=", "+", "-", "*", "/", "%", "(", ")", ",")
_HEX = re.compile(r"0[xX]([0-9a-fA-F]+)([lL]?)")
_APPROX = re.compile(
    r"(?:(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)([fFdD]?)"
    r"|[0-9]+([fFdD])"
)
_INTEGER = re.compile(r"([0-9]+)([lL]?)")
# A numeric literal must not run straight into a name or another number ('5abc', '1.2.3', '0x1g').
_GLUED = re.compile(r"[A-Za-z0-9_$.]*")
_DIGIT = re.compile(r"[0-9]")


QUOTED_CHARS = 1000
"""Longest selector an error description quotes whole; a longer one is cut (see :func:`quoted`)."""


def quoted(selector: str) -> str:
    """``selector`` as an error description shows it: whole up to :data:`QUOTED_CHARS`
    characters, else its first ones followed by ``…`` and its length, so that refusing a huge
    selector does not echo it back in the detach."""
    if len(selector) <= QUOTED_CHARS:
        return selector
    return f"{selector[:QUOTED_CHARS]}… ({len(selector)} characters)"


class SelectorError(SharedSubError):
    """A JMS selector that cannot be parsed or does not type-check.

    ``position`` is the 1-based character offset of the offending token in ``selector`` (line
    breaks count as one character); ``expected`` and ``found`` say what the parser wanted and
    what it got. The description reads
    ``invalid JMS selector "color = " at position 9: expected a value, found end of input``
    (a selector over :data:`QUOTED_CHARS` characters is shown cut, :func:`quoted`).
    Attach refusals carry it with ``amqp:invalid-field`` (docs/design.md §4.8).
    """

    condition = AmqpCondition.INVALID_FIELD

    def __init__(self, selector: str, position: int, expected: str, found: str) -> None:
        super().__init__(f'invalid JMS selector "{quoted(selector)}" at position {position}: expected {expected}, found {found}')
        self.selector = selector
        self.position = position
        self.expected = expected
        self.found = found


class Kind(enum.Enum):
    """Token kinds. ``value`` of a token: keyword in upper case, identifier name, decoded string,
    int, float, or the operator text."""

    KEYWORD = "keyword"
    IDENTIFIER = "identifier"
    STRING = "string"
    EXACT = "exact number"
    APPROX = "approximate number"
    OPERATOR = "operator"
    EOF = "end of input"


@dataclasses.dataclass(frozen=True, slots=True)
class Token:
    """One token: ``start``/``end`` are 0-based offsets into the selector text."""

    kind: Kind
    value: str | int | float
    start: int
    end: int

    def is_keyword(self, *names: str) -> bool:
        """Whether this token is one of the keywords ``names``."""
        return self.kind is Kind.KEYWORD and self.value in names

    def is_operator(self, *ops: str) -> bool:
        """Whether this token is one of the operators ``ops``."""
        return self.kind is Kind.OPERATOR and self.value in ops

    def describe(self, text: str) -> str:
        """How an error message names this token: ``keyword NULL``, ``')'``, ``end of input``."""
        if self.kind is Kind.EOF:
            return "end of input"
        if self.kind is Kind.OPERATOR:
            return f"'{self.value}'"
        if self.kind is Kind.KEYWORD:
            return f"keyword {self.value}"
        source = text[self.start : self.end]
        if self.kind in (Kind.EXACT, Kind.APPROX):
            return f"number {source}"
        return f"{self.kind.value} {source}"


def tokenize(text: str) -> list[Token]:
    """All tokens of ``text``, the last one ``EOF`` (at ``len(text)``).

    Raises:
        SelectorError: an unterminated string, quoted identifier or comment, a malformed or
            out-of-range approximate number, a malformed octal or hex number, or a character
            that starts no token.
    """
    tokens: list[Token] = []
    i, n = 0, len(text)
    while True:
        i = _skip_blank(text, i)
        if i >= n:
            tokens.append(Token(Kind.EOF, "", n, n))
            return tokens
        token = _next_token(text, i)
        tokens.append(token)
        i = token.end


def _skip_blank(text: str, i: int) -> int:
    n = len(text)
    while i < n:
        c = text[i]
        if c in _WHITESPACE:
            i += 1
        elif text.startswith("--", i):
            # Broker-J wants a line break after a line comment; the end of input ends it too here.
            while i < n and text[i] not in "\r\n":
                i += 1
        elif text.startswith("/*", i):
            close = text.find("*/", i + 2)
            if close < 0:
                raise SelectorError(text, i + 1, "'*/' to close the comment", "end of input")
            i = close + 2
        else:
            break
    return i


def _next_token(text: str, i: int) -> Token:
    c = text[i]
    if c == "'":
        value, end = _quoted(text, i, "'", "string literal")
        return Token(Kind.STRING, value, i, end)
    if c == '"':
        value, end = _quoted(text, i, '"', "quoted identifier")
        return Token(Kind.IDENTIFIER, value, i, end)
    if _IDENT_START.match(c):
        m = _IDENT.match(text, i)
        assert m is not None
        word = m.group()
        if word.upper() in KEYWORDS:
            return Token(Kind.KEYWORD, word.upper(), i, m.end())
        return Token(Kind.IDENTIFIER, word, i, m.end())
    if _DIGIT.match(c) or (c == "." and _DIGIT.match(text, i + 1)):
        return _number(text, i)
    for op in _OPERATORS:
        if text.startswith(op, i):
            return Token(Kind.OPERATOR, op, i, i + len(op))
    expected = "'<>' (there is no '!=')" if text.startswith("!=", i) else "a value or an operator"
    raise SelectorError(text, i + 1, expected, f"character {c!r}")


def _quoted(text: str, i: int, quote: str, what: str) -> tuple[str, int]:
    """Decode the quoted token starting at ``i``; a doubled quote stands for one."""
    parts: list[str] = []
    j = i + 1
    while True:
        k = text.find(quote, j)
        if k < 0:
            raise SelectorError(text, i + 1, f"a closing {quote} for the {what}", "end of input")
        parts.append(text[j:k])
        if text.startswith(quote * 2, k):
            parts.append(quote)
            j = k + 2
        else:
            return "".join(parts), k + 1


def _number(text: str, i: int) -> Token:
    m = _HEX.match(text, i)
    if m:
        token = Token(Kind.EXACT, int(m.group(1), 16), i, m.end())
    elif m := _APPROX.match(text, i):
        token = Token(Kind.APPROX, _approx_value(text, i, m), i, m.end())
    else:
        m = _INTEGER.match(text, i)
        assert m is not None
        digits = m.group(1)
        if len(digits) > 1 and digits.startswith("0"):
            if any(d in "89" for d in digits):
                raise SelectorError(text, i + 1, "an octal number (digits 0-7 after a leading 0)", f"number {m.group()}")
            value = int(digits, 8)
        else:
            value = int(digits)
        token = Token(Kind.EXACT, value, i, m.end())
    glued = _GLUED.match(text, token.end)
    if glued and glued.group():
        raise SelectorError(text, i + 1, "a number", repr(text[i : glued.end()]))
    return token


def _approx_value(text: str, i: int, m: re.Match[str]) -> float:
    source = m.group()
    suffix = (m.group(1) or m.group(2) or "").upper()
    value = float(source[:-1] if suffix else source)
    if suffix == "F":
        try:
            value = struct.unpack("<f", struct.pack("<f", value))[0]
        except OverflowError:
            value = math.inf
    if math.isinf(value):
        raise SelectorError(text, i + 1, "a number within the range of a double", f"number {source}")
    return value
