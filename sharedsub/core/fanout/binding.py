"""Topic-exchange binding patterns (docs/design.md §3, docs/wire.md §2.11); pure.

A routing key is a list of words separated by '.'; a pattern word ``*`` matches exactly one
word and ``#`` matches zero or more words. Matching is exact and case-sensitive. As with
Java's ``String.split``, trailing empty words are dropped (``a.`` behaves as ``a``).

Two back ends with one meaning: :func:`matches`, which routing uses, and :func:`to_regex`, a
regular expression (same syntax in Python ``re`` and Java, so Spark ``rlike``) applied to
``"." + normalised_key``, for querying topic tables from Spark.

:func:`matches` walks the key once, word by word, keeping the set of pattern positions reached
(each ``#`` may stay or move on): time grows with pattern words × key words, never
exponentially. The regex back end can backtrack exponentially on patterns with many ``#``
words (``#.a.#.a.#.a…b`` against a long key of ``a`` words), which is why routing does not use
it. Patterns and keys are bounded (:data:`MAX_PATTERN_LENGTH`, :data:`MAX_KEY_LENGTH`):
a longer binding is refused at attach, a longer routing key at publish.
"""

from __future__ import annotations

import functools
import re

MAX_PATTERN_LENGTH = 1024
"""Longest binding pattern, in characters (a longer one is refused at attach)."""
MAX_KEY_LENGTH = 1024
"""Longest routing key, in characters (a message with a longer one is refused at publish)."""


def normalise_key(key: str) -> str:
    """Drop trailing empty words, as Java's split does."""
    return key.rstrip(".") if key.strip(".") or not key else ""


def _words(text: str) -> list[str]:
    return normalise_key(text).split(".")


def normalise_pattern(pattern: str) -> str:
    """Collapse runs of ``#`` words and put ``*`` before ``#`` (``#.*`` → ``*.#``)."""
    words = _words(pattern)
    changed = True
    while changed:
        changed = False
        out: list[str] = []
        for w in words:
            if w == "#" and out and out[-1] == "#":
                changed = True
                continue
            if w == "*" and out and out[-1] == "#":
                out[-1] = "*"
                out.append("#")
                changed = True
                continue
            out.append(w)
        words = out
    return ".".join(words)


@functools.lru_cache(maxsize=4096)
def to_regex(pattern: str) -> str:
    """Anchored regex that matches ``"." + normalise_key(key)`` exactly when ``key`` matches."""
    parts = []
    for w in _words(normalise_pattern(pattern)):
        if w == "#":
            parts.append(r"(\.[^.]*)*")
        elif w == "*":
            parts.append(r"\.[^.]*")
        else:
            parts.append(r"\." + re.escape(w))
    return "^" + "".join(parts) + "$"


@functools.lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(to_regex(pattern))


@functools.lru_cache(maxsize=4096)
def _pattern_words(pattern: str) -> tuple[str, ...]:
    return tuple(_words(normalise_pattern(pattern)))


def _advance_hashes(words: tuple[str, ...], states: set[int]) -> set[int]:
    """``states`` plus every position reached by letting ``#`` words match nothing."""
    out = set(states)
    todo = list(states)
    while todo:
        i = todo.pop()
        if i < len(words) and words[i] == "#" and i + 1 not in out:
            out.add(i + 1)
            todo.append(i + 1)
    return out


def matches(pattern: str, key: str) -> bool:
    """Return True when routing ``key`` matches binding ``pattern`` (linear in the key's words)."""
    if pattern == "#":
        return True
    words = _pattern_words(pattern)
    states = _advance_hashes(words, {0})
    for word in _words(key):
        step: set[int] = set()
        for i in states:
            if i == len(words):
                continue
            w = words[i]
            if w == "#":
                step.add(i)  # '#' takes this word and may take more
            elif w == "*" or w == word:
                step.add(i + 1)
        if not step:
            return False
        states = _advance_hashes(words, step)
    return len(words) in states


def check_pattern(pattern: str) -> None:
    """Raise ValueError when ``pattern`` is longer than :data:`MAX_PATTERN_LENGTH`."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise ValueError(f"binding pattern of {len(pattern)} characters; the limit is {MAX_PATTERN_LENGTH}")


def check_key(key: str) -> None:
    """Raise ValueError when routing ``key`` is longer than :data:`MAX_KEY_LENGTH`."""
    if len(key) > MAX_KEY_LENGTH:
        raise ValueError(f"routing key of {len(key)} characters; the limit is {MAX_KEY_LENGTH}")
