"""Nothing reaches a table path through the file system but the storage package's local paths.

Issue 28: every byte the service reads or writes outside Delta's own API goes through the object
store interface (sharedsub.storage.objects) or a local fast path that first asks
sharedsub.core.layout.local_path whether the location is local. This test finds every call of a
file-system function (``open``, ``os.path.*``, ``os.stat``/``listdir``/``walk``/..., ``shutil``,
``pathlib.Path``) in the shipped packages and allows it only in the modules listed below, each
with why it may: a new module that opens a table's file (and would break on ``s3://``) fails
here, as an import across layers fails tests/unit/test_layering.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sharedsub", "connectors", "jobs")

OS_FUNCTIONS = {
    "listdir", "stat", "lstat", "walk", "scandir", "makedirs", "mkdir", "rmdir", "remove", "unlink",
    "replace", "rename", "open", "fsync", "utime", "chmod", "link",
}

# Module -> why it may touch the file system. Storage modules here branch on local_path (a table
# on object storage goes through its store there); the others touch files that are not tables.
ALLOWED = {
    # Tables: the local implementations behind one interface, each reached only for a local path.
    "sharedsub/storage/objects/local_store.py": "the ObjectStore of a local data dir",
    "sharedsub/storage/delta/tables.py": "the local branch of each location function (stat, listdir, rmtree)",
    "sharedsub/storage/delta/commit_log.py": "log file names and the version-0 stamp of a local table",
    "sharedsub/storage/delta/log_snapshot.py": "the local log reader (object storage: delta_rs_snapshot)",
    "sharedsub/storage/delta/blind_append.py": "the local blind append (object storage: object_append)",
    "sharedsub/storage/delta/prepared_commit.py": "a local blind append's next files, made ahead (blind_append only)",
    "sharedsub/storage/delta/object_checkpoint.py": "a scratch table in a temporary directory: delta-rs's checkpoint layout",
    "sharedsub/storage/delta/data_files.py": "a data file written before its commit into a local table (object storage: a put)",
    "sharedsub/storage/delta/appender.py": "fsync of a local table's new files and log directory",
    "sharedsub/storage/delta/table_reads.py": "the real path of a local table (delta-rs resolves links)",
    "sharedsub/storage/topics.py": "creating and listing a local data dir's topics directory",
    "sharedsub/storage/retention.py": "the fan-out's local Spark checkpoint, and a local file's Parquet footer and size",
    "sharedsub/runtime/maintenance.py": "the empty directory of a removed subscription key, local only",
    # Not tables: files of this host.
    "sharedsub/storage/durable_files.py": "fsynced writes of this host's small files",
    "sharedsub/storage/owner_only.py": "owner-only (0600) files of this host",
    "sharedsub/storage/diskspace.py": "free space of a local data dir's file system",
    "sharedsub/storage/fanout_stats.py": "the fan-out's statistics file, a local file",
    "sharedsub/runtime/commit_wake.py": "the real path of a local data dir names its commit signal (a URL is taken as it is)",
    "sharedsub/runtime/discovery.py": "_service.json of a local data dir, the host state dir",
    "sharedsub/runtime/cluster/data_dir_owner.py": "the owner lock of a local data dir",
    "sharedsub/runtime/users.py": "a local users file (one in a bucket goes through the store)",
    "sharedsub/runtime/permissions_file.py": "the permissions file named in the configuration",
    "sharedsub/runtime/process/memprofile.py": "the memory profile an operator asked for",
    "connectors/amqp/wire/reactor_thread.py": "the proton thread check's reports (debug only)",
    "sharedsub/core/config.py": "the configuration file, and an absolute data dir path",
    "jobs/fanout.py": "the job's own directory on sys.path",
    "jobs/session.py": "spark-defaults.conf",
    "jobs/jar_sets.py": "the jars directories (.jars/)",
    "jobs/jvm_helpers.py": "sharedsub's JVM classes: their sources (jobs/jvm/), javac, the jar in .jars/jvm/",
    "jobs/jvm_archive.py": "the driver JVM's class archive in ~/.cache/sharedsub: its key (java, pyspark's jars), setup's run",
    "jobs/executor_check.py": "whether the executors' Python (PYSPARK_PYTHON) can be run on the driver's host",
    "jobs/sources/deltars_topics.py": "the fan-out's local Spark checkpoint",
}


def file_system_calls(source: str) -> list[tuple[int, str]]:
    """``(line, call)`` of every file-system call in ``source`` (see the module docstring)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = None
        if isinstance(func, ast.Name) and func.id in ("open", "Path"):
            name = func.id
        elif isinstance(func, ast.Attribute):
            owner = func.value
            if isinstance(owner, ast.Name) and owner.id == "os" and func.attr in OS_FUNCTIONS:
                name = f"os.{func.attr}"
            elif isinstance(owner, ast.Name) and owner.id == "shutil":
                name = f"shutil.{func.attr}"
            elif isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name) and (
                owner.value.id, owner.attr) == ("os", "path"):
                name = f"os.path.{func.attr}"
        if name is not None:
            found.append((node.lineno, name))
    return found


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_only_the_listed_modules_touch_the_file_system() -> None:
    offenders = []
    for path in _modules():
        rel = path.relative_to(ROOT).as_posix()
        if rel in ALLOWED:
            continue
        for line, call in file_system_calls(path.read_text()):
            offenders.append(f"{rel}:{line}: {call}")
    assert not offenders, (
        "file-system calls outside the storage package's local paths (a table on s3:// would break "
        "here: go through sharedsub.storage.objects or sharedsub.storage.delta.tables):\n" + "\n".join(offenders)
    )


def test_every_listed_module_still_needs_its_entry() -> None:
    stale = [rel for rel in ALLOWED if not (ROOT / rel).is_file() or not file_system_calls((ROOT / rel).read_text())]
    assert not stale, f"listed but without file-system calls (remove them from ALLOWED): {stale}"


@pytest.mark.parametrize(
    ("snippet", "calls"),
    [
        ("open(p)", ["open"]),
        ("import os\nos.path.isdir(p)", ["os.path.isdir"]),
        ("import os\nos.listdir(p)", ["os.listdir"]),
        ("import shutil\nshutil.rmtree(p)", ["shutil.rmtree"]),
        ("Path(p).read_text()", ["Path"]),
        ("store.get(key)\nlink.open()", []),  # the object store, and proton's open(): not files
    ],
)
def test_the_finder_sees_file_system_calls(snippet: str, calls: list[str]) -> None:
    assert [c for _, c in file_system_calls(snippet)] == calls
