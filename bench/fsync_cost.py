"""What `[storage] fsync` costs one group commit: the front end's topic append, fsync on vs off.

    .venv/bin/python bench/fsync_cost.py [--rounds 200] [--batch 1000] [--size 1024] [--dir DIR]

Two topic tables in one directory on the same file system (default: a fresh temporary dir;
pass ``--dir`` to measure the disk that holds a data dir), appended to alternately with the
front end's own ``DeltaAppender``: one with ``fsync`` (data files, log entry and their
directories forced to disk before the append returns, as serve does by default), one without.
Each round appends one group of ``--batch`` messages of ``--size`` bytes to each table, in
alternating order, so both see the same machine load. The first 10% of rounds are warm-up and
not counted. Prints per-commit median and p90 wall time for both, the difference, and the
implied ceiling on group commits per second; one JSON line goes to bench/out/fsync-<UTC>.jsonl.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import statistics
import sys
import tempfile
import time

import procstat
import pyarrow as pa
import report

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from sharedsub.storage import schemas  # noqa: E402  (the project under test)
from sharedsub.storage.delta.appender import DeltaAppender  # noqa: E402  (the project under test)
from sharedsub.storage.topics import create_topic  # noqa: E402  (the project under test)


def group(first_seq: int, batch: int, size: int) -> pa.Table:
    """``batch`` topic rows with ``size``-byte messages, seqs from ``first_seq``."""
    body = os.urandom(size)
    cols = {
        "seq": list(range(first_seq, first_seq + batch)),
        "routing_key": ["bench"] * batch,
        "partition": [0] * batch,
        "size": [size] * batch,
        "message": [body] * batch,
        "published_at": [datetime.datetime.now(datetime.UTC)] * batch,
    }
    return pa.table({f.name: pa.array(cols.get(f.name, [None] * batch), f.type) for f in schemas.TOPIC})


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--batch", type=int, default=1000, help="messages per group commit (default 1000)")
    p.add_argument("--size", type=int, default=1024, help="bytes per message (default 1024)")
    p.add_argument("--dir", help="where the two tables go (default: a fresh temporary dir)")
    args = p.parse_args(argv)
    base = tempfile.mkdtemp(prefix="sharedsub-fsync-", dir=args.dir)
    tables = {name: create_topic(base, f"fsync-{name}") for name in ("on", "off")}
    appenders = {
        "on": DeltaAppender(tables["on"], schemas.TOPIC, fsync=True),
        "off": DeltaAppender(tables["off"], schemas.TOPIC, fsync=False),
    }
    times: dict[str, list[float]] = {"on": [], "off": []}
    seq = 0
    for r in range(args.rounds):
        data = group(seq, args.batch, args.size)
        seq += args.batch
        for name in (("on", "off") if r % 2 == 0 else ("off", "on")):
            t0 = time.perf_counter()
            appenders[name].append(data)
            times[name].append(time.perf_counter() - t0)
    skip = args.rounds // 10
    out: dict[str, object] = {
        "bench": "fsync_cost",
        "command": shlex.join(sys.orig_argv),
        "commit": report.describe_commit(os.path.dirname(HERE)),
        "machine": procstat.machine_info(),
        "dir": base,
        "rounds_counted": args.rounds - skip,
        "batch": args.batch,
        "size": args.size,
        "loadavg_1m_after": procstat.loadavg_1m(),
    }
    for name, values in times.items():
        kept = [v * 1000 for v in values[skip:]]
        out[f"fsync_{name}_p50_ms"] = round(statistics.median(kept), 2)
        out[f"fsync_{name}_p90_ms"] = round(quantile(kept, 0.9), 2)
    diff = out["fsync_on_p50_ms"] - out["fsync_off_p50_ms"]  # type: ignore[operator]
    out["fsync_added_p50_ms"] = round(diff, 2)
    os.makedirs(os.path.join(HERE, "out"), exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(HERE, "out", f"fsync-{stamp}.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(out) + "\n")
    print(f"| group commit of {args.batch} x {args.size} B | p50 ms | p90 ms |")
    print("| --- | --- | --- |")
    for name in ("on", "off"):
        print(f"| fsync {name} | {out[f'fsync_{name}_p50_ms']} | {out[f'fsync_{name}_p90_ms']} |")
    print(f"\nfsync adds {diff:.2f} ms per group commit at the median "
          f"({args.rounds - skip} rounds counted, load average {out['loadavg_1m_after']:.2f}); raw: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
