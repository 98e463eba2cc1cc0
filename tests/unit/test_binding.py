"""Binding-pattern matching, as the topic-exchange table of docs/wire.md §2.11."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sharedsub.core.fanout import binding as binding_module
from sharedsub.core.fanout.binding import (
    MAX_KEY_LENGTH,
    MAX_PATTERN_LENGTH,
    check_key,
    check_pattern,
    matches,
    normalise_pattern,
    to_regex,
)

# (pattern, key, expected) — the rows of docs/wire.md §2.11 (Broker-J TopicExchangeTest) plus edges.
CASES = [
    ("a.*", "a.b", True),
    ("a.*", "a.bb", True),
    ("a.*", "a.b.c", False),
    ("a.*", "a", False),
    ("a.#", "a", True),
    ("a.#", "a.b", True),
    ("a.#", "a.b.c", True),
    ("a.#", "b", False),
    ("*.stock.#", "stock.nasdaq", False),
    ("*.stock.#", "usd.stock", True),
    ("*.stock.#", "usd.stock.nasdaq.x", True),
    ("a.*.#.b", "a.c.b", True),
    ("a.*.#.b", "a.c.d.b", True),
    ("a.*.#.b", "a.c.d.d.b", True),
    ("a.*.#.b", "a.b", False),
    ("a.*.#.b.c", "a.a.b.c", True),
    ("a.*.#.b.c", "a.b.c.b.c", True),
    ("a.*.#.b.c", "a.c.b.b", False),
    ("a.*.#.b.c", "a.b.c.b", False),
    ("a.b.c.d", "a.b.c", False),
    ("a.b.c", "a.b.c", True),
    ("a.b.c", "A.b.c", False),  # case-sensitive
    ("#", "", True),
    ("#", "anything.at.all", True),
    ("#.a", "a", True),
    ("#.a", "x.y.a", True),
    ("#.a", "a.x", False),
    ("a.#.#.b", "a.b", True),
    ("a.#.*", "a", False),
    ("a.#.*", "a.b", True),
    ("a", "a.", True),  # trailing empty word dropped, as Java split does
    ("a.b", "a.b..", True),
    ("", "", True),
    ("*", "word", True),
    ("*", "two.words", False),
    ("a+b", "a+b", True),  # regex metacharacters are literal
    ("a+b", "aab", False),
    ("x.(y)", "x.(y)", True),
    ("a", "a\n", False),  # '$' must not match before a trailing newline
    ("a.*", "a.b\n", True),  # "b\n" is one word
]


@pytest.mark.parametrize(("pattern", "key", "expected"), CASES, ids=[f"{p}~{k}" for p, k, _ in CASES])
def test_matches(pattern: str, key: str, expected: bool) -> None:
    assert matches(pattern, key) is expected


@pytest.mark.parametrize(("pattern", "key", "expected"), CASES, ids=[f"{p}~{k}" for p, k, _ in CASES])
def test_regex_back_end_agrees(pattern: str, key: str, expected: bool) -> None:
    # The regex is what the Spark job evaluates with rlike over '.' + normalised key.
    key_norm = key.rstrip(".") if key.strip(".") else ""
    assert (re.fullmatch(to_regex(pattern), "." + key_norm) is not None) is expected


def test_normalise_pattern() -> None:
    assert normalise_pattern("a.#.#.b") == "a.#.b"
    assert normalise_pattern("#.*") == "*.#"
    assert normalise_pattern("#.#.*.#") == "*.#"


# ---- the word-by-word matcher: same meaning as the regex, linear time, bounded inputs

_WORDS = st.sampled_from(["a", "b", "c", "", "ab"])
_PATTERN_WORDS = st.sampled_from(["a", "b", "*", "#", "", "ab"])


@given(pattern=st.lists(_PATTERN_WORDS, max_size=7).map(".".join), key=st.lists(_WORDS, max_size=8).map(".".join))
@settings(max_examples=1500, deadline=None)
def test_the_matcher_agrees_with_the_regex_back_end(pattern: str, key: str) -> None:
    key_norm = key.rstrip(".") if key.strip(".") else ""
    assert matches(pattern, key) is (re.fullmatch(to_regex(pattern), "." + key_norm) is not None)


def test_a_pattern_that_makes_a_regex_backtrack_is_matched_by_walking_the_key_once() -> None:
    """wire: one subscriber bound to '#.a.#.a…b' stalled routing for 40 s with the regex matcher.

    The walk keeps at most one state per pattern word, so the work per key word is bounded by
    the pattern's length; counted here as calls, not timed."""
    pattern = ".".join(["#", "a"] * 7) + ".b"
    key = ".".join(["a"] * 60)
    calls = 0
    real = binding_module._advance_hashes

    def counting(words: tuple[str, ...], states: set[int]) -> set[int]:
        nonlocal calls
        calls += 1
        assert len(states) <= len(words) + 1
        return real(words, states)

    binding_module._advance_hashes = counting
    try:
        assert matches(pattern, key) is False
        assert matches(pattern, key + ".b") is True
    finally:
        binding_module._advance_hashes = real
    assert calls <= 2 * (60 + 2)  # one per key word and one to start, per call


def test_length_limits() -> None:
    check_pattern("a" * MAX_PATTERN_LENGTH)
    check_key("k" * MAX_KEY_LENGTH)
    with pytest.raises(ValueError, match=f"limit is {MAX_PATTERN_LENGTH}"):
        check_pattern("a" * (MAX_PATTERN_LENGTH + 1))
    with pytest.raises(ValueError, match=f"limit is {MAX_KEY_LENGTH}"):
        check_key("k" * (MAX_KEY_LENGTH + 1))
