"""The fan-out's fixed cost per micro-batch: CPU and wall time of one more batch, back to back.

    .venv/bin/python bench/batch_cost.py [--small 50] [--large 450] [--rows 5] [--rounds 2]

Two data dirs get one topic with a subscription and ``--small`` and ``--large`` commits of
``--rows`` rows each (tests/builders.py). ``python -m jobs.fanout --available-now`` routes each
with ``[fanout] max_commits_per_batch = 1``: one micro-batch per commit, back to back, with the
service's own Spark settings. The CPU of the job's whole process tree (its Python driver, the
driver JVM, the source's Python runner; read from /proc every 0.1 s, each process's last
reading kept) and its wall time are measured per run; the difference between the two runs,
divided by the difference in batches, is what one more batch costs, start-up and the query's
planning left out. Each round runs the small data dir, then the large one, straight after: a
machine whose speed drifts moves a round's two runs alike, not the whole measurement. Prints one
line per round and the median; nothing else should run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import procstat  # noqa: E402 (bench/ is not a package)

from tests import builders as b  # noqa: E402


def make_data_dir(commits: int, rows: int) -> str:
    """A data dir whose topic has a subscription and ``commits`` commits of ``rows`` rows after it."""
    root = os.path.join(tempfile.mkdtemp(prefix="batch-cost-"), "data")
    b.publish(root, "t", ["k"] * rows)
    b.register(root, b.subscription("t", name="s"))
    for _ in range(commits):
        b.publish(root, "t", ["k"] * rows)
    return root


def route(root: str) -> tuple[float, float]:
    """Route ``root``'s commits one batch each; the job tree's CPU seconds and the wall seconds."""
    env = dict(os.environ, SHAREDSUB_FANOUT_MAX_COMMITS_PER_BATCH="1")
    # Its stderr goes to a file, not a pipe: a full pipe would stall the job.
    with tempfile.TemporaryFile(mode="w+") as errors:
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "jobs.fanout", "--data-dir", root, "--available-now"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=errors,
        )
        # The tree is listed again at each reading (the JVM and the source runner start after
        # the driver); a process that ended keeps its last reading (procstat.cpu_reader lists
        # the tree once, at its start).
        spent: dict[int, float] = {}
        while proc.poll() is None:
            for pid in procstat.tree_pids(proc.pid):
                cpu = procstat.process_cpu_seconds(pid)
                if cpu is not None:
                    spent[pid] = cpu
            time.sleep(0.1)
        wall = time.monotonic() - started
        if proc.returncode != 0:
            errors.seek(0)
            raise RuntimeError(f"the fan-out job failed ({proc.returncode}): {errors.read()[-2000:]}")
    return sum(spent.values()), wall


def main(argv: list[str] | None = None) -> int:
    """Measure ``--rounds`` rounds; print each and the median per-batch CPU and wall time."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--small", type=int, default=50, help="commits of the small run (default 50)")
    p.add_argument("--large", type=int, default=450, help="commits of the large run (default 450)")
    p.add_argument("--rows", type=int, default=5, help="rows per commit (default 5)")
    p.add_argument("--rounds", type=int, default=2, help="rounds (default 2)")
    args = p.parse_args(argv)
    if args.large <= args.small:
        p.error("--large must be above --small")
    cpu_ms: list[float] = []
    wall_ms: list[float] = []
    for n in range(1, args.rounds + 1):
        dirs = {size: make_data_dir(size, args.rows) for size in (args.small, args.large)}
        try:
            (cpu_s, wall_s), (cpu_l, wall_l) = (route(dirs[args.small]), route(dirs[args.large]))
        finally:
            for root in dirs.values():
                shutil.rmtree(os.path.dirname(root), ignore_errors=True)
        batches = args.large - args.small
        cpu_ms.append(1e3 * (cpu_l - cpu_s) / batches)
        wall_ms.append(1e3 * (wall_l - wall_s) / batches)
        print(f"round {n}: {args.small} batches {cpu_s:.2f} s CPU, {wall_s:.1f} s wall; {args.large}: {cpu_l:.2f} s, "
              f"{wall_l:.1f} s; one batch {cpu_ms[-1]:.2f} ms CPU, {wall_ms[-1]:.2f} ms wall", flush=True)
    print(f"median per batch: {statistics.median(cpu_ms):.2f} ms CPU, {statistics.median(wall_ms):.2f} ms wall "
          f"({args.rounds} rounds, {args.rows} rows a batch; machine: {procstat.machine_info()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
