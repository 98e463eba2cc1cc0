#!/usr/bin/env python3
"""Set up everything sharedsub needs on a fresh machine, then run it or its tests.

    python3 bootstrap.py serve [sharedsub serve options]   # set up, then run the service
    python3 bootstrap.py test  [pytest options]            # set up, then run the whole suite
    python3 bootstrap.py check [pytest options]            # the contributors' loop (below)
    python3 bootstrap.py setup [--object-storage]          # set up only

Setup is idempotent and only does what is missing: a virtual environment in .venv with the
pinned packages (setup.py), and a Java 17 runtime through apt-get when ``java`` is not on PATH
(PySpark needs one). Needs nothing but Python 3.11. ``test`` also sets up the client tiers: a
JDK and Maven (the Qpid JMS tier, tests/jms, whose Maven dependencies are fetched once) and
Node.js with npm (the rhea tier, tests/rhea, ``npm ci``) and Debian's chromium (the browser tier,
tests/browser, which drives it with Playwright), through apt-get when missing, and a
real S3 server for the object-storage tests (versitygw, built once with Go into
~/.cache/sharedsub/gobin).

Setup also fetches the Delta Lake Spark connector's jars (jobs/delta_jars.py) into
.jars/ with Maven (installed through apt-get when missing) unless they are there, so Spark reads
the tables with ``format("delta")``, SQL and time travel. ``serve`` goes on without them when
they cannot be fetched (the fan-out then reads topics through delta-rs, as before); ``test``
and ``setup`` stop with an error, since tests use them.

``setup --object-storage`` (and ``test``) also fetch Spark's ``s3a://`` support into .jars/
(jobs/s3a_jars.py: hadoop-aws and the AWS SDK bundle, 690 MB, first time only), with which Spark
reads a data dir on S3 (``s3://BUCKET/PREFIX``); ``serve`` never fetches it, as the fan-out's
default source reads topics on a bucket through delta-rs.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".sharedsub-installed"


def say(text: str) -> None:
    """Print a progress line, prefixed ``[bootstrap]`` and flushed at once."""
    print(f"[bootstrap] {text}", flush=True)


def run(cmd: list[str], **kw: object) -> None:
    """Echo ``cmd``, then run it (``kw`` go to :func:`subprocess.run`); raise if it fails."""
    say("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True, **kw)  # type: ignore[call-overload]


def venv_python() -> Path:
    """The virtual environment's Python interpreter (it may not exist yet)."""
    return VENV / "bin" / "python"


_APT_UPDATED = False
OBJECT_STORAGE = "--object-storage"  # setup's option: also fetch Spark's s3a:// jars


def apt_install(*packages: str) -> None:
    """Install Debian packages (``apt-get update`` once per run first)."""
    global _APT_UPDATED
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if not _APT_UPDATED:
        run([*sudo, "apt-get", "update", "-q"], env=env)
        _APT_UPDATED = True
    run([*sudo, "apt-get", "install", "-y", "-q", *packages], env=env)


def ensure_java() -> None:
    """Install a Java 17 runtime with apt-get unless ``java`` is on PATH (PySpark needs one)."""
    if shutil.which("java"):
        return
    say("java not found: installing a Java 17 runtime with apt-get")
    apt_install("openjdk-17-jre-headless")


def _stamped(stamp: Path, inputs: list[Path]) -> tuple[bool, str]:
    """(up to date, digest): whether ``stamp`` records the digest of ``inputs``."""
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in inputs)).hexdigest()
    return stamp.exists() and stamp.read_text().strip() == digest, digest


def ensure_jms_tier() -> None:
    """A JDK and Maven for tests/jms, and its Maven dependencies (fetched once per pom)."""
    missing = [pkg for tool, pkg in (("javac", "openjdk-17-jdk-headless"), ("mvn", "maven")) if not shutil.which(tool)]
    if missing:
        say(f"installing {', '.join(missing)} with apt-get (the Qpid JMS test tier)")
        apt_install(*missing)
    pom = ROOT / "tests" / "jms" / "pom.xml"
    if not pom.exists():
        return
    stamp = ROOT / "tests" / "jms" / "target" / ".sharedsub-fetched"
    fresh, digest = _stamped(stamp, [pom])
    if fresh:
        return
    say("fetching the Qpid JMS tier's Maven dependencies (first time: a minute or two)")
    # Compiles the tests and resolves the test runner without running a test.
    run(["mvn", "-B", "-q", "-f", str(pom), "test", "-Dtest=NONE", "-Dsurefire.failIfNoSpecifiedTests=false"])
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(digest)


