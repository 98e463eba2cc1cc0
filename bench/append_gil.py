"""What the GIL costs a topic append, and what the append child process gives back.

    .venv/bin/python bench/append_gil.py [--appends 120] [--warmup 20] [--rounds 3] [--rows 300]

The service's committer appends group commits while its reactor thread runs Python without a
break. This measures a group commit (``--rows`` 1 KB messages, fsync on, a fresh topic table per
setting) four ways, in interleaved rounds: on this thread or in the append child process
(sharedsub.storage.commits.append_process), each alone and with a thread beside it that keeps the GIL
busy the way the reactor does (switch interval 0.5 ms, as the service sets it). The first
``--warmup`` appends of each are discarded; p50 and p90 ms per append are printed, one JSON line
per setting and round, then the median of the rounds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402

from sharedsub.core import layout  # noqa: E402
from sharedsub.storage import schemas  # noqa: E402
from sharedsub.storage.commits.append_process import AppendProcess  # noqa: E402
from sharedsub.storage.delta.appender import DeltaAppender  # noqa: E402
from sharedsub.storage.topics import create_topic  # noqa: E402

SETTINGS = ("thread/alone", "thread/busy", "process/alone", "process/busy")


def _rows(first: int, n: int) -> pa.Table:
    now = dt.datetime.now(dt.UTC)
    return pa.Table.from_pylist(
        [{"seq": s, "published_at": now, "message": b"x" * 1024, "routing_key": "k", "publisher": "p", "partition": 0,
          "size": 1024} for s in range(first, first + n)],
        schema=schemas.TOPIC,
    )


def _spin(stop: threading.Event) -> None:
    """Pure Python work without a pause, like a reactor under load."""
    x = 0
    while not stop.is_set():
        for i in range(1000):
            x += i * i


def run(setting: str, appends: int, rows: int) -> list[float]:
    """Seconds per append of ``appends`` commits under ``setting``."""
    where, load = setting.split("/")
    root = tempfile.mkdtemp(prefix="append-gil-")
    process = AppendProcess() if where == "process" else None
    stop = threading.Event()
    spinner = threading.Thread(target=_spin, args=(stop,), daemon=True)
    try:
        create_topic(root, "t")
        path = layout.topic_table(root, "t")
        appender = (process.appender(path, schemas.TOPIC, fsync=True) if process is not None
                    else DeltaAppender(path, schemas.TOPIC, fsync=True))
        if process is not None:
            process.start()
        if load == "busy":
            spinner.start()
        out = []
        for i in range(appends):
            data = _rows(i * rows, rows)
            t0 = time.perf_counter()
            appender.append(data, commit_id=uuid.uuid4().hex)
            out.append(time.perf_counter() - t0)
        return out
    finally:
        stop.set()
        if process is not None:
            process.stop()
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Run the interleaved rounds; print JSON lines, then the medians per setting."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--appends", type=int, default=120)
    p.add_argument("--warmup", type=int, default=20, help="appends discarded at the start of each run")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rows", type=int, default=300, help="messages per commit")
    args = p.parse_args(argv)
    sys.setswitchinterval(0.0005)  # as sharedsub.serve sets it for the service
    p50s: dict[str, list[float]] = {s: [] for s in SETTINGS}
    p90s: dict[str, list[float]] = {s: [] for s in SETTINGS}
    for rnd in range(args.rounds):
        for setting in SETTINGS[rnd % 4:] + SETTINGS[: rnd % 4]:
            times = sorted(run(setting, args.appends, args.rows)[args.warmup:])
            p50, p90 = 1000 * statistics.median(times), 1000 * times[int(0.9 * (len(times) - 1))]
            p50s[setting].append(p50)
            p90s[setting].append(p90)
            print(json.dumps({"round": rnd, "setting": setting, "p50_ms": round(p50, 1), "p90_ms": round(p90, 1)}),
                  flush=True)
    for setting in SETTINGS:
        print(f"{setting:14s} p50 {statistics.median(p50s[setting]):6.1f} ms   p90 {statistics.median(p90s[setting]):6.1f} ms"
              f"   (round p50s {', '.join(f'{v:.1f}' for v in p50s[setting])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
