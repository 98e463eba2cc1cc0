"""Recursive-descent parser and type checker for JMS 2.0 message selectors.

Grammar, lowest precedence first (JMS 2.0 §3.8.1.2; Broker-J's SelectorParser.jj)::

    selector   := or EOF                       -- no tokens at all: no selector (None)
    or         := and (OR and)*
    and        := not (AND not)*
    not        := NOT not | equality
    equality   := comparison ( ('=' | '<>') comparison | IS [NOT] NULL )*
    comparison := additive ( ('<' | '<=' | '>' | '>=') additive
                           | [NOT] LIKE string [ESCAPE string]
                           | [NOT] BETWEEN additive AND additive
                           | [NOT] IN '(' string (',' string)* ')' )*
    additive   := multiplicative (('+' | '-') multiplicative)*
    multiplicative := unary (('*' | '/' | '%') unary)*
    unary      := ('+' | '-') unary | primary
    primary    := literal | identifier | '(' or ')'

NOT binds looser than comparisons, as in SQL and the JMS spec (``NOT a = 1`` is ``NOT (a = 1)``;
Broker-J gets there with a lookahead). ``%`` (remainder) is Broker-J's extension. NULL is only
valid in ``IS [NOT] NULL`` (``x = NULL`` and ``NULL = 0`` are errors, as in Broker-J).

Type checks (the parser refuses what can never be true or is meaningless): the selector must be
boolean or a property (a bare property is a boolean property); operands of arithmetic and of
``< <= > >= BETWEEN`` must be numbers (strings and booleans compare with ``=``/``<>`` only);
``LIKE``/``IN`` need a string; ``AND``/``OR``/``NOT`` need booleans; ``=``/``<>`` refuse two
operands of known, different types. Properties (:attr:`Type.ANY`) pass every check; a wrong
type in a message makes the comparison unknown at evaluation time.
"""

from __future__ import annotations

from sharedsub.core.selector import ast
from sharedsub.core.selector.ast import Type
from sharedsub.core.selector.lexer import Kind, SelectorError, Token, tokenize

_ORDERING = ("<", "<=", ">", ">=")

# Limits on what a selector may be, decided from its text and tree alone, whatever back end then
# evaluates it (routing uses Arrow; the Spark SQL form has a size limit of its own,
# sparksql.MAX_SQL_CHARS, which refuses a translation, never a selector). Each refusal names the
# limit and its value. The largest selectors the tests accept (tests/selector_parity.py
# PARSER_LIMIT_SELECTORS, and 3,000 TRUEs joined by AND: 26,995 characters, 5,999 nodes) stay
# inside them.
#
# Nesting and depth keep every recursive walk (this parser, both back ends, Spark's SQL parser,
# which overflows its stack on a few hundred nested parentheses around function calls) far from
# a stack overflow: the parser recurses ~9 frames per parenthesis, so nesting is capped at 50;
# other chains are parsed iteratively but make deep trees, capped at 100 levels, where a chain of
# ANDs (or ORs) counts as one level (every walk takes those chains flat, see ast.chain).
MAX_NESTING = 50
"""Parentheses, signs and NOTs nested in one another (the nesting limit)."""
MAX_DEPTH = 100
"""Levels of the tree, an AND (OR) chain counting as one (the depth limit)."""
MAX_SELECTOR_CHARS = 32_768
"""Characters of selector text, comments and blanks included (the length limit); checked before
anything else, so a huge text costs nothing to refuse. As long as the old limit on 32 KiB of
Spark SQL let a selector be (its SQL is never much shorter than its text). Over AMQP an attach
must also fit the max frame size (32 KiB with proton's defaults), so a selector near this
length may not get to the check at all."""
MAX_NODES = 8_192
"""Nodes of the tree (the size limit): every operator and operand (literal, identifier) once;
an IN list and a LIKE pattern belong to their operator, parentheses are none. Bounds the work
of compiling a selector and of evaluating it per batch: each node is a few Arrow kernels over
the batch (about 40 µs over 5,000 rows for a property comparison or a LIKE), so a selector at
this limit costs a few tenths of a second per 5,000-row batch."""
MAX_ARITHMETIC = 64
"""Arithmetic operators (``+ - * / %`` and a sign on a non-literal) in the tree (the arithmetic
limit). The Arrow back end computes arithmetic row by row with the reference's Java semantics
(about 1 µs per operator and row), so it is bounded apart from the other nodes: 64 operators
cost about what the largest arithmetic the Spark SQL limit let through did (a 50-deep chain)."""


