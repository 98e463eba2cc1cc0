"""What one Structured Streaming checkpoint file costs, per Spark checkpoint file manager.

    .venv/bin/python bench/checkpoint_files.py [--files 100] [--rounds 3]

Each micro-batch of the fan-out job writes two checkpoint files (``offsets/N`` and ``commits/N``)
through a ``CheckpointFileManager``. On a local file system without Hadoop's native library
(pyspark ships none), Hadoop sets permissions and resolves links by running ``chmod`` and
``readlink`` as child processes. This starts a local Spark session with jobs/spark-defaults.conf,
then, in interleaved rounds, writes ``--files`` small files atomically (``createAtomic``, as the
offset and commit logs do) through each manager, and prints one JSON line per manager and round:
wall ms per file, the JVM's own CPU ms per file and its children's (the spawned processes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark.sql import SparkSession  # noqa: E402

from jobs.session import read_spark_defaults  # noqa: E402

_PACKAGE = "org.apache.spark.sql.execution.streaming.checkpointing."
MANAGERS = ("FileContextBasedCheckpointFileManager", "FileSystemBasedCheckpointFileManager")
_CONF_KEY = "spark.sql.streaming.checkpointFileManagerClass"


def _jvm_cpu(pid: int) -> tuple[float, float]:
    """(own, children's) CPU seconds of process ``pid`` (utime+stime, cutime+cstime)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


def _jvm_pid(spark: SparkSession) -> int:
    return int(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]


def write_files(spark: SparkSession, manager: str, directory: str, files: int) -> dict[str, float]:
    """Write ``files`` checkpoint files under ``directory`` through ``manager``; costs per file."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    conf = spark._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
    conf.set(_CONF_KEY, _PACKAGE + manager)
    path = jvm.org.apache.hadoop.fs.Path
    mgr = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager.create(
        path("file://" + directory), conf,
    )
    mgr.mkdirs(path("file://" + directory))
    pid = _jvm_pid(spark)
    own0, kids0 = _jvm_cpu(pid)
    t0 = time.perf_counter()
    for i in range(files):
        out = mgr.createAtomic(path(f"file://{directory}/{i}"), False)
        out.write(b'{"batchWatermarkMs":0}')
        out.close()
    wall = time.perf_counter() - t0
    own1, kids1 = _jvm_cpu(pid)
    return {
        "wall_ms_per_file": round(wall / files * 1000, 2),
        "jvm_cpu_ms_per_file": round((own1 - own0) / files * 1000, 2),
        "child_process_cpu_ms_per_file": round((kids1 - kids0) / files * 1000, 2),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the interleaved rounds; print JSON lines, then the medians per manager."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    builder = SparkSession.builder.master("local[1]").appName("checkpoint-files")
    for key, value in read_spark_defaults().items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    root = tempfile.mkdtemp(prefix="checkpoint-files-")
    results: dict[str, list[dict[str, float]]] = {m: [] for m in MANAGERS}
    try:
        write_files(spark, MANAGERS[0], os.path.join(root, "warmup"), 20)  # class loading, JIT
        for round_ in range(args.rounds):
            for manager in MANAGERS:
                res = write_files(spark, manager, os.path.join(root, f"{manager}-{round_}"), args.files)
                results[manager].append(res)
                print(json.dumps({"manager": manager, "round": round_, "files": args.files, **res}), flush=True)
        for manager, runs in results.items():
            medians = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            print(json.dumps({"manager": manager, "median_of_rounds": args.rounds, **medians}), flush=True)
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
