"""What the syncs of one durable local commit cost, in the order the fast path makes them, against
two other ways to make the same files durable before the commit's link.

    .venv/bin/python bench/sync_sequence.py [--commits 300] [--rounds 2] [--dir DIR]

Each commit writes a new data file (``--data-bytes``) into a table directory and a commit file
(``--commit-bytes``) beside its ``_delta_log``, makes them durable, hard-links the commit file to
its version and fsyncs the log directory (sharedsub.storage.delta.blind_append, a sync commit):

- ``fsyncs``: the data file, the table directory and the commit file, one fsync each (as serve
  does today);
- ``syncfs``: one ``syncfs(2)`` of the file system instead of those three (it flushes whatever
  else is dirty there too);
- ``threads``: the commit file fsynced on a second thread while this one fsyncs the data file,
  then the table directory.

The ways alternate by round, ``--commits`` each, on one file system (default: a fresh
temporary dir; ``--dir`` measures the disk that holds a data dir). Prints each round's median and
mean per commit; one JSON line goes to bench/out/sync-sequence-<UTC>.jsonl.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable

import procstat

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

# The project's own syncs (what serve calls), measured in three orders.
from sharedsub.storage.durable_files import fsync_path as _fsync  # noqa: E402
from sharedsub.storage.durable_files import sync_filesystem as _syncfs  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--commits", type=int, default=300, help="commits per way and round (default 300)")
    p.add_argument("--rounds", type=int, default=2, help="rounds of every way (default 2)")
    p.add_argument("--data-bytes", type=int, default=3000, help="bytes of each data file (default 3000)")
    p.add_argument("--commit-bytes", type=int, default=800, help="bytes of each commit file (default 800)")
    p.add_argument("--dir", help="where to write (default: a fresh temporary dir)")
    args = p.parse_args()
    base = tempfile.mkdtemp(prefix="sync-sequence-", dir=args.dir)
    table = os.path.join(base, "table")
    log_dir = os.path.join(table, "_delta_log")
    os.makedirs(log_dir)
    data, commit = os.urandom(args.data_bytes), b"x" * args.commit_bytes
    pool = concurrent.futures.ThreadPoolExecutor(1)

    def fsyncs(data_file: str, temp: str) -> None:
        _fsync(data_file)
        _fsync(table, directory=True)
        _fsync(temp)

    def syncfs(data_file: str, temp: str) -> None:
        _syncfs(table)

    def threads(data_file: str, temp: str) -> None:
        other = pool.submit(_fsync, temp)
        _fsync(data_file)
        other.result()
        _fsync(table, directory=True)

    ways: dict[str, Callable[[str, str], None]] = {"fsyncs": fsyncs, "syncfs": syncfs, "threads": threads}
    version = 0
    rows = []
    for rnd in range(1, args.rounds + 1):
        for name, durable in ways.items():
            took = []
            for _ in range(args.commits):
                start = time.perf_counter()
                data_file = os.path.join(table, f"part-{uuid.uuid4()}.parquet")
                with open(data_file, "xb") as fh:
                    fh.write(data)
                temp = os.path.join(log_dir, f"_commit_{uuid.uuid4()}.json.tmp")
                with open(temp, "xb") as fh:
                    fh.write(commit)
                durable(data_file, temp)
                os.link(temp, os.path.join(log_dir, f"{version:020d}.json"))
                os.unlink(temp)
                _fsync(log_dir, directory=True)
                took.append(time.perf_counter() - start)
                version += 1
            row = {"round": rnd, "way": name, "median_ms": 1000 * statistics.median(took),
                   "mean_ms": 1000 * statistics.mean(took)}
            rows.append(row)
            print(f"round {rnd} {name:8s} median {row['median_ms']:.2f} ms  mean {row['mean_ms']:.2f} ms per commit")
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = os.path.join(HERE, "out", f"sync-sequence-{stamp}.jsonl")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as result:
        result.write(json.dumps({"bench": "sync_sequence", "dir": base, "rows": rows, **vars(args),
                             "machine": procstat.machine_info()}) + "\n")
    shutil.rmtree(base, ignore_errors=True)
    print(f"raw line: {os.path.relpath(out, os.path.dirname(HERE))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
