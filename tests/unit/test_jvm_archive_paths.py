"""jobs/jvm_archive.py's keys and options (file names and strings; making an archive is setup's,
and tests/e2e/test_end_to_end.py checks a real driver JVM maps it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jobs import jvm_archive


@pytest.fixture
def pyspark_dir(tmp_path: Path) -> Path:
    jars = tmp_path / "pyspark" / "jars"
    jars.mkdir(parents=True)
    (jars / "spark-core.jar").write_bytes(b"x" * 10)
    return tmp_path / "pyspark"


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    return {"JAVA_HOME": str(tmp_path / "jdk"), "XDG_CACHE_HOME": str(tmp_path / "cache")}


def test_the_key_follows_the_class_path_the_jars_and_the_java(pyspark_dir: Path, environ: dict[str, str], tmp_path: Path) -> None:
    first = jvm_archive.archive_path(pyspark_dir, "/a.jar", environ)
    assert first is not None and first.parent == tmp_path / "cache" / "sharedsub" / "jvm-archive"
    assert jvm_archive.archive_path(pyspark_dir, "/a.jar", environ) == first  # stable
    assert jvm_archive.archive_path(pyspark_dir, "/a.jar:/s3a.jar", environ) != first
    (pyspark_dir / "jars" / "spark-sql.jar").write_bytes(b"y")
    second = jvm_archive.archive_path(pyspark_dir, "/a.jar", environ)
    assert second != first
    java = Path(environ["JAVA_HOME"]) / "bin" / "java"
    java.write_text("#!/bin/sh\n# another build\n")
    assert jvm_archive.archive_path(pyspark_dir, "/a.jar", environ) != second
    assert jvm_archive.archive_path(pyspark_dir, "/a.jar", {**environ, "JAVA_HOME": str(tmp_path / "none")}) is None


def test_options_use_the_archive_only_when_it_is_there(pyspark_dir: Path, environ: dict[str, str]) -> None:
    assert jvm_archive.java_options(pyspark_dir, "/a.jar", environ) == ""
    path = jvm_archive.archive_path(pyspark_dir, "/a.jar", environ)
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    assert jvm_archive.java_options(pyspark_dir, "/a.jar", environ) == f"-XX:SharedArchiveFile={path} -Xlog:cds*=off"
    assert jvm_archive.java_options(pyspark_dir, "/other.jar", environ) == ""  # another key
    assert jvm_archive.java_options(pyspark_dir, "/a.jar", {**environ, jvm_archive.ENV: "off"}) == ""


def test_setup_s_run_writes_the_archive_at_exit(pyspark_dir: Path, environ: dict[str, str]) -> None:
    dump = {**environ, jvm_archive.DUMP_ENV: "/tmp/x.jsa"}
    assert jvm_archive.java_options(pyspark_dir, "/a.jar", dump) == "-XX:ArchiveClassesAtExit=/tmp/x.jsa -Xlog:cds*=off"
    assert os.environ.get(jvm_archive.DUMP_ENV) is None  # never set in a test process


def test_prune_keeps_the_newest_archives_and_nothing_else_is_touched(tmp_path: Path) -> None:
    for age, name in enumerate(["driver-a.jsa", "driver-b.jsa", "driver-c.jsa", "driver-d.jsa"]):
        path = tmp_path / name
        path.write_bytes(b"x")
        os.utime(path, ns=(0, (100 - age) * 10**9))  # a is the newest
    (tmp_path / "other.jsa").write_bytes(b"x")
    (tmp_path / ".making-1").mkdir()
    removed = jvm_archive.prune(tmp_path, 2)
    assert sorted(p.name for p in removed) == ["driver-c.jsa", "driver-d.jsa"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".making-1", "driver-a.jsa", "driver-b.jsa", "other.jsa"]
    assert jvm_archive.prune(tmp_path, 2) == []


def test_the_key_follows_the_class_path_files_size_and_time(pyspark_dir: Path, environ: dict[str, str], tmp_path: Path) -> None:
    # The JVM refuses an archive whose class path jar was rewritten since the dump: a clone at the
    # same path rebuilds sharedsub's JVM classes under the same name, so the name alone is no key.
    jar = tmp_path / "sharedsub-jvm.jar"
    jar.write_bytes(b"classes")
    first = jvm_archive.archive_path(pyspark_dir, str(jar), environ)
    assert jvm_archive.archive_path(pyspark_dir, str(jar), environ) == first  # stable
    os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 1_000_000_000))
    rebuilt = jvm_archive.archive_path(pyspark_dir, str(jar), environ)
    assert rebuilt != first
    jar.write_bytes(b"other classes")
    assert jvm_archive.archive_path(pyspark_dir, str(jar), environ) != rebuilt