def ensure_rhea_tier() -> None:
    """Node.js with npm for tests/rhea, and its locked packages (``npm ci``)."""
    if not (shutil.which("node") and shutil.which("npm")):
        say("installing nodejs and npm with apt-get (the rhea test tier)")
        apt_install("nodejs", "npm")
    tier = ROOT / "tests" / "rhea"
    lock = tier / "package-lock.json"
    if not lock.exists():
        return
    stamp = tier / "node_modules" / ".sharedsub-installed"
    fresh, digest = _stamped(stamp, [tier / "package.json", lock])
    if fresh:
        return
    say("installing the rhea tier's npm packages (npm ci)")
    run(["npm", "ci", "--no-audit", "--no-fund", "--prefix", str(tier)])
    stamp.write_text(digest)


CHROMIUM = Path("/usr/bin/chromium")


def ensure_browser_tier() -> None:
    """Debian's chromium for tests/browser (driven by Playwright from the venv's pinned package)."""
    if CHROMIUM.exists():
        return
    say("installing chromium with apt-get (the browser tier)")
    apt_install("chromium")


# The test S3 server (tests/s3_server.py): versitygw, a real S3 implementation (Apache-2.0),
# built once from the Go module proxy into a cache outside the repository.
S3_SERVER_MODULE = "github.com/versity/versitygw/cmd/versitygw@v1.8.0"
S3_SERVER_DIR = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sharedsub" / "gobin"


def ensure_s3_server() -> Path:
    """The versitygw binary for the object-storage tests; built with ``go install`` when missing
    (Go through apt-get when missing). Returns its path (the suite finds it in SHAREDSUB_S3_SERVER)."""
    binary = S3_SERVER_DIR / "versitygw"
    if binary.is_file():
        return binary
    if not shutil.which("go"):
        say("installing golang-go with apt-get (builds the test S3 server)")
        apt_install("golang-go")
    say(f"building the test S3 server {S3_SERVER_MODULE} into {S3_SERVER_DIR} (first time only: 5-10 minutes)")
    S3_SERVER_DIR.mkdir(parents=True, exist_ok=True)
    # One package at a time: a 2-core machine building in parallel runs out of neither, but
    # everything else on it stalls.
    run(["go", "install", "-p=1", S3_SERVER_MODULE], env=dict(os.environ, GOBIN=str(S3_SERVER_DIR)))
    say(f"test S3 server ready: {binary}")
    return binary


