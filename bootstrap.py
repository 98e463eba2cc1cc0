#!/usr/bin/env python3
"""Set up everything sharedsub needs on a fresh machine, then run it or its tests.

    python3 bootstrap.py serve [sharedsub serve options]   # set up, then run the service
    python3 bootstrap.py test  [pytest options]            # set up, then run the whole suite

Setup is idempotent and only does what is missing: a virtual environment in .venv with the
pinned packages (setup.py), and a Java 17 runtime through apt-get when ``java`` is not on PATH
(PySpark needs one). Needs nothing but Python 3.11.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".sharedsub-installed"


def say(text: str) -> None:
    print(f"[bootstrap] {text}", flush=True)


def run(cmd: list[str], **kw: object) -> None:
    say("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True, **kw)  # type: ignore[call-overload]


def venv_python() -> Path:
    return VENV / "bin" / "python"


def ensure_java() -> None:
    if shutil.which("java"):
        return
    say("java not found: installing a Java 17 runtime with apt-get")
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    run([*sudo, "apt-get", "update", "-q"], env=env)
    run([*sudo, "apt-get", "install", "-y", "-q", "openjdk-17-jre-headless"], env=env)


def ensure_venv() -> None:
    if sys.version_info < (3, 11):
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
    ensure_java()
    ensure_venv()


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("serve", "test", "setup"):
        print(__doc__)
        return 2
    command, rest = argv[0], argv[1:]
    setup()
    env = dict(os.environ, PYSPARK_PYTHON=str(venv_python()), PYSPARK_DRIVER_PYTHON=str(venv_python()))
    if command == "setup":
        return 0
    if command == "serve":
        os.execve(str(VENV / "bin" / "sharedsub"), ["sharedsub", "serve", *rest], env)
    # The whole suite: unit, storage, Spark and end-to-end tiers.
    cmd = [str(venv_python()), "-m", "pytest", *rest]
    say("$ " + " ".join(cmd))
    return subprocess.call(cmd, cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
