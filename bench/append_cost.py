"""What a topic append costs against how often the appender re-opens its Delta table.

    .venv/bin/python bench/append_cost.py [--appends 400] [--rounds 3] [--reopen 200,100,50] [--rows 100]

The front end's committer appends each group commit with a long-lived ``appender.DeltaAppender``,
which re-opens its ``DeltaTable`` every ``reopen_every`` commits. For each setting, in
interleaved rounds (so a busy machine slows every setting alike), a fresh topic table gets
``--appends`` commits of ``--rows`` 1 KB messages with fsync on, as the committer makes them; the
median and mean ms per append, and the median per block of 100 commits (delta-rs writes a
checkpoint every 100 commits), are printed, one JSON line per setting and round.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402

from sharedsub.core import layout
from sharedsub.storage import schemas  # noqa: E402
from sharedsub.storage.delta.appender import DeltaAppender  # noqa: E402


def run(reopen: int, appends: int, rows: int) -> list[float]:
    """Seconds per append of ``appends`` commits to a fresh topic table."""
    root = tempfile.mkdtemp(prefix="append-cost-")
    try:
        appender = DeltaAppender(layout.topic_table(root, "t"), schemas.TOPIC, fsync=True, reopen_every=reopen)
        now = dt.datetime.now(dt.UTC)
        out = []
        for i in range(appends):
            data = pa.Table.from_pylist(
                [{"seq": s, "published_at": now, "message": b"x" * 1024} for s in range(i * rows, (i + 1) * rows)],
                schema=schemas.TOPIC,
            )
            t0 = time.perf_counter()
            appender.append(data)
            out.append(time.perf_counter() - t0)
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Run the interleaved rounds; print JSON lines, then medians per setting."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--appends", type=int, default=400)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reopen", default="200,100,50", help="reopen_every settings, comma-separated")
    p.add_argument("--rows", type=int, default=100, help="messages per commit")
    args = p.parse_args(argv)
    settings = [int(x) for x in args.reopen.split(",")]
    medians: dict[int, list[float]] = {r: [] for r in settings}
    for rnd in range(args.rounds):
        for reopen in settings[rnd % len(settings):] + settings[: rnd % len(settings)]:
            times = run(reopen, args.appends, args.rows)
            med = 1000 * statistics.median(times)
            medians[reopen].append(med)
            blocks = [round(1000 * statistics.median(times[j : j + 100]), 1) for j in range(0, len(times), 100)]
            print(json.dumps({"round": rnd, "reopen_every": reopen, "p50_ms": round(med, 1),
                              "mean_ms": round(1000 * statistics.mean(times), 1), "p50_ms_per_100": blocks}))
    for reopen, meds in medians.items():
        rounds = ", ".join(f"{m:.1f}" for m in meds)
        print(f"reopen_every={reopen}: median of round p50s {statistics.median(meds):.1f} ms ({rounds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
