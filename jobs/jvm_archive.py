"""A class data sharing archive of the driver JVM: where it lives, when a session uses it, how setup makes it.

Standard library only at import: ``bootstrap.py`` (system Python, no pyspark) imports it to make
the archive, ``jobs/session.py`` to use it. ``python -m jobs.jvm_archive`` (in the venv) makes it.

Every start of the fan-out job (``serve``, its restart after a crash, the test tiers) starts a
JVM that loads and links some ten thousand classes from pyspark's jars before its first
micro-batch. The JDK's class data sharing keeps them parsed and verified in a file the JVM maps
at start (``-XX:SharedArchiveFile``). Measured on a quiet 2-core machine (a session, one query,
stop; ``build_session``): 17.3 s without, 8.7-9.5 s with; the archive is ~150 MB.

The archive is made once per (java binary, pyspark's jars, the driver's class path and the size
and time of each of its files): setup runs the fan-out over a scratch data dir with
``-XX:ArchiveClassesAtExit`` (the JVM writes the classes it loaded when it exits) into a
temporary name, renamed into place when whole. A session
whose class path differs (S3A's jars, a notebook's own) has another key and runs without one. The
JVM checks an archive against its own version and class path itself and ignores one that does
not match (``-Xshare:auto``, the default), so a stale file costs only the time it would save; its
log lines about that are turned off (``-Xlog:cds*=off``), they would land on serve's stdout.

``SHAREDSUB_JVM_ARCHIVE=off`` switches it off (no archive used or made). Each archive made
removes all but the :data:`KEEP` newest of the directory (another checkout, java or pyspark makes
another key; 150 MB each would otherwise pile up).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

ENV = "SHAREDSUB_JVM_ARCHIVE"
# Set by :func:`make` for the one job whose driver JVM writes the archive at exit (a temporary path).
DUMP_ENV = "SHAREDSUB_JVM_ARCHIVE_DUMP"
QUIET = "-Xlog:cds*=off"
KEEP = 4
"""Archives kept in :func:`archive_dir` after one is made: a checkout's local and S3A ones, and
another checkout's (or the previous java's)."""


def archive_dir(environ: Mapping[str, str]) -> Path:
    """``$XDG_CACHE_HOME/sharedsub/jvm-archive`` (``~/.cache`` when unset): outside the checkout,
    so a fresh clone on the same machine finds it."""
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "sharedsub" / "jvm-archive"


def switched_off(environ: Mapping[str, str]) -> bool:
    """True when ``SHAREDSUB_JVM_ARCHIVE=off``."""
    return environ.get(ENV, "").strip().lower() == "off"


def java_binary(environ: Mapping[str, str]) -> str | None:
    """The java pyspark starts: ``$JAVA_HOME/bin/java``, else ``java`` on the PATH (resolved)."""
    home = environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java", path=environ.get("PATH"))
    return os.path.realpath(found) if found and os.path.isfile(found) else None


def archive_path(pyspark_dir: Path, classpath: str, environ: Mapping[str, str]) -> Path | None:
    """The archive for a driver JVM of pyspark at ``pyspark_dir`` with ``classpath`` as
    ``spark.driver.extraClassPath``; None without a java binary or pyspark's jars. The key covers
    the java binary (path, size, time), every jar of pyspark (name, size), the class path and the
    size and time of each of its files.

    The JVM refuses an archive whose class path file changed since the dump (it compares their
    sizes and times). A checkout cloned again at the same path rebuilds sharedsub's JVM classes
    (jobs/jvm_helpers.py) under the same name while the cache outside it keeps the old archive:
    without the times in the key, setup found that archive "there" and the JVM ran without any."""
    java = java_binary(environ)
    jars = pyspark_dir / "jars"
    if java is None or not jars.is_dir():
        return None
    digest = hashlib.sha256()
    stat = os.stat(java)
    digest.update(f"{java}\0{stat.st_size}\0{stat.st_mtime_ns}\0{classpath}\0".encode())
    for entry in classpath.split(os.pathsep):
        if entry and os.path.isfile(entry):
            found = os.stat(entry)
            digest.update(f"{entry}\0{found.st_size}\0{found.st_mtime_ns}\0".encode())
    for jar in sorted(jars.iterdir()):
        digest.update(f"{jar.name}\0{jar.stat().st_size}\0".encode())
    return archive_dir(environ) / f"driver-{digest.hexdigest()[:20]}.jsa"


def java_options(pyspark_dir: Path, classpath: str, environ: Mapping[str, str]) -> str:
    """The driver JVM's options for the archive: write it at exit when :data:`DUMP_ENV` names a
    path (setup's run), else use it when it is there; "" when neither (or switched off)."""
    if switched_off(environ):
        return ""
    dump = environ.get(DUMP_ENV)
    if dump:
        return f"-XX:ArchiveClassesAtExit={dump} {QUIET}"
    path = archive_path(pyspark_dir, classpath, environ)
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}"


