"""One module owns the ``_cluster/`` key space: sharedsub.core.layout.

The objects members of a data dir share (leases, claims, presence, dispatch owners, the store
probes) were once spelled in four places (code review of 131e2cb, §3.4); a key spelled twice
drifts. This test parses every shipped module (sharedsub, connectors, jobs) and fails on a string
constant, other than a docstring, that starts with ``_cluster`` outside sharedsub/core/layout.py:
build the key through layout's functions and constants instead. Parts of f-strings count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sharedsub", "connectors", "jobs")
OWNER = "sharedsub/core/layout.py"
PREFIX = "_cluster"


def _docstrings(tree: ast.AST) -> set[int]:
    """``id`` of each docstring's constant node (a module's, a class's, a function's)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def cluster_keys(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every non-docstring string constant in ``source`` starting with ``_cluster``."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and node.value.startswith(PREFIX) and id(node) not in skip
    ]


def test_only_the_layout_spells_cluster_keys() -> None:
    offenders = []
    modules = sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))
    assert any(p.relative_to(ROOT).as_posix() == OWNER for p in modules)
    for path in modules:
        rel = path.relative_to(ROOT).as_posix()
        if rel == OWNER:
            continue
        offenders += [f"{rel}:{line}: {text!r}" for line, text in cluster_keys(path.read_text())]
    assert not offenders, (
        f"_cluster/ keys spelled outside {OWNER} (use its functions and constants):\n" + "\n".join(offenders)
    )


@pytest.mark.parametrize(
    ("snippet", "found"),
    [
        ('KEY = "_cluster/x"', [(1, "_cluster/x")]),
        ('def f(k):\n    return f"_cluster/{k}"', [(2, "_cluster/")]),
        ('{"_cluster": "cluster"}', [(1, "_cluster")]),
        ('"""Keys under ``_cluster/``."""', []),  # a module docstring
        ('def f():\n    """_cluster/members/<k>"""', []),  # a function's
        ('class C:\n    """_cluster/fanout"""', []),  # a class's
        ('KEY = "topics/_cluster"', []),  # not at the start
        ('x = 1\n"_cluster/x"', [(2, "_cluster/x")]),  # a bare string that is no docstring
    ],
)
def test_the_finder_sees_cluster_keys(snippet: str, found: list[tuple[int, str]]) -> None:
    assert cluster_keys(snippet) == found