def parse(text: str) -> ast.Selector | None:
    """The selector ``text`` parsed and type-checked; None when it has no tokens (blank or
    comments only), which means "no selector": every message matches.

    Raises:
        SelectorError: with the 1-based position of the first offending token; or a selector
            over one of the limits above (the description names the limit and its value).
    """
    if len(text) > MAX_SELECTOR_CHARS:
        raise SelectorError(
            text,
            MAX_SELECTOR_CHARS + 1,
            f"at most {MAX_SELECTOR_CHARS} characters (the selector length limit)",
            f"{len(text)} characters",
        )
    tokens = tokenize(text)
    if tokens[0].kind is Kind.EOF:
        return None
    return ast.Selector(text, _Parser(text, tokens).selector())


class _Parser:
    def __init__(self, text: str, tokens: list[Token]) -> None:
        self.text = text
        self.tokens = tokens
        self.i = 0
        self.nesting = 0

    # -- token helpers -------------------------------------------------------------------------

    @property
    def peek(self) -> Token:
        return self.tokens[self.i]

    def advance(self) -> Token:
        token = self.tokens[self.i]
        if token.kind is not Kind.EOF:
            self.i += 1
        return token

    def error(self, expected: str, token: Token | None = None) -> SelectorError:
        token = token or self.peek
        return SelectorError(self.text, token.start + 1, expected, token.describe(self.text))

    def type_error(self, expected: str, expr: ast.Expr) -> SelectorError:
        return SelectorError(self.text, expr.start + 1, expected, self.describe(expr))

    def describe(self, expr: ast.Expr) -> str:
        source = self.text[expr.start : expr.end]
        match expr:
            case ast.Exact() | ast.Approx():
                return f"number {source}"
            case ast.String():
                return f"string {source}"
            case ast.Boolean():
                return f"boolean {source}"
            case ast.Identifier(name=name):
                return f"{ast.static_type(expr).value} header {name}"
            case ast.Unary() | ast.Arithmetic():
                return f"arithmetic expression {source}"
        return f"boolean expression {source}"

    def enter(self, token: Token) -> None:
        """Count one more level of parentheses, signs or NOTs (undone by :meth:`leave`)."""
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise self.error(f"at most {MAX_NESTING} nested parentheses, signs or NOTs (the selector nesting limit)", token)

    def leave(self) -> None:
        self.nesting -= 1

    def expect_operator(self, op: str, expected: str) -> Token:
        if not self.peek.is_operator(op):
            raise self.error(expected)
        return self.advance()

    def expect_keyword(self, keyword: str, expected: str) -> Token:
        if not self.peek.is_keyword(keyword):
            raise self.error(expected)
        return self.advance()

    # -- type checks ---------------------------------------------------------------------------

    def check(self, expr: ast.Expr, allowed: Type, expected: str) -> ast.Expr:
        if ast.static_type(expr) not in (allowed, Type.ANY):
            raise self.type_error(expected, expr)
        return expr

    def boolean(self, expr: ast.Expr) -> ast.Expr:
        return self.check(expr, Type.BOOLEAN, "a boolean expression")

    def number(self, expr: ast.Expr) -> ast.Expr:
        return self.check(expr, Type.NUMBER, "a number")

    def ordered(self, expr: ast.Expr, op: str) -> ast.Expr:
        return self.check(expr, Type.NUMBER, f"a number to compare with {op} (strings and booleans allow = and <> only)")

    def comparable(self, left: ast.Expr, right: ast.Expr) -> None:
        lt, rt = ast.static_type(left), ast.static_type(right)
        if Type.ANY not in (lt, rt) and lt is not rt:
            source = self.text[left.start : left.end]
            raise self.type_error(f"a {lt.value} to compare with {source}", right)

    # -- grammar -------------------------------------------------------------------------------

    def selector(self) -> ast.Expr:
        expr = self.or_()
        if self.peek.kind is not Kind.EOF:
            raise self.error("an operator or end of input")
        expr = self.boolean(expr)
        _check_tree(self, expr)
        return expr

    def or_(self) -> ast.Expr:
        left = self.and_()
        while self.peek.is_keyword("OR"):
            self.advance()
            right = self.and_()
            left = ast.Logical("OR", self.boolean(left), self.boolean(right), left.start, right.end)
        return left

    def and_(self) -> ast.Expr:
        left = self.not_()
        while self.peek.is_keyword("AND"):
            self.advance()
            right = self.not_()
            left = ast.Logical("AND", self.boolean(left), self.boolean(right), left.start, right.end)
        return left

    def not_(self) -> ast.Expr:
        if self.peek.is_keyword("NOT"):
            token = self.advance()
            self.enter(token)
            operand = self.not_()
            self.leave()
            return ast.Not(self.boolean(operand), token.start, operand.end)
        return self.equality()

    def equality(self) -> ast.Expr:
        left = self.comparison()
        while True:
            token = self.peek
            if token.is_operator("=", "<>"):
                self.advance()
                right = self.comparison()
                self.comparable(left, right)
                left = ast.Comparison(str(token.value), left, right, left.start, right.end)
            elif token.is_keyword("IS"):
                self.advance()
                negated = self.peek.is_keyword("NOT")
                if negated:
                    self.advance()
                end = self.expect_keyword("NULL", "NULL or NOT NULL after IS").end
                left = ast.IsNull(left, negated, left.start, end)
            else:
                return left

    def comparison(self) -> ast.Expr:
        left = self.additive()
        while True:
            token = self.peek
            if token.is_operator(*_ORDERING):
                op = str(self.advance().value)
                right = self.additive()
                left = ast.Comparison(op, self.ordered(left, op), self.ordered(right, op), left.start, right.end)
                continue
            negated = token.is_keyword("NOT")
            if negated:
                following = self.tokens[self.i + 1]
                if not following.is_keyword("LIKE", "BETWEEN", "IN"):
                    raise self.error("LIKE, BETWEEN or IN after NOT", following)
                self.advance()
            if self.peek.is_keyword("LIKE"):
                left = self.like(left, negated)
            elif self.peek.is_keyword("BETWEEN"):
                left = self.between(left, negated)
            elif self.peek.is_keyword("IN"):
                left = self.in_(left, negated)
            else:
                return left

    def like(self, operand: ast.Expr, negated: bool) -> ast.Expr:
        self.advance()
        self.check(operand, Type.STRING, "a string before LIKE")
        pattern = self.string_literal("a string literal pattern after LIKE")
        end = pattern.end
        escape: str | None = None
        if self.peek.is_keyword("ESCAPE"):
            self.advance()
            token = self.peek
            escape_literal = self.string_literal("a string literal after ESCAPE")
            if len(escape_literal.value) != 1:
                raise self.error("a single-character ESCAPE string", token)
            escape, end = escape_literal.value, escape_literal.end
            _check_escapes(self, pattern, escape)
        return ast.Like(operand, pattern.value, escape, negated, operand.start, end)

    def between(self, operand: ast.Expr, negated: bool) -> ast.Expr:
        self.advance()
        low = self.additive()
        self.expect_keyword("AND", "AND between the bounds of BETWEEN")
        high = self.additive()
        for expr in (operand, low, high):
            self.ordered(expr, "BETWEEN")
        return ast.Between(operand, low, high, negated, operand.start, high.end)

    def in_(self, operand: ast.Expr, negated: bool) -> ast.Expr:
        self.advance()
        self.check(operand, Type.STRING, "a string before IN")
        self.expect_operator("(", "'(' after IN")
        values = [self.string_literal("a string literal in the IN list").value]
        while self.peek.is_operator(","):
            self.advance()
            values.append(self.string_literal("a string literal in the IN list").value)
        end = self.expect_operator(")", "',' or ')' in the IN list").end
        return ast.In(operand, tuple(values), negated, operand.start, end)

    def string_literal(self, expected: str) -> ast.String:
        token = self.peek
        if token.kind is not Kind.STRING:
            raise self.error(expected)
        self.advance()
        return ast.String(str(token.value), token.start, token.end)

    def additive(self) -> ast.Expr:
        left = self.multiplicative()
        while self.peek.is_operator("+", "-"):
            op = str(self.advance().value)
            right = self.multiplicative()
            left = ast.Arithmetic(op, self.number(left), self.number(right), left.start, right.end)
        return left

    def multiplicative(self) -> ast.Expr:
        left = self.unary()
        while self.peek.is_operator("*", "/", "%"):
            op = str(self.advance().value)
            right = self.unary()
            left = ast.Arithmetic(op, self.number(left), self.number(right), left.start, right.end)
        return left

    def unary(self) -> ast.Expr:
        if not self.peek.is_operator("+", "-"):
            return self.primary()
        op_token = self.advance()
        self.enter(op_token)
        operand = self.number(self.unary())
        self.leave()
        start, end = op_token.start, operand.end
        # Fold signs into numeric literals, as Broker-J does: that is how -9223372036854775808
        # (whose digits alone exceed a long) is written.
        negate = op_token.value == "-"
        match operand:
            case ast.Exact(value=v):
                return ast.Exact(-v if negate else v, start, end)
            case ast.Approx(value=v):
                return ast.Approx(-v if negate else v, start, end)
        return ast.Unary(str(op_token.value), operand, start, end)

    def primary(self) -> ast.Expr:
        token = self.peek
        match token.kind:
            case Kind.EXACT:
                self.advance()
                return ast.Exact(int(token.value), token.start, token.end)
            case Kind.APPROX:
                self.advance()
                return ast.Approx(float(token.value), token.start, token.end)
            case Kind.STRING:
                self.advance()
                return ast.String(str(token.value), token.start, token.end)
            case Kind.IDENTIFIER:
                self.advance()
                return ast.Identifier(str(token.value), token.start, token.end)
        if token.is_keyword("TRUE", "FALSE"):
            self.advance()
            return ast.Boolean(token.value == "TRUE", token.start, token.end)
        if token.is_operator("("):
            self.advance()
            self.enter(token)
            inner = self.or_()
            self.leave()
            self.expect_operator(")", "')'")
            return inner
        if token.is_keyword("NULL"):
            raise self.error("a value (NULL is a keyword; test for null with IS NULL)")
        raise self.error("a value")


