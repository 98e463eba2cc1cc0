"""CPU time one topic commit costs the append child, by the number of messages in it.

    .venv/bin/python bench/append_cpu.py [--commits 1000] [--rows 2,20,500]

The append child (sharedsub.storage.commits.append_process) turns each group commit's pickled
column lists into an Arrow table and appends it with fsync on, as ``serve`` has it commit; at
light traffic every commit holds a message or two, and ``[publish] min_commit_interval`` (0.02)
lets a topic make up to 50 a second whatever their size. For each ``--rows``, a fresh topic table
gets ``--commits`` commits of that many 1 KB messages through the child's own decoding
(``append_process._rows``) and ``DeltaAppender`` (blind appends, a checkpoint every 100
versions on its thread, as in the child); the user and system CPU seconds of this process per
commit are printed as one JSON line per size (wall time too). The rows are pickled beforehand, as
the service sends them: the pipe and the service's own work are not counted.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import pickle
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sharedsub.core.ops.gc_tuning import tune_for_serving  # noqa: E402
from sharedsub.storage import schemas  # noqa: E402
from sharedsub.storage.commits.append_process import _rows  # noqa: E402
from sharedsub.storage.delta.appender import DeltaAppender  # noqa: E402

_PICKLED = {"rows": "pickle"}  # the header of an append request whose rows are pickled column lists


def _request(first_seq: int, rows: int) -> bytes:
    """The body of an append request: ``rows`` 1 KB messages from ``first_seq``, pickled."""
    now = dt.datetime.now(dt.UTC)
    columns: dict[str, list[object]] = {name: [None] * rows for name in schemas.TOPIC.names}
    columns.update(
        seq=list(range(first_seq, first_seq + rows)),
        published_at=[now] * rows,
        publisher=["bench-publisher"] * rows,
        routing_key=["bench"] * rows,
        partition=[0] * rows,
        size=[1024] * rows,
        durable=[True] * rows,
        priority=[4] * rows,
        message_id=[f"ID:bench-{seq}" for seq in range(first_seq, first_seq + rows)],
        to=["topic://bench"] * rows,
        creation_time=[int(now.timestamp() * 1000)] * rows,
        application_properties=[[] for _ in range(rows)],
        message=[b"x" * 1024] * rows,
    )
    return pickle.dumps((schemas.TOPIC.serialize().to_pybytes(), columns))


def measure(root: Path, commits: int, rows: int) -> dict[str, object]:
    """Commit ``commits`` groups of ``rows`` messages to a new table under ``root``."""
    appender = DeltaAppender(str(root / f"topic-{rows}"), schemas.TOPIC, fsync=True)
    appender.append(_rows(_PICKLED, _request(0, rows)), commit_id="first")  # creates the table
    bodies = [_request(i * rows, rows) for i in range(1, commits + 1)]
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for i, body in enumerate(bodies, 1):
        appender.append(_rows(_PICKLED, body), commit_id=f"c{i}")
    wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
    appender.finish()
    return {
        "rows": rows,
        "commits": commits,
        "user_ms_per_commit": round(1000 * (after.ru_utime - before.ru_utime) / commits, 3),
        "system_ms_per_commit": round(1000 * (after.ru_stime - before.ru_stime) / commits, 3),
        "wall_ms_per_commit": round(1000 * wall / commits, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--rows", default="2,20,500", help="messages per commit, comma-separated")
    parser.add_argument("--dir", help="where the tables go (default: a temporary directory, removed)")
    args = parser.parse_args()
    tune_for_serving()  # as the child does with [server] gc_tuning (the default)
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="append-cpu-"))
    try:
        for rows in (int(r) for r in args.rows.split(",")):
            print(json.dumps(measure(root, args.commits, rows)), flush=True)
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
