"""Property tests of the pure edge code a client's strings reach: addresses, link names,
binding patterns, selectors. Each raises only its documented error, whatever the input."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from sharedsub.core import addressing
from sharedsub.core.errors import InvalidAddress, SharedSubError
from sharedsub.core.fanout import binding
from sharedsub.core.selector import SelectorError, check, parse_selector
from sharedsub.core.selector import parser as selector_parser
from sharedsub.core.subscriptions import linknames
from tests.fuzz.seed import SEED

FUZZ = settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

any_text = st.text(max_size=60)
wordy = st.text(st.sampled_from("ab.#*|/-_ $^()[]{}+?\\"), max_size=24)


@seed(SEED)
@FUZZ
@given(
    st.one_of(st.none(), any_text, wordy),
    st.one_of(st.none(), any_text),
    st.dictionaries(any_text, st.one_of(any_text, st.integers(), st.none()), max_size=3),
)
def test_addressing_raises_only_invalid_address(address: str | None, subject: str | None, props: dict) -> None:
    try:
        parsed = addressing.parse_address(address)
    except InvalidAddress:
        return
    assert address is not None and address.startswith(parsed.topic)
    for fn in (lambda: addressing.binding_of(parsed), lambda: addressing.routing_key(parsed, props, subject)):
        try:
            assert isinstance(fn(), str)
        except InvalidAddress:
            pass


@seed(SEED)
@FUZZ
@given(st.one_of(any_text, st.text(st.sampled_from("ab|globalvoti-0123456789"), max_size=30)), st.booleans())
def test_link_names_parse_without_failing(name: str, shared: bool) -> None:
    parsed = linknames.parse_link_name(name)  # documented: never fails
    assert name.startswith(parsed.subscription_name)
    assert parsed.ordinal is None or parsed.ordinal >= 1
    assert isinstance(linknames.subscription_name_of(name, shared=shared), str)


@seed(SEED)
@FUZZ
@given(any_text, st.booleans(), st.booleans(), st.booleans(), st.integers(-3, 5))
def test_link_names_build_or_raise_value_error(name: str, shared: bool, durable: bool, is_global: bool, ordinal: int) -> None:
    try:
        built = linknames.build_link_name(name, shared=shared, durable=durable, is_global=is_global, ordinal=ordinal)
    except ValueError:
        return
    parsed = linknames.parse_link_name(built)
    assert parsed.subscription_name == name
    assert parsed.ordinal == ordinal
    assert parsed.global_hint == is_global


@seed(SEED)
@settings(FUZZ, max_examples=400)
@given(wordy, wordy)
def test_binding_matcher_agrees_with_its_regex(pattern: str, key: str) -> None:
    expected = re.match(binding.to_regex(pattern), "." + binding.normalise_key(key)) is not None
    assert binding.matches(pattern, key) is expected, (pattern, key)


# Grammar-shaped selectors: tokens of the language glued at random, and nested expressions.
_tokens = st.sampled_from(
    ["a", "b", "JMSPriority", "JMSType", '"q"', "'s'", "''''", "1", "-1", "0x1F", "017", "1L", "2.5", ".5", "5.",
     "1e400", "9223372036854775808", "-9223372036854775808", "TRUE", "FALSE", "NULL", "NOT", "AND", "OR", "IS",
     "LIKE", "ESCAPE", "BETWEEN", "IN", "(", ")", ",", "=", "<>", "<", "<=", ">", ">=", "+", "-", "*", "/", "%",
     "--c\n", "/*c*/", "'%_'", "'\\'", "!=", "'unterminated", '"x'],
)
token_soup = st.lists(_tokens, max_size=30).map(" ".join)
expr = st.recursive(
    st.sampled_from(["a", "b", "1", "'x'", "TRUE", "a IS NULL", "a LIKE 'x%'", "a IN ('1','2')", "a BETWEEN 1 AND 2"]),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from([" AND ", " OR ", " = ", " <> ", " + ", " * ", " > "]), inner).map("".join),
        inner.map(lambda e: f"NOT {e}"),
        inner.map(lambda e: f"({e})"),
        inner.map(lambda e: f"-{e}"),
    ),
    max_leaves=40,
)


def _checked(text: str) -> None:
    try:
        check(text)
        parse_selector(text)
    except SelectorError as exc:  # either outcome is a pass; a refusal must be well formed
        assert isinstance(exc, SharedSubError)  # noqa: PT017
        assert 1 <= exc.position <= max(1, len(text) + 1), (exc.position, len(text))  # noqa: PT017
        assert str(exc.condition) == "amqp:invalid-field"  # noqa: PT017


@seed(SEED)
@FUZZ
@given(st.one_of(any_text, token_soup, expr))
def test_selectors_raise_only_selector_errors(text: str) -> None:
    _checked(text)


@seed(SEED)
@settings(FUZZ, max_examples=20)
@given(st.integers(1, 3000), st.sampled_from(["(", "NOT ", "-", "a = ", "a AND "]), st.sampled_from(["a", "1", ")"]))
def test_deep_selectors_stay_within_the_documented_limits(n: int, opener: str, closer: str) -> None:
    """Deep nesting is refused by MAX_NESTING / MAX_DEPTH, never a RecursionError."""
    text = opener * n + "a" + (")" * n if opener == "(" else "") + (closer if closer != ")" else "")
    _checked(text)
    if opener == "(" and n > selector_parser.MAX_NESTING:
        try:
            check(text)
        except SelectorError:
            pass
        else:
            raise AssertionError(f"{n} nested parentheses accepted; MAX_NESTING is {selector_parser.MAX_NESTING}")