def _check_escapes(parser: _Parser, pattern: ast.String, escape: str) -> None:
    """The escape character must be followed by a character (any: it then stands for itself)."""
    i = 0
    while i < len(pattern.value):
        if pattern.value[i] == escape:
            if i + 1 == len(pattern.value):
                raise SelectorError(
                    parser.text,
                    pattern.start + 1,
                    f"a character after the ESCAPE character {escape!r} at the end of the LIKE pattern",
                    f"string {parser.text[pattern.start : pattern.end]}",
                )
            i += 2
        else:
            i += 1


def _check_tree(parser: _Parser, expr: ast.Expr) -> None:
    """Every exact literal (after sign folding) is a Java long, and the tree is within
    :data:`MAX_DEPTH` (a chain of ANDs, or ORs, counting as one level), :data:`MAX_NODES` and
    :data:`MAX_ARITHMETIC`. Iterative: the tree may be deep.

    Raises:
        SelectorError: at the first literal out of range, else at the first node deeper than
            the depth limit, else (position 1) naming the size or arithmetic limit and the
            selector's count.
    """
    nodes = arithmetic = deepest = 0
    too_deep: ast.Expr | None = None
    stack: list[tuple[ast.Expr, int]] = [(expr, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH and (too_deep is None or node.start < too_deep.start):
            too_deep = node
        if isinstance(node, ast.Exact) and not ast.LONG_MIN <= node.value <= ast.LONG_MAX:
            raise SelectorError(
                parser.text,
                node.start + 1,
                "an exact number within the range of a long (-2^63 .. 2^63-1)",
                f"number {parser.text[node.start : node.end]}",
            )
        if isinstance(node, ast.Logical):
            operands = ast.chain(node)
            nodes += len(operands) - 1  # the chain's AND (OR) nodes
            stack.extend((child, depth + 1) for child in reversed(operands))
            continue
        nodes += 1
        if isinstance(node, ast.Arithmetic | ast.Unary):
            arithmetic += 1
        for field in ("high", "low", "right", "left", "operand"):
            child = getattr(node, field, None)
            if child is not None:
                stack.append((child, depth + 1))
    if too_deep is not None:
        raise SelectorError(
            parser.text,
            too_deep.start + 1,
            f"an expression at most {MAX_DEPTH} operators deep (the selector depth limit)",
            f"one {deepest} deep",
        )
    if nodes > MAX_NODES:
        raise SelectorError(
            parser.text,
            1,
            f"at most {MAX_NODES} operators and operands (the selector size limit)",
            f"{nodes}",
        )
    if arithmetic > MAX_ARITHMETIC:
        raise SelectorError(
            parser.text,
            1,
            f"at most {MAX_ARITHMETIC} arithmetic operators (the selector arithmetic limit)",
            f"{arithmetic}",
        )
