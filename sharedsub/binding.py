"""Topic-exchange binding patterns (DESIGN §3, wire-spec §2.11); pure.

A routing key is a list of words separated by '.'; a pattern word ``*`` matches exactly one
word and ``#`` matches zero or more words. Matching is exact and case-sensitive. As with
Java's ``String.split``, trailing empty words are dropped (``a.`` behaves as ``a``).

Two back ends with one meaning: :func:`matches` for Python and :func:`to_regex`, a regular
expression (same syntax in Python ``re`` and Java, so Spark ``rlike``) applied to
``"." + normalised_key``.
"""

from __future__ import annotations

import functools
import re


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


def matches(pattern: str, key: str) -> bool:
    """Return True when routing ``key`` matches binding ``pattern``."""
    if pattern == "#":
        return True
    return _compiled(pattern).fullmatch("." + normalise_key(key)) is not None
