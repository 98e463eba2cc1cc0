"""Sets of jars Spark takes from Maven Central, kept in the project's ``.jars/`` (one directory per set).

Standard library only: ``bootstrap.py`` (system Python, no pyspark) imports it to fetch a set,
``jobs/session.py`` to put the sets that are there on Spark's classpath.

A set is usable only whole: :meth:`JarSet.jars` returns every jar or none, and bootstrap stages
a set in a sibling directory that it renames into place. Each set's directory can be named by an
environment variable instead (``off`` makes the set count as absent).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(__file__).resolve().parent.parent / ".jars"


def jar_name(artifact: str) -> str:
    """The file name Maven gives the jar of ``group:artifact:version``."""
    _group, name, version = artifact.split(":")
    return f"{name}-{version}.jar"


@dataclass(frozen=True)
class JarSet:
    """Jars that are useful only together (``artifacts``: Maven ``group:artifact:version``)."""

    title: str  # what the jars are, for progress lines ("the Delta Spark connector")
    artifacts: tuple[str, ...]
    default_dir: Path  # under CACHE
    env: str  # names another directory holding the same files, or "off"
    size: str  # roughly what a first fetch downloads, for progress lines ("10 MB")

    def directory(self) -> Path | None:
        """The directory the jars are looked for in; None when switched off (``<env>=off``)."""
        given = os.environ.get(self.env, "").strip()
        if given.lower() == "off":
            return None
        return Path(given) if given else self.default_dir

    def missing(self, directory: Path) -> list[str]:
        """The artifacts whose jar is not in ``directory``."""
        return [a for a in self.artifacts if not (directory / jar_name(a)).is_file()]

    def jars(self) -> list[str]:
        """Absolute paths of the set's jars, or [] when any is missing (or it is switched off)."""
        directory = self.directory()
        if directory is None or self.missing(directory):
            return []
        return [str((directory / jar_name(a)).resolve()) for a in self.artifacts]
