"""What a topic append costs as the table's Delta log grows: blind appends against delta-rs.

    .venv/bin/python bench/append_log_growth.py [--appends 1200] [--rows 45] [--block 200]

The front end's committer appends each group commit with ``appender.DeltaAppender``. With
``blind=True`` (the default) an append to an existing local table writes its Parquet file and
commit file itself (sharedsub.storage.delta.blind_append); with ``blind=False`` every append is a
delta-rs ``write_deltalake``, which lists the ``_delta_log`` directory (a ``stat`` per entry)
several times, so its cost grows with the log the table keeps. For each mode a fresh topic table
gets ``--appends`` commits of ``--rows`` 1 KB messages with fsync on (45 is about what a group
commit holds at 1,000 msg/s); per block of ``--block`` commits the CPU ms per append (this
process: delta-rs's threads included) and the median wall ms are printed, one JSON line per
mode and block. The two modes run one after the other on the same machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402

from sharedsub.core import layout  # noqa: E402
from sharedsub.storage import schemas  # noqa: E402
from sharedsub.storage.delta.appender import DeltaAppender  # noqa: E402


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(blind: bool, appends: int, rows: int, block: int) -> list[dict[str, object]]:
    """One line per block of ``block`` commits to a fresh topic table."""
    root = tempfile.mkdtemp(prefix="append-growth-")
    try:
        appender = DeltaAppender(layout.topic_table(root, "t"), schemas.TOPIC, fsync=True, blind=blind)
        now = dt.datetime.now(dt.UTC)
        lines: list[dict[str, object]] = []
        cpu: list[float] = []
        wall: list[float] = []
        for i in range(appends):
            data = pa.Table.from_pylist(
                [{"seq": s, "published_at": now, "message": b"x" * 1024} for s in range(i * rows, (i + 1) * rows)],
                schema=schemas.TOPIC,
            )
            c0, t0 = _cpu(), time.perf_counter()
            appender.append(data)
            wall.append(time.perf_counter() - t0)
            cpu.append(_cpu() - c0)
            if (i + 1) % block == 0:
                lines.append({
                    "mode": "blind" if blind else "delta-rs", "commits": i + 1, "rows": rows,
                    "cpu_ms_per_append": round(1000 * statistics.fmean(cpu), 2),
                    "wall_p50_ms": round(1000 * statistics.median(wall), 2),
                })
                print(json.dumps(lines[-1]), flush=True)
                cpu, wall = [], []
        return lines
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--appends", type=int, default=1200)
    p.add_argument("--rows", type=int, default=45, help="messages per commit")
    p.add_argument("--block", type=int, default=200, help="commits per printed line")
    args = p.parse_args()
    for blind in (True, False):
        run(blind, args.appends, args.rows, args.block)


if __name__ == "__main__":
    main()
