"""Static checks in the suite: ruff over the repository, mypy --strict over the pure core and
mypy (default mode) over every shipped package.

Both read their settings from pyproject.toml. A finding fails the test with the tool's own report,
so the fix is where the tool points. ``python3 bootstrap.py check`` runs these with the unit tier.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_finds_nothing() -> None:
    """Lint, import order (isort rules) and docstring rules over the whole repository."""
    done = _run("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_on_the_pure_core(tmp_path: Path) -> None:
    """The pure core (sharedsub/core) type-checks under --strict."""
    done = _run("mypy", "--strict", "--cache-dir", str(tmp_path / "mypy"), "sharedsub/core")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_on_every_shipped_package(tmp_path: Path) -> None:
    """sharedsub, connectors and jobs type-check (default mode: third-party stubs are partial)."""
    done = _run("mypy", "--cache-dir", str(tmp_path / "mypy"), "sharedsub", "connectors", "jobs")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """Each tool reports a planted finding, so a pass above means something."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef f(x):\n    return x\n")
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated", "--select", "F401", str(bad)],
                          capture_output=True, text=True, timeout=120)
    assert lint.returncode == 1 and "F401" in lint.stdout
    types = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "mypy"), str(bad)],
                           capture_output=True, text=True, timeout=300)
    assert types.returncode == 1 and "no-untyped-def" in types.stdout
