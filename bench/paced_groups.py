"""How many group commits a publisher paced on its own clock makes, against the commit interval.

    .venv/bin/python bench/paced_groups.py [--spacings 3,5,6,7,8,10,15] [--count 300] [--rounds 2]

One ``sharedsub serve`` on a fresh data dir (the defaults, or the ``SHAREDSUB_*`` settings of the
environment). For each spacing, in each round, a fresh topic gets ``--count`` durable messages
from a python-qpid-proton publisher that sends one every ``spacing`` seconds on its own timer,
without waiting for outcomes; the topic table's distinct ``published_at`` values are its group
commits (a group's rows share the time its append started). Prints one line per spacing and
round: the groups, the messages per group, and the groups the commit interval alone would make
(the publishing time over ``[publish] min_commit_interval``).

A publisher paced a little slower than a lone commit was taken for a synchronous one and had
each message committed alone (sharedsub.core.publish.commit_pace, ``PIPELINED_FOR``): this shows
whether it still is. One JSON line per measurement goes to bench/out/paced-groups-<UTC>.jsonl.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

from sharedsub_service import SharedSubService  # noqa: E402

from sharedsub.core import config, layout  # noqa: E402
from sharedsub.storage.delta.table_reads import read_table  # noqa: E402
from tests.paced_publisher import publish_at  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Measure; print a line per spacing and round."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spacings", default="3,5,6,7,8,10,15", help="ms between two sends, comma-separated")
    p.add_argument("--count", type=int, default=300, help="messages per spacing")
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args(argv)
    spacings = [float(x) / 1000 for x in args.spacings.split(",")]
    interval = config.load_settings().publish.min_commit_interval
    os.makedirs(os.path.join(HERE, "out"), exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    out_path = os.path.join(HERE, "out", f"paced-groups-{stamp}.jsonl")
    log_path = os.path.join(HERE, "out", f"paced-groups-{stamp}.serve.log")
    with SharedSubService(log=lambda m: print(m, flush=True), log_path=log_path) as service, open(out_path, "w") as out:
        names = {(r, s): f"paced-{uuid.uuid4().hex[:8]}" for r in range(args.rounds) for s in spacings}
        service.create_topics(names.values())
        service.start()
        for rnd in range(args.rounds):
            for spacing in spacings:
                name = names[(rnd, spacing)]
                at = time.time() + 0.5
                publish_at(service.url, name, [at + i * spacing for i in range(args.count)], timeout=120)
                rows = read_table(layout.topic_table(service.data_dir, name))
                groups = len(set(rows.column("published_at").to_pylist())) if rows is not None else 0
                at_interval = args.count * spacing / interval
                line = {
                    "round": rnd + 1,
                    "spacing_ms": spacing * 1000,
                    "messages": args.count,
                    "groups": groups,
                    "groups_at_interval": round(at_interval, 1),
                    "min_commit_interval": interval,
                }
                out.write(json.dumps(line) + "\n")
                print(
                    f"round {rnd + 1}, one message every {spacing * 1000:g} ms: {groups} groups "
                    f"({args.count / max(groups, 1):.1f} a group; ~{at_interval:.0f} at the interval)",
                    flush=True,
                )
                time.sleep(0.5)  # the next topic's first message is not in this one's last group
    print(f"raw lines: {os.path.relpath(out_path, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
