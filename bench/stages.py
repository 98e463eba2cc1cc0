"""Where the time of a measured window went: the per-stage histograms of a running sharedsub
(``sharedsub_stage_seconds`` on /metrics, sharedsub.core.ops.stage_timing) scraped at the start and at the
end of the window, subtracted, and printed per stage as count, mean, p50 and p99.

As a library (bench/run.py): ``before = scrape(url)`` … ``report(before, scrape(url))``.
As a command, against a service already running on a data dir::

    .venv/bin/python bench/stages.py --data-dir DIR [--window 60]

p50 and p99 are estimates within the fixed buckets of sharedsub.core.ops.stage_timing (linear inside a
bucket, as Prometheus' histogram_quantile); the mean is exact.
"""

from __future__ import annotations

import argparse
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sharedsub.core.ops.stage_timing import BUCKETS, STAGE_HELP, Histogram  # noqa: E402
from sharedsub.runtime.discovery import read_service_file  # noqa: E402

FAMILY = "sharedsub_stage_seconds"


def metrics_url(data_dir: str) -> str:
    """The /metrics URL of the service running on ``data_dir`` (from its _service.json)."""
    info = read_service_file(data_dir)
    if info is None or info.admin_url is None:
        msg = f"no service with an HTTP endpoint runs on {data_dir}"
        raise SystemExit(msg)
    return f"{info.admin_url}/metrics"


def parse_stages(text: str) -> dict[str, Histogram]:
    """The stage histograms in a Prometheus text exposition (cumulative buckets → counts)."""
    cumulative: dict[str, dict[str, float]] = {}
    sums: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(FAMILY + "_"):
            continue
        name, _, rest = line.partition("{")
        labels_text, _, value = rest.rpartition("} ")
        labels = dict(part.split("=", 1) for part in labels_text.split(","))
        stage = labels.get("stage", "").strip('"')
        if name == FAMILY + "_bucket":
            cumulative.setdefault(stage, {})[labels["le"].strip('"')] = float(value)
        elif name == FAMILY + "_sum":
            sums[stage] = float(value)
    out = {}
    bounds = [repr(b) for b in BUCKETS] + ["+Inf"]
    for stage, by_le in cumulative.items():
        running = [int(by_le.get(b, 0)) for b in bounds]
        counts = [running[0]] + [running[i] - running[i - 1] for i in range(1, len(running))]
        out[stage] = Histogram(counts, sums.get(stage, 0.0))
    return out


def scrape(url: str) -> dict[str, Histogram]:
    """The stage histograms of GET ``url`` (a /metrics URL)."""
    with urllib.request.urlopen(url, timeout=30) as reply:
        return parse_stages(reply.read().decode())


def report(before: Mapping[str, Histogram], after: Mapping[str, Histogram]) -> list[dict[str, Any]]:
    """Per stage seen in the window: count, mean, p50, p99 (ms) and total seconds, in the order
    of a message's path (sharedsub.core.ops.stage_timing.STAGE_HELP)."""
    rows = []
    for stage in [*STAGE_HELP, *sorted(set(after) - set(STAGE_HELP))]:
        if stage not in after:
            continue
        window = after[stage].minus(before[stage]) if stage in before else after[stage]
        n = window.count
        if n == 0:
            continue
        rows.append({
            "stage": stage,
            "count": n,
            "mean_ms": 1000 * window.total / n,
            "p50_ms": 1000 * (window.quantile(0.5) or 0.0),
            "p99_ms": 1000 * (window.quantile(0.99) or 0.0),
            "total_s": window.total,
        })
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """``rows`` of :func:`report` as a markdown table."""
    lines = ["| stage | count | mean ms | p50 ms | p99 ms | total s |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(
            f"| {r['stage']} | {r['count']} | {r['mean_ms']:.2f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['total_s']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Scrape, wait ``--window`` seconds, scrape again, print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", required=True, help="data dir of the running service")
    p.add_argument("--window", type=float, default=60.0, help="seconds between the two scrapes (default 60)")
    args = p.parse_args(argv)
    url = metrics_url(args.data_dir)
    before = scrape(url)
    print(f"scraped {url}; waiting {args.window:.0f} s", file=sys.stderr)
    time.sleep(args.window)
    print(table(report(before, scrape(url))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
