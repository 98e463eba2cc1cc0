"""Binding-pattern matching, as the topic-exchange table of wire-spec §2.11."""

from __future__ import annotations

import re

import pytest

from sharedsub.binding import matches, normalise_pattern, to_regex

# (pattern, key, expected) — the rows of wire-spec §2.11 (Broker-J TopicExchangeTest) plus edges.
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
