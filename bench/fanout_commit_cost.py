"""What the fan-out's commit to one subscription table costs as the table's log grows.

    .venv/bin/python bench/fanout_commit_cost.py [--commits 1000] [--rows 100] [--block 100]

For each subscription table a micro-batch routes rows to, the fan-out (jobs/table_commits.py
``TableCommits.commit``) asks the table's appender for the Spark app transaction's version
(``DeltaAppender.transaction_version``), drops the rows at or below it, and appends the rest with
the new version. This makes ``--commits`` such commits of ``--rows`` rows to a fresh subscription
table, as one long-lived fan-out process does, and prints per block of ``--block`` commits the
mean wall ms of the lookup and of the append, one JSON line per block.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402

from sharedsub.storage import schemas  # noqa: E402
from sharedsub.storage.delta.appender import DeltaAppender  # noqa: E402


def _rows(first: int, n: int) -> pa.Table:
    columns = {
        f.name: pa.array(range(first, first + n), f.type) if f.name == "seq" else pa.nulls(n, f.type)
        for f in schemas.SUBSCRIPTION
    }
    return pa.table(columns, schema=schemas.SUBSCRIPTION)


def main(argv: list[str] | None = None) -> int:
    """Make the commits; print one JSON line per block."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--commits", type=int, default=1000)
    p.add_argument("--rows", type=int, default=100, help="rows per commit")
    p.add_argument("--block", type=int, default=100, help="commits per printed line")
    args = p.parse_args(argv)
    root = tempfile.mkdtemp(prefix="fanout-commit-cost-")
    try:
        appender = DeltaAppender(str(Path(root) / "subscription"), schemas.SUBSCRIPTION)
        lookup: list[float] = []
        append: list[float] = []
        seq = 0
        for i in range(args.commits):
            t0 = time.perf_counter()
            appender.transaction_version(schemas.SPARK_APP_ID)
            t1 = time.perf_counter()
            appender.append(_rows(seq, args.rows), app_transaction=(schemas.SPARK_APP_ID, seq + args.rows - 1))
            t2 = time.perf_counter()
            seq += args.rows
            lookup.append(t1 - t0)
            append.append(t2 - t1)
            if (i + 1) % args.block == 0:
                line = {
                    "commits": i + 1, "rows": args.rows,
                    "transaction_version_ms": round(1000 * statistics.fmean(lookup), 3),
                    "append_ms": round(1000 * statistics.fmean(append), 3),
                }
                print(json.dumps(line), flush=True)
                lookup, append = [], []
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