def _project_importable() -> None:
    """Let this (system) Python import the project's standard-library-only modules under jobs/."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def _jar_sets():  # jobs/jar_sets.py and the sets: standard library only, no pyspark
    _project_importable()
    from jobs import delta_jars, s3a_jars

    return delta_jars.CONNECTOR, s3a_jars.S3A


def ensure_jars(jar_set, *, required: bool) -> None:
    """A set of jars (jobs/jar_sets.py) in .jars/ (Maven, once; offline afterwards).

    ``mvn dependency:copy`` resolves each jar through ~/.m2 (a second machine-wide cache) and
    copies it into a temporary directory that is renamed into place, so the directory holds
    every jar or none. Raises SystemExit when ``required`` and they cannot be had.
    """
    target = jar_set.directory()
    if target is None:
        say(f"{jar_set.env}=off: Spark runs without {jar_set.title}")
        return
    absent = jar_set.missing(target)
    if not absent:
        return
    from jobs.jar_sets import jar_name

    staging = target.with_name(target.name + ".partial")
    try:
        if not shutil.which("mvn"):
            say(f"installing maven with apt-get (fetches {jar_set.title})")
            apt_install("maven")
        say(f"fetching {jar_set.title} from Maven Central into {target} ({jar_set.size}, first time only)")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for artifact in jar_set.artifacts:
            if (target / jar_name(artifact)).is_file():
                shutil.copy2(target / jar_name(artifact), staging)
                continue
            say(f"  {artifact}")
            cmd = ["mvn", "-B", "-q", "dependency:copy", f"-Dartifact={artifact}", f"-DoutputDirectory={staging}"]
            done = subprocess.run(cmd, cwd=staging, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if done.returncode != 0 or not (staging / jar_name(artifact)).is_file():
                plain = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout)
                errors = [ln.strip() for ln in plain.splitlines() if ln.startswith("[ERROR]") and ln[7:].strip()]
                raise RuntimeError(f"mvn could not fetch {artifact}: " + (errors[0] if errors else f"exit {done.returncode}"))
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
        say(f"{jar_set.title} ready: {', '.join(sorted(p.name for p in target.iterdir()))}")
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        message = f"{jar_set.title} could not be fetched: {exc}"
        if required:
            sys.exit(f"[bootstrap] {message}\n[bootstrap] Maven Central must be reachable once (later runs use {target})")
        say(f"{message}; going on without it")


def ensure_jvm_helpers() -> None:
    """Build sharedsub's own JVM classes (jobs/jvm_helpers.py) into .jars/jvm/ with the JDK's
    javac, once per version of their sources. Optional: without a JDK Spark runs with Hadoop's
    classes (a few child processes more per micro-batch), and setup says so."""
    _project_importable()
    from jobs import jvm_helpers

    if jvm_helpers.switched_off(os.environ):
        return
    pyspark_dirs = sorted(VENV.glob("lib/python3*/site-packages/pyspark"))
    hadoop = jvm_helpers.hadoop_api_jar(pyspark_dirs[-1]) if pyspark_dirs else None
    if hadoop is None:
        say("pyspark's Hadoop jar not found: Spark runs without sharedsub's JVM classes")
        return
    if jvm_helpers.jar_path(hadoop.name).is_file():
        return
    javac = jvm_helpers.find_javac(os.environ)
    if javac is None:
        say("no javac (a JDK): Spark runs without sharedsub's JVM classes (jobs/jvm_helpers.py)")
        return
    try:
        built = jvm_helpers.build(hadoop, javac)
    except (RuntimeError, OSError) as exc:
        say(f"sharedsub's JVM classes could not be built ({exc}); Spark runs without them")
        return
    say(f"built sharedsub's JVM classes: {built}")


def ensure_jvm_archive(*, s3a: bool = False) -> None:
    """The driver JVM's class data sharing archive for the default settings (jobs/jvm_archive.py),
    made once per java, pyspark and class path (about half a minute each) into ~/.cache/sharedsub:
    ``serve`` is ready in about two thirds of the time with it. ``s3a``: also the one for a data
    dir on a bucket (S3A's jars on the class path). Optional: without it Spark starts as before,
    and setup says why."""
    _project_importable()
    from jobs import jvm_archive

    if jvm_archive.switched_off(os.environ) or jvm_archive.java_binary(os.environ) is None:
        return
    for bucket in (False, True) if s3a else (False,):
        target = jvm_archive.default_path(str(venv_python()), os.environ, s3a=bucket)
        if target is None or target.is_file():
            continue
        what = "on a bucket " if bucket else ""
        say(f"making the Spark driver's class archive {what}(first time only: about half a minute): {target}")
        try:
            jvm_archive.make(str(venv_python()), target, os.environ, s3a=bucket)
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            say(f"the driver's class archive could not be made ({exc}); Spark starts without it")


def ensure_delta_connector(*, required: bool) -> None:
    """The Delta Spark connector's jars (jobs/delta_jars.py); without them (``serve`` goes on) the
    fan-out reads topics through delta-rs and format('delta') is unavailable."""
    ensure_jars(_jar_sets()[0], required=required)


def ensure_s3a_jars() -> None:
    """S3A's jars (jobs/s3a_jars.py: hadoop-aws and the AWS SDK, 690 MB), only when asked:
    ``setup --object-storage`` and ``test`` (the object-storage tier reads buckets with Spark)."""
    ensure_jars(_jar_sets()[1], required=True)


def ensure_venv() -> None:
    """Create .venv and install the pinned packages unless its stamp matches setup.py; needs Python 3.11+."""
    # UP036 assumes the target version, but this check exists for interpreters older than it:
    # bootstrap.py is run by whatever python3 the machine has, to say why it cannot go on.
    if sys.version_info < (3, 11):  # noqa: UP036
        sys.exit(f"sharedsub needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    wanted = hashlib.sha256((ROOT / "setup.py").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text().strip() == wanted and venv_python().exists():
        return
    if not venv_python().exists():
        say(f"creating virtual environment {VENV}")
        run([sys.executable, "-m", "venv", str(VENV)])
    say("installing pinned packages (first time: a few minutes, pyspark is large)")
    run([str(venv_python()), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-e", f"{ROOT}[dev]"])
    STAMP.write_text(wanted)


def setup() -> None:
    """The setup every command needs: a Java runtime and the virtual environment."""
    ensure_java()
    ensure_venv()
    ensure_jvm_helpers()


# The unit tier's own runs of ruff and mypy, which check has just done (with mypy's cache).
_STATIC_TESTS = ("test_ruff_finds_nothing", "test_mypy_strict_on_the_pure_core", "test_mypy_on_every_shipped_package")


def check(pytest_args: list[str]) -> int:
    """ruff, mypy, then the unit tier; the exit status of the first that fails (0: all passed)."""
    python = str(venv_python())
    steps = [
        [python, "-m", "ruff", "check", "."],
        [python, "-m", "mypy", "--strict", "sharedsub/core"],
        [python, "-m", "mypy", "sharedsub", "connectors", "jobs"],
        [
            python, "-m", "pytest", "tests/unit", "-q",
            *(f"--deselect=tests/unit/test_static_checks.py::{name}" for name in _STATIC_TESTS),
            *pytest_args,
        ],
    ]
    for cmd in steps:
        say("$ " + " ".join(cmd))
        status = subprocess.call(cmd, cwd=ROOT)
        if status != 0:
            say(f"check failed at: {' '.join(cmd[2:4])}")
            return status
    say("check passed")
    return 0


def main(argv: list[str]) -> int:
    """Run ``bootstrap.py serve|test|setup [options]``; return the exit status (2: usage printed)."""
    if not argv or argv[0] not in ("serve", "test", "setup", "check"):
        print(__doc__)
        return 2
    command, rest = argv[0], argv[1:]
    if command == "check":
        ensure_venv()
        return check(rest)
    if command == "setup" and [a for a in rest if a != OBJECT_STORAGE]:
        print(__doc__)
        return 2
    setup()
    ensure_delta_connector(required=command != "serve")
    buckets = command == "test" or (command == "setup" and OBJECT_STORAGE in rest)
    if buckets:
        ensure_s3a_jars()
    if command != "test":  # (test makes it after the JMS tier, which may install the JDK)
        ensure_jvm_archive(s3a=buckets)  # after the jars it puts on the class path
    env = dict(os.environ, PYSPARK_PYTHON=str(venv_python()), PYSPARK_DRIVER_PYTHON=str(venv_python()))
    if command == "test":
        ensure_jms_tier()
        ensure_jvm_helpers()  # when setup found no JDK, the JMS tier has just installed one
        ensure_jvm_archive(s3a=True)  # after the jars and the JDK
        ensure_rhea_tier()
        ensure_browser_tier()
        env["SHAREDSUB_S3_SERVER"] = str(ensure_s3_server())
    if command == "setup":
        return 0
    if command == "serve":
        os.execve(str(VENV / "bin" / "sharedsub"), ["sharedsub", "serve", *rest], env)
    # The whole suite (pytest.ini testpaths = tests): unit, storage, Spark, local-cluster and end-to-end tiers.
    cmd = [str(venv_python()), "-m", "pytest", *rest]
    say("$ " + " ".join(cmd))
    return subprocess.call(cmd, cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
