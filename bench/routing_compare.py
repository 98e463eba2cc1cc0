"""Routing on the driver vs on Spark's executors, side by side, and a model of N executors (issue 29).

    .venv/bin/python bench/routing_compare.py [--subs 1,100,1000] [--counts 100000,100000,30000]
        [--catchup 1000000] [--catchup-subs 100] [--modes driver,exec1,exec2] [--size 1024]
        [--commit-tables 60] [--commit-rounds 10] [--out FILE.jsonl]

Everything measured runs on this host; the figures of more executors are modelled (below).

1. **Throughput** (bench/fanout_bench.py ``routing_throughput``: a topic pre-loaded straight into
   Delta, N selector subscriptions, the fan-out job once with available-now in its own process,
   published msg/s from the first micro-batch with rows to the end of the last) for each mode:

   - ``driver``: ``[fanout] routing = "driver"`` on ``local[2]`` (the driver reads and routes);
   - ``exec1`` / ``exec2``: ``routing = "executors"`` on ``local-cluster[1,1,768]`` /
     ``local-cluster[2,1,768]`` (one / two executor JVMs of one core, ``spark.executor.memory=512m``,
     ``SPARK_LOCAL_IP=127.0.0.1``).

   For each of ``--subs`` (with the matching entry of ``--counts`` messages) and the catch-up
   (``--catchup`` messages, ``--catchup-subs`` subscriptions). Each topic is pre-loaded once and
   copied for each mode. Micro-batches hold ``--batch-commits`` topic commits (catch-up:
   ``--catchup-batch-commits``), so each run has several. **Warm-up**: in the executor modes
   the job runs one trivial ``mapInArrow`` job (two tasks per core, importing pyarrow, deltalake
   and the routing code) after the session is up and before the query starts (``warmup_s``);
   that alone does not make the first routing batch warm (it measured seconds more than the
   next ones: the routing job's own workers and the plan's compilation), so in every mode the
   first micro-batch with rows is left out of the timing too and reported on its own
   (``first_rows_batch_s``); msg/s are the timed batches' messages over their time.
2. **CPU seconds per routed message**: user + system CPU of the job's whole process tree (its
   Python, the driver JVM, executor JVMs and their Python workers; bench/fanout_bench.py
   ``TreeCpu``, /proc sampled every 0.25 s) over the routing window, divided by the messages.
3. **Fixed cost per batch**: ``--fixed-batches`` batches of ``--fixed-rows`` messages each (one
   topic commit per batch, ``max_commits_per_batch = 1``) to 10 subscriptions: the median batch
   seconds in each mode; with the driver's routing cost per (row × subscription) taken from the
   runs above (the largest work), the batch work above which N executors finish a batch sooner
   than the driver: ``W* = (F_exec − F_driver) / (c_driver − c_exec1 / N)`` (c_exec1: one
   executor's cost per unit of work, F: fixed costs). That is how ``[fanout] executor_min_work``
   is chosen; the run prints it for N = 2 (modelled from one executor, and measured with two).
4. **Cd**, the driver's commit rate of executor-written files: ``--commit-tables`` subscription
   tables, each round one Parquet file per table written (untimed, as the executors do), then
   all tables committed through ``TableCommits.commit_files`` (``FanoutSink.commits``) by 4 threads as the sink does
   (timed): table-commits/s, on a local dir and on a local S3 server (versitygw, tests/s3_server.py).
5. **Model**: N executors route at ``min(N × r1, Cd × B / T)`` published msg/s, where r1 is one
   executor's measured rate, B the messages per batch and T the subscription tables a batch
   touches (each needs one driver commit per batch); the driver's commits become the bound at
   ``N* = Cd × B / (T × r1)``. It assumes executors of real cores each (the 2-core host gives
   two at most, shared with the driver) and a driver whose commits do not slow with N.

One JSON line per measurement goes to ``--out`` (default bench/out/routing-compare-<time>.jsonl, as bench/run.py)
and a summary to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

import fanout_bench  # noqa: E402
import pyarrow as pa  # noqa: E402

from jobs.fanout_sink import DEFAULT_COMMIT_THREADS, FanoutSink  # noqa: E402
from sharedsub.core import layout  # noqa: E402
from sharedsub.storage import schemas  # noqa: E402
from sharedsub.storage.delta.data_files import write_data_file  # noqa: E402
from sharedsub.storage.objects import locations  # noqa: E402
from tests.s3_server import S3Server  # noqa: E402

EXECUTOR_CONF = ["--conf", "spark.executor.memory=512m", "--warmup"]
MODES: dict[str, tuple[str, dict[str, str], list[str]]] = {
    # name: (what it is, environment of the job, its extra arguments)
    "driver": ("driver routing, local[2]",
               {"SHAREDSUB_FANOUT_ROUTING": "driver", "SHAREDSUB_FANOUT_SPARK_MASTER": "local[2]"}, []),
    "exec1": ("executor routing, local-cluster[1,1,768]",
              {"SHAREDSUB_FANOUT_ROUTING": "executors", "SHAREDSUB_FANOUT_SPARK_MASTER": "local-cluster[1,1,768]",
               "SPARK_LOCAL_IP": "127.0.0.1"}, EXECUTOR_CONF),
    "exec2": ("executor routing, local-cluster[2,1,768]",
              {"SHAREDSUB_FANOUT_ROUTING": "executors", "SHAREDSUB_FANOUT_SPARK_MASTER": "local-cluster[2,1,768]",
               "SPARK_LOCAL_IP": "127.0.0.1"}, EXECUTOR_CONF),
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cost_per_work(res: dict[str, Any], fixed_s: float = 0.0) -> float | None:
    """Seconds per unit of work (row × route) of a run's batches with rows, their fixed cost taken off."""
    work, secs = res.get("batch_work"), res.get("batch_s")
    if not work or not secs:
        return None
    timed = [s for s, w in zip(secs[len(secs) - len(work):], work, strict=True) if w]
    total = sum(w for w in work if w)
    return max(0.0, sum(timed) - fixed_s * len(timed)) / total if total else None


