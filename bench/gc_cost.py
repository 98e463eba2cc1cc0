"""What Python's cyclic garbage collector costs ``sharedsub serve`` while publishing, with
``[server] gc_tuning`` on (the default) and off (CPython's thresholds), one serve after the other.

    .venv/bin/python bench/gc_cost.py [--runs 4] [--count 200000] [--rounds 2]

Each round starts serve once per setting and publishes ``--runs`` times ``--count`` 1 KB durable
messages to fresh topics with the rhea client (bench/rhea_client.js, as bench/run.py does), and
reports per run the publish rate and serve's CPU per message, and per serve the seconds its
collections took by generation. The collection time is read inside serve by a
``gc.callbacks`` hook that a ``sitecustomize`` module, written to a temporary directory put on
serve's PYTHONPATH, installs; serve's code is not changed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import procstat
import rhea_workloads

ROOT = Path(__file__).resolve().parents[1]
SHAREDSUB = Path(sys.executable).parent / "sharedsub"
_HOOK = '''
import gc, json, os, sys, time, atexit
if any("sharedsub" in a for a in sys.argv[:2]):
    _spent = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}
    _start = {}
    def _cb(phase, info):
        g = info["generation"]
        if phase == "start":
            _start[g] = time.perf_counter()
        elif g in _start:
            _spent[g][0] += 1
            _spent[g][1] += time.perf_counter() - _start.pop(g)
    gc.callbacks.append(_cb)
    def _dump():
        with open(os.environ["GC_COST_OUT"], "w") as fh:
            json.dump({str(g): v for g, v in _spent.items()}, fh)
    atexit.register(_dump)
'''


def one_serve(tuning: bool, runs: int, count: int, hook_dir: str) -> dict[str, object]:
    """Start serve, publish ``runs`` x ``count`` messages, stop it; the figures."""
    data = tempfile.mkdtemp(prefix="sharedsub-gc-cost-")
    topics = [f"gc{i}" for i in range(runs)]
    for topic in topics:
        subprocess.run([str(SHAREDSUB), "topics", "create", "--data-dir", data, topic], check=True, capture_output=True)
    out = os.path.join(data, "gc.json")
    env = dict(os.environ, GC_COST_OUT=out, SHAREDSUB_SERVER_GC_TUNING="true" if tuning else "false")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (hook_dir, env.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen([str(SHAREDSUB), "serve", "--data-dir", data, "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)
    rates = []
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[2]
        for topic in topics:
            res = rhea_workloads.publish_throughput(url, topic, warmup=2000, count=count,
                                                    cpu_probe=lambda: procstat.process_cpu_seconds(proc.pid))
            cpu = res.get("broker_cpu_s")
            per_msg = round(cpu / count * 1e6, 1) if cpu else None
            rates.append({"msgs_per_s": round(res["msgs_per_s"] or 0), "cpu_us_per_msg": per_msg})
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    time.sleep(0.2)
    spent = json.loads(Path(out).read_text()) if os.path.exists(out) else {}
    return {"gc_tuning": tuning, "runs": rates, "gc_collections_and_seconds": spent}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--runs", type=int, default=4, help="publish runs per serve (default 4)")
    p.add_argument("--count", type=int, default=200_000, help="messages per run (default 200000)")
    p.add_argument("--rounds", type=int, default=2, help="serves per setting, alternating (default 2)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as hook_dir:
        Path(hook_dir, "sitecustomize.py").write_text(_HOOK)
        for _ in range(args.rounds):
            for tuning in (True, False):
                print(json.dumps(one_serve(tuning, args.runs, args.count, hook_dir)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
