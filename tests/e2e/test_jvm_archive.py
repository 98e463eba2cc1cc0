"""The fan-out's driver JVM starts from the class archive setup made (jobs/jvm_archive.py).

A real ``serve`` (the e2e session's): its fan-out child's JVM must have the archive of its class
path mapped. When setup did not make it, or the JVM refused it (another java, another class
path than the key says), this fails: the start would be half again as long without anyone
noticing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyspark
import pytest

from jobs import jvm_archive
from jobs.fanout import DRIVER_CONF
from jobs.session import spark_conf
from sharedsub.core.config import load_settings
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
        for child in children:
            out += [child, *_descendants(child)]
    return out


def _exe(pid: int) -> str:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:  # gone meanwhile (a launcher script's short-lived children)
        return ""


def test_the_fanout_driver_jvm_maps_the_class_archive_setup_made(service: ServeProcess) -> None:
    settings = load_settings(environ={**os.environ, "SHAREDSUB_STORAGE_DATA_DIR": str(service.data_dir)})
    classpath = spark_conf(settings, extra=DRIVER_CONF).get("spark.driver.extraClassPath", "")
    archive = jvm_archive.archive_path(Path(pyspark.__file__).parent, classpath, os.environ)
    assert archive is not None and archive.is_file(), (
        f"no class archive {archive}: `python3 bootstrap.py test` makes it (jobs/jvm_archive.py)"
    )
    fanout = service.fanout_pid()
    assert fanout is not None
    javas = [p for p in _descendants(fanout) if _exe(p) == "java"]
    assert javas, "the fan-out child has no JVM"
    maps = Path(f"/proc/{javas[0]}/maps").read_text()
    assert str(archive) in maps, f"the driver JVM {javas[0]} has not mapped {archive}"
