"""``typing.Any`` in shipped code only where a third-party API forces it, and each one says why.

Every line of sharedsub/, connectors/ and jobs/ that uses the name ``Any`` (``Any``,
``typing.Any``, or ``Any`` inside a string annotation such as ``"Future[Any]"``) carries a
comment containing ``Any:`` on that line or on the line directly above it, naming the API that
forces it (``# Any: proton's Event attributes are untyped``). Import statements are exempt. A
precise type is used wherever one exists (our own classes, Protocols, unions, TypedDicts,
generics, ``object`` for a value only passed through or compared); what is left is what a
library hands out or takes untyped, so a new ``Any`` is either replaced or explained where it
is written.

Run it on other sources with ``python tests/unit/test_any_commented.py FILE_OR_DIR...``.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("sharedsub", "connectors", "jobs")
MARK = "Any:"


def _names_any(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Any") or (isinstance(node, ast.Attribute) and node.attr == "Any")


def _string_names_any(text: str) -> bool:
    """True when ``text`` (a string constant inside a subscript: a forward reference) is an
    expression that uses ``Any``."""
    try:
        expression = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return False
    return any(_names_any(n) for n in ast.walk(expression))


def any_lines(source: str, filename: str = "<source>") -> list[int]:
    """Line numbers where ``source`` uses the name ``Any``, import statements left out."""
    used: set[int] = set()
    imports: set[int] = set()
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            imports.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        elif _names_any(node):
            used.add(node.lineno)
        elif isinstance(node, ast.Subscript):
            for sub in ast.walk(node.slice):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and _string_names_any(sub.value):
                    used.add(sub.lineno)
        elif isinstance(node, ast.arg | ast.AnnAssign | ast.FunctionDef | ast.AsyncFunctionDef):
            annotation = node.returns if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else node.annotation
            if (
                isinstance(annotation, ast.Constant)
                and isinstance(annotation.value, str)
                and _string_names_any(annotation.value)
            ):
                used.add(annotation.lineno)
    return sorted(used - imports)


def _comments(source: str) -> dict[int, str]:
    """The comment on each line of ``source`` that has one."""
    return {
        tok.start[0]: tok.string
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }


def findings_in_source(source: str, filename: str = "<source>") -> list[str]:
    """``file:line: ...`` for each use of ``Any`` in ``source`` without an ``Any:`` comment on
    its line or the line above."""
    comments = _comments(source)
    lines = source.splitlines()
    return [
        f"{filename}:{line}: Any without an '{MARK}' comment: {lines[line - 1].strip()}"
        for line in any_lines(source, filename)
        if MARK not in comments.get(line, "") and MARK not in comments.get(line - 1, "")
    ]


def _python_files(paths: Iterable[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts)
        else:
            yield path


def findings(paths: Iterable[Path]) -> list[str]:
    """The findings over every ``.py`` file in ``paths`` (files or directories)."""
    found = []
    for path in _python_files(paths):
        found += findings_in_source(path.read_text(encoding="utf-8"), str(path))
    return found


def test_every_any_in_shipped_code_says_why() -> None:
    files = list(_python_files(ROOT / d for d in SCANNED))
    assert any(f.name == "proton_events.py" for f in files)  # the scan sees the packages it is about
    found = findings(files)
    assert not found, f"{len(found)} uses of Any without a comment naming the API that forces it:\n" + "\n".join(found)


def test_the_scan_finds_each_kind_of_use(tmp_path: Path) -> None:
    """Every way of writing ``Any`` is reported when no ``Any:`` comment goes with it."""
    bad = tmp_path / "handler.py"
    bad.write_text(
        "from __future__ import annotations\n"
        "import typing\n"
        "from typing import (\n"
        "    Any,\n"
        ")\n"
        "def on_delivery(event: Any) -> None:\n"
        "    link: typing.Any = event.link\n"
        "Operation = dict[str, 'Future[Any]']\n"
        "def f(x: 'Any') -> 'list[Any]':  # a comment, but not the one asked for\n"
        "    return [x]\n"
        "# Any: only the line right below is covered\n"
        "ok: Any = None\n"
        "\n"
        "too_far: Any = None\n"
        "fine: Any = None  # Any: json.loads returns untyped values\n"
        "text = 'Any value, in a string that is not a type'\n"
    )
    found = findings([tmp_path])
    assert [f.split(":")[1] for f in found] == ["6", "7", "8", "9", "14"], "\n".join(found)
    assert f"{bad}:6: Any without an 'Any:' comment: def on_delivery(event: Any) -> None:" in found


def test_commented_uses_and_imports_pass() -> None:
    good = (
        "from typing import Any\n"
        "import typing as t\n"
        "def f(\n"
        "    # Any: py4j hands back untyped Java objects\n"
        "    jvm: Any,\n"
        ") -> t.Any:  # Any: as above\n"
        "    return jvm\n"
    )
    assert findings_in_source(good) == []


if __name__ == "__main__":
    result = findings(Path(a) for a in sys.argv[1:])
    print("\n".join(result) or "every Any is commented")
    sys.exit(1 if result else 0)
