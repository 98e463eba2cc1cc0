"""sharedsub's own JVM classes (jobs/jvm/): where their jar lives, how it is built, the settings that use it.

Standard library only: ``bootstrap.py`` (system Python, no pyspark) imports it to build the jar,
``jobs/session.py`` to put it on a local session's classpath.

One class today, ``sharedsub.jvm.NoForkLocalFileSystem`` (its source says why): Hadoop's local file
system without a ``chmod`` child process per created file and without checksum files.
``bootstrap.py setup`` compiles the sources with the JDK's ``javac`` against pyspark's Hadoop API
jar into ``.jars/jvm/sharedsub-jvm-<fingerprint>.jar``; the fingerprint covers the sources and the
Hadoop jar, so changed sources are rebuilt rather than run stale. Without a JDK (or with
``SHAREDSUB_JVM_HELPERS=off``) there is no jar and Spark runs with Hadoop's own class: the same
files, a few child processes more per micro-batch.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

from jobs.jar_sets import CACHE

SOURCES = Path(__file__).resolve().parent / "jvm"
JAR_DIR = CACHE / "jvm"
ENV = "SHAREDSUB_JVM_HELPERS"
LOCAL_FS_CLASS = "sharedsub.jvm.NoForkLocalFileSystem"
LOCAL_FS_KEY = "spark.hadoop.fs.file.impl"
# Masters whose executors run in the driver's JVM: the driver's classpath is theirs too.
_IN_PROCESS_MASTER = re.compile(r"local(\[[^\]]*\])?")


def sources() -> list[Path]:
    """The Java sources, in a stable order."""
    return sorted(SOURCES.rglob("*.java"))


def hadoop_api_jar(pyspark_dir: Path) -> Path | None:
    """The Hadoop client API jar of pyspark (what the sources compile against), or None."""
    found = sorted((pyspark_dir / "jars").glob("hadoop-client-api-*.jar"))
    return found[-1] if found else None


def jar_path(hadoop_jar_name: str) -> Path:
    """Where the jar built from today's sources against ``hadoop_jar_name`` lives."""
    digest = hashlib.sha256(hadoop_jar_name.encode())
    for source in sources():
        digest.update(source.relative_to(SOURCES).as_posix().encode())
        digest.update(source.read_bytes())
    return JAR_DIR / f"sharedsub-jvm-{digest.hexdigest()[:12]}.jar"


def switched_off(environ: Mapping[str, str]) -> bool:
    """Whether ``SHAREDSUB_JVM_HELPERS=off``."""
    return environ.get(ENV, "").strip().lower() == "off"


def find_javac(environ: Mapping[str, str]) -> str | None:
    """The JDK's ``javac``: ``$JAVA_HOME/bin/javac``, else the one on PATH; None without a JDK."""
    home = environ.get("JAVA_HOME", "")
    if home and (Path(home) / "bin" / "javac").is_file():
        return str(Path(home) / "bin" / "javac")
    return shutil.which("javac")


def build(hadoop_jar: Path, javac: str) -> Path:
    """Compile the sources against ``hadoop_jar`` into :func:`jar_path` (written whole, then
    renamed into place); returns it. Raises RuntimeError naming javac's first error."""
    target = jar_path(hadoop_jar.name)
    JAR_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=JAR_DIR) as tmp:
        classes = Path(tmp) / "classes"
        cmd = [javac, "--release", "17", "-nowarn", "-cp", str(hadoop_jar), "-d", str(classes), *map(str, sources())]
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            first = next((ln for ln in done.stdout.splitlines() if ln.strip()), f"exit {done.returncode}")
            raise RuntimeError(f"javac failed: {first}")
        staging = Path(tmp) / target.name
        with zipfile.ZipFile(staging, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\nCreated-By: sharedsub bootstrap.py\r\n\r\n")
            for path in sorted(classes.rglob("*.class")):
                jar.write(path, path.relative_to(classes).as_posix())
        os.replace(staging, target)
    for stale in JAR_DIR.glob("sharedsub-jvm-*.jar"):  # jars of older sources
        if stale != target:
            stale.unlink(missing_ok=True)
    return target


def spark_conf(master: str, pyspark_dir: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """Settings that make a session with ``master`` use the helpers: the jar on the driver's
    classpath (any master: a later local session in the same JVM may want it) and, when the
    master runs its executors in the driver's JVM (``local``, ``local[N]``; on a cluster the
    executors would be told to load a class they lack), :data:`LOCAL_FS_CLASS` as ``file:``'s file
    system. {} unless the jar of today's sources is there."""
    if switched_off(environ):
        return {}
    hadoop = hadoop_api_jar(pyspark_dir)
    if hadoop is None:
        return {}
    jar = jar_path(hadoop.name)
    if not jar.is_file():
        return {}
    conf = {"spark.driver.extraClassPath": str(jar)}
    if _IN_PROCESS_MASTER.fullmatch(master):
        conf[LOCAL_FS_KEY] = LOCAL_FS_CLASS
    return conf