def commit_rate(root: str, tables: int, rounds: int, rows: int) -> dict[str, Any]:
    """Cd: table-commits/s of executor-written files committed by the sink's commit threads."""
    sink = FanoutSink(root)
    names = [layout.join(root, f"bench-commit/t{i}") for i in range(tables)]
    seq = 0

    def files_round() -> list[list[Any]]:
        nonlocal seq
        out = []
        for name in names:
            data = {f.name: pa.nulls(rows, f.type) for f in schemas.SUBSCRIPTION}
            data["seq"] = pa.array(range(seq, seq + rows), pa.int64())
            out.append([write_data_file(name, pa.table(data, schema=schemas.SUBSCRIPTION).cast(schemas.SUBSCRIPTION))])
            seq += rows
        return out

    try:
        with ThreadPoolExecutor(DEFAULT_COMMIT_THREADS) as pool:
            first = files_round()  # creates each table (its first commit sets the schema): untimed
            list(pool.map(sink.commits.commit_files, names, first))  # the sink's own commit
            timed = 0.0
            for _ in range(rounds):
                batch = files_round()
                t0 = time.perf_counter()
                list(pool.map(sink.commits.commit_files, names, batch))
                timed += time.perf_counter() - t0
    finally:
        sink.close()
    return {"tables": tables, "rounds": rounds, "rows_per_file": rows, "commit_threads": DEFAULT_COMMIT_THREADS,
            "seconds": timed, "table_commits_per_s": tables * rounds / timed}