# A setting that puts S3A's jars on the driver's class path (jobs/session.py wants_s3a) as a data
# dir on a bucket does; its value changes nothing here.
S3A_CONF = "spark.hadoop.fs.s3a.connection.maximum=96"


def _environ(environ: Mapping[str, str], s3a: bool) -> dict[str, str]:
    return dict(environ, SHAREDSUB_FANOUT_SPARK_CONF=S3A_CONF) if s3a else dict(environ)


def _this_module(python: str, args: list[str], env: Mapping[str, str], *, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -m jobs.jvm_archive ARGS`` from the project's root, its output captured."""
    return subprocess.run(
        [python, "-m", "jobs.jvm_archive", *args],
        env=dict(env),
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def default_path(python: str, environ: Mapping[str, str], *, s3a: bool = False) -> Path | None:
    """The archive a ``serve`` of the default settings (local master) would use, on a local data
    dir or (``s3a``) on a bucket, asked of the venv's ``python`` (the class path comes from
    jobs/session.py, which needs pyspark); None when it would use none."""
    done = _this_module(python, ["path"], _environ(environ, s3a), timeout=120)
    lines = done.stdout.strip().splitlines()
    return Path(lines[-1]) if done.returncode == 0 and lines and lines[-1] != "-" else None


def make(python: str, target: Path, environ: Mapping[str, str], *, s3a: bool = False, timeout: float = 600) -> None:
    """Run the fan-out once (``python -m jobs.jvm_archive run``, the venv's) over a scratch data
    dir with its driver JVM writing the archive at exit into a temporary file beside ``target``;
    rename it to ``target`` once the process ended well (the JVM writes at its exit).

    Raises:
        RuntimeError: the job failed or wrote no archive.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".making-") as scratch:
        dump = Path(scratch) / "driver.jsa"
        env = dict(_environ(environ, s3a), **{DUMP_ENV: str(dump)})
        done = _this_module(python, ["run", str(Path(scratch) / "data")], env, timeout=timeout)
        if done.returncode != 0 or not dump.is_file():
            raise RuntimeError(f"exit {done.returncode}: {(done.stderr or done.stdout).strip()[-600:]}")
        os.replace(dump, target)
    prune(target.parent, KEEP)


def prune(directory: Path, keep: int) -> list[Path]:
    """Remove all but the ``keep`` newest (by modification time) ``driver-*.jsa`` files of
    ``directory``; return those removed. A file gone meanwhile (another setup pruning) is skipped."""
    found = []
    for path in directory.glob("driver-*.jsa"):
        try:
            found.append((path.stat().st_mtime_ns, path))
        except FileNotFoundError:
            continue
    removed = []
    for _, path in sorted(found, reverse=True)[keep:]:
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed


def _default_path() -> Path | None:
    import pyspark

    from jobs.fanout import DRIVER_CONF
    from jobs.session import spark_conf
    from sharedsub.core.config import load_settings

    conf = spark_conf(load_settings(environ=os.environ), extra=DRIVER_CONF)
    return archive_path(Path(pyspark.__file__).parent, conf.get("spark.driver.extraClassPath", ""), os.environ)


def _run_once(data_dir: str) -> int:
    """The workload whose classes go into the archive: a topic, then the fan-out job's whole path
    (session, streaming query, a micro-batch) with ``--available-now``, as serve starts it."""
    from jobs import fanout
    from sharedsub.storage.topics import create_topic

    create_topic(data_dir, "archive-warmup")
    return fanout.main(["--data-dir", data_dir, "--available-now"])


def main(argv: list[str]) -> int:
    """``path``: print the default archive's path ("-": none); ``run DATA_DIR``: the workload."""
    if argv[:1] == ["path"]:
        path = None if switched_off(os.environ) else _default_path()
        print(path if path is not None else "-")
        return 0
    if argv[:1] == ["run"] and len(argv) == 2:
        return _run_once(argv[1])
    print("usage: python -m jobs.jvm_archive path | run DATA_DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