def fmt(x: float | None, spec: str = ",.0f") -> str:
    return "—" if x is None else format(x, spec)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--subs", default="1,100,1000")
    p.add_argument("--counts", default="100000,100000,30000", help="messages for each of --subs")
    p.add_argument("--catchup", type=int, default=1_000_000, help="catch-up messages (0: none)")
    p.add_argument("--catchup-subs", type=int, default=100)
    p.add_argument("--modes", default="driver,exec1,exec2")
    p.add_argument("--size", type=int, default=1024, help="message body bytes")
    p.add_argument("--commit-size", type=int, default=1000, help="messages per pre-loaded topic commit")
    p.add_argument("--batch-commits", type=int, default=10, help="max_commits_per_batch of the --subs runs")
    p.add_argument("--catchup-batch-commits", type=int, default=100, help="max_commits_per_batch of the catch-up")
    p.add_argument("--fixed-batches", type=int, default=20)
    p.add_argument("--fixed-rows", type=int, default=10)
    p.add_argument("--commit-tables", type=int, default=60)
    p.add_argument("--commit-rounds", type=int, default=10)
    p.add_argument("--commit-stores", default="local,s3")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per fan-out job run")
    p.add_argument("--out")
    args = p.parse_args(argv)
    subs = [int(x) for x in args.subs.split(",") if x]
    counts = [int(x) for x in args.counts.split(",") if x]
    if len(counts) != len(subs):
        p.error("--counts needs one entry per --subs entry")
    modes = [m for m in args.modes.split(",") if m]
    out_path = args.out or os.path.join(HERE, "out", f"routing-compare-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    logs = tempfile.mkdtemp(prefix="sharedsub-routing-compare-logs-")
    records: list[dict[str, Any]] = []

    def emit(rec: dict[str, Any]) -> None:
        records.append(rec)
        with open(out_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")

    batch_env = {"SHAREDSUB_FANOUT_MAX_COMMITS_PER_BATCH": str(args.batch_commits)}
    workloads = [(f"N={n}", n, m, args.commit_size, batch_env) for n, m in zip(subs, counts, strict=True)]
    if args.catchup:
        workloads.append((f"catch-up N={args.catchup_subs}", args.catchup_subs, args.catchup, args.commit_size,
                          {"SHAREDSUB_FANOUT_MAX_COMMITS_PER_BATCH": str(args.catchup_batch_commits)}))
    workloads.append(("fixed", 10, args.fixed_batches * args.fixed_rows, args.fixed_rows,
                      {"SHAREDSUB_FANOUT_MAX_COMMITS_PER_BATCH": "1"}))
    results: dict[tuple[str, str], dict[str, Any]] = {}
    started = time.perf_counter()
    for name, n, m, per_commit, env in workloads:
        template = tempfile.mkdtemp(prefix="sharedsub-routing-template-")
        try:
            t0 = time.perf_counter()
            fanout_bench.preload(template, m, args.size, per_commit)
            log(f"{name}: {m} messages pre-loaded in {time.perf_counter() - t0:.1f} s")
            for mode in modes:
                what, mode_env, job_args = MODES[mode]
                res = fanout_bench.routing_throughput(
                    n, m, args.size, per_commit, args.timeout, os.path.join(logs, f"{mode}-{name.replace(' ', '_')}.log"),
                    log, env={**mode_env, **env}, job_args=job_args, template=template, skip_first=True,
                )
                res.update({"bench": "routing_compare", "workload": name, "mode": mode, "mode_is": what, "subscriptions": n})
                results[(name, mode)] = res
                emit(res)
                log(f"{name} {mode}: {fmt(res.get('msgs_routed_per_s'))} msg/s, "
                    f"cpu {fmt(res.get('cpu_s_per_msg') and res['cpu_s_per_msg'] * 1e6, ',.1f')} µs/msg, "
                    f"first batch with rows {fmt(res.get('first_rows_batch_s'), '.2f')} s (untimed), "
                    f"placed {res.get('placed')}, as expected {res.get('routed_as_expected')}")
        finally:
            shutil.rmtree(template, ignore_errors=True)

    cd: dict[str, dict[str, Any]] = {}
    for store in [s for s in args.commit_stores.split(",") if s]:
        with tempfile.TemporaryDirectory(prefix="sharedsub-commit-rate-") as tmp:
            server = None
            try:
                if store == "s3":
                    server = S3Server(Path(tmp) / "buckets", Path(tmp) / "versitygw.log").start()
                    root = server.url("data")
                    locations.register(root, server.env())
                else:
                    root = os.path.join(tmp, "data")
                    os.makedirs(root)
                cd[store] = commit_rate(root, args.commit_tables, args.commit_rounds, 100)
            finally:
                if server is not None:
                    server.stop()
        emit({"bench": "routing_commit_rate", "store": store, **cd[store]})
        log(f"Cd on {store}: {cd[store]['table_commits_per_s']:.1f} table-commits/s ({args.commit_tables} tables)")

    summarize(results, cd, modes, workloads, print)
    log(f"done in {time.perf_counter() - started:.0f} s; records in {out_path}; job logs in {logs}")
    return 0


def summarize(results: dict[tuple[str, str], dict[str, Any]], cd: dict[str, dict[str, Any]], modes: list[str],
              workloads: list[tuple[str, int, int, int, dict[str, str]]], out: Callable[[str], None]) -> None:
    """Print the side-by-side table, the executor threshold and the model."""
    out("\nrouting throughput, published msg/s (CPU µs per message, all processes)")
    out(f"{'workload':<22}{'messages':>10}  " + "".join(f"{MODES[m][1]['SHAREDSUB_FANOUT_SPARK_MASTER']:>28}" for m in modes))
    for name, _n, m, _pc, _env in workloads:
        cells = []
        for mode in modes:
            r = results.get((name, mode), {})
            cpu = r.get("cpu_s_per_msg")
            cells.append(f"{fmt(r.get('msgs_routed_per_s'))} ({fmt(cpu and cpu * 1e6, ',.0f')} µs)".rjust(28))
        out(f"{name:<22}{m:>10,}  " + "".join(cells))
    for name, *_ in workloads:
        out(f"{name}: warm-up job s / first batch with rows s (both untimed): " + ", ".join(
            f"{m} {fmt(results.get((name, m), {}).get('warmup_s'), '.1f')} / "
            f"{fmt(results.get((name, m), {}).get('first_rows_batch_s'), '.2f')}" for m in modes))

    fixed = {m: statistics.median(r["batch_s"][-len(r["batch_work"]):]) for m in modes
             if (r := results.get(("fixed", m))) and r.get("batch_work")}
    out(f"fixed cost per small batch (median s): {fixed}")
    # c: seconds per unit of work, from the run of the largest work per batch (routing dominates).
    big = [w[0] for w in workloads if w[0] != "fixed"]
    def c_of(mode: str) -> float | None:
        best = max((results.get((w, mode), {}) for w in big), key=lambda r: max(r.get("batch_work") or [0]), default={})
        return cost_per_work(best, fixed.get(mode, 0.0)) if best else None
    c = {m: c_of(m) for m in modes}
    out("routing cost per (row × subscription), ns: " + ", ".join(f"{m} {fmt(v and v * 1e9, ',.1f')}" for m, v in c.items()))
    cd_ = c.get("driver")
    if cd_ and "driver" in fixed:
        for label, mode, n_exec in (("modelled from 1 executor, N=2", "exec1", 2), ("measured, 2 executors", "exec2", 1)):
            ce, fe = c.get(mode), fixed.get(mode)
            if ce is None or fe is None:
                continue
            gain = cd_ - ce / n_exec
            if gain <= 0:
                out(f"executor_min_work ({label}): never (executors cost {ce * 1e9 / n_exec:.1f} ns per unit "
                    f"≥ driver {cd_ * 1e9:.1f})")
            else:
                out(f"executor_min_work ({label}): {(fe - fixed['driver']) / gain:,.0f} rows × routes per batch")

    r1 = None
    for name in big:
        r = results.get((name, "exec1"))
        if r and r.get("msgs_routed_per_s") and name.startswith("catch-up"):
            r1 = (r["msgs_routed_per_s"], r["subscriptions"], r["messages"] / max(1, r["micro_batches_with_rows"]))
    if r1 is None:
        return
    rate1, tables, per_batch = r1
    out(f"\nmodel (1 executor measured: {rate1:,.0f} msg/s, {tables} tables, {per_batch:,.0f} messages per batch)")
    for store, c_ in cd.items():
        bound = c_["table_commits_per_s"] * per_batch / tables
        n_star = bound / rate1
        out(f"  Cd on {store} = {c_['table_commits_per_s']:,.1f} table-commits/s: commit bound {bound:,.0f} msg/s, "
            f"reached at N* = {n_star:,.1f} executors")
        out("    " + ", ".join(f"N={n}: {min(n * rate1, bound):,.0f}" for n in (1, 2, 4, 8, 16, 32, 64)))


if __name__ == "__main__":
    sys.exit(main())
