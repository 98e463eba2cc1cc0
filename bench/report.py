"""Turn the benchmark's JSON lines into a markdown table and, on request, a RESULTS.md section.

Every figure in the table is computed here from the lines of one run; nothing is typed in.
Ratios are sharedsub ÷ peer (RabbitMQ, and Artemis when the run measured it) of the medians:
above 1 is better for throughput, worse for latency.
"""

from __future__ import annotations

import os
import statistics
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

SHAREDSUB, RABBITMQ, ARTEMIS = "sharedsub", "rabbitmq", "artemis"
FLOOR = "proton-floor"  # bench/proton_floor.py: in-memory broker on the same proton reactor, no work per message
NOFSYNC = "sharedsub-nofsync"  # sharedsub with [storage] fsync off (bench/run.py --brokers)
INTHREAD = "sharedsub-inthread"  # sharedsub with [storage] append_process off
S3 = "sharedsub-s3"  # sharedsub on an s3:// data dir on a local versitygw (bench/sharedsub_service.py)
# sharedsub variants: (column heading, ratio heading, what it is in the run's description)
VARIANTS = {
    NOFSYNC: ("sharedsub, fsync off", "fsync on ÷ off", "the same sharedsub with `[storage] fsync = false`"),
    INTHREAD: ("sharedsub, appends in-thread", "child process ÷ in-thread",
               "the same sharedsub with `[storage] append_process = false`"),
    S3: ("sharedsub on S3 (local versitygw)", "s3 ÷ local",
         "the same sharedsub on an `s3://` data dir, a bucket of versitygw v1.8.0 (tests/s3_server.py) over "
         "this machine's disk on 127.0.0.1 (loopback: no network latency, a real S3 adds 10–30 ms per PUT; "
         "versitygw does not fsync, the local data dir does)"),
}
# Variants whose ratio is variant ÷ default (what the variant costs), not default ÷ variant.
VARIANT_OVER_DEFAULT = (S3,)


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the summary table: which lines and which field, and how to show it."""

    label: str
    bench: str
    field: str
    unit: str  # "msg/s", "ms", "x", "s", "n" (a count), "frac" or "faults" (0 shows as ok)
    better: str  # "higher", "lower" or ""
    subscribers: int | None = None
    sharedsub_only: bool = False  # a figure of sharedsub's own parts: "n/a" in the peers' columns


def _rate(lines: list[dict[str, Any]]) -> str:
    """The latency step's publish rate as the labels say it ("1k msg/s", "100 msg/s")."""
    rates = sorted({float(ln["rate"]) for ln in lines if ln.get("bench") == "latency" and "rate" in ln}) or [1000.0]
    return "/".join(f"{r / 1000:g}k msg/s" if r >= 1000 else f"{r:g} msg/s" for r in rates)


def _window(lines: list[dict[str, Any]]) -> str:
    """The publish step's window (unaccepted messages in flight) as its label says it: 1 is a
    publisher that waits for each outcome (a synchronous send)."""
    windows = sorted({int(ln["window"]) for ln in lines if ln.get("bench") == "publish" and "window" in ln}) or [1000]
    return "/".join(str(w) for w in windows)


def _rows(lines: list[dict[str, Any]]) -> list[Row]:
    rate = _rate(lines)
    rows = [
        Row(f"publish throughput, 1 KB durable, window {_window(lines)} (msg/s)", "publish", "msgs_per_s", "msg/s", "higher"),
        Row("  broker CPU s per 1,000 messages while publishing", "publish", "broker_cpu_s_per_1k_msgs", "x",
            "lower"),
        Row(f"end-to-end latency p50 at {rate} (ms)", "latency", "e2e_p50_ms", "ms", "lower"),
        Row(f"end-to-end latency p99 at {rate} (ms)", "latency", "e2e_p99_ms", "ms", "lower"),
        Row(f"publish→accepted p50 at {rate} (ms)", "latency", "accepted_p50_ms", "ms", "lower"),
        Row(f"publish→accepted p99 at {rate} (ms)", "latency", "accepted_p99_ms", "ms", "lower"),
    ]
    if any(ln.get("bench") == "latency" and ln.get("broker_cpu_s_per_1k_msgs") is not None for ln in lines):
        rows.append(Row(f"  broker CPU s per 1,000 messages published and delivered at {rate}", "latency",
                        "broker_cpu_s_per_1k_msgs", "x", "lower"))
    rows += _consume_rows(lines)
    amp = [ln for ln in lines if ln.get("bench") == "amplification" and "subscribers" in ln]
    subs = sorted({ln["subscribers"] for ln in amp})

    def k(n: int) -> str:
        return "/".join(sorted({str(ln["count"]) for ln in amp if ln["subscribers"] == n and "count" in ln})) or "?"

    for n in subs:
        rows.append(
            Row(f"data-dir bytes per published payload byte, {n} subscriber(s), K={k(n)}", "amplification",
                "bytes_per_payload_byte", "x", "lower", n)
        )
    for n in subs:
        rows.append(
            Row(f"  same, growth from serve ready to all delivered, {n} subscriber(s)", "amplification",
                "growth_per_payload_byte", "x", "lower", n)
        )
    rows += _fanout_rows(lines)
    rows += _many_subs_rows(lines)
    return rows


SHAREDSUB_ONLY = ("amplification", "fanout_throughput", "fanout_latency")
MANY_SUBS = ("many_subs", "many_subs_footprint")  # bench/many_subs.py: sharedsub and Artemis
# What each peer broker is measured on; other rows show "n/a" in its column.
PEER_BENCHES = {
    RABBITMQ: ("publish", "latency", "consume"),  # no JMS selectors, no Delta data dir
    ARTEMIS: ("publish", "latency", "consume", "fanout_latency", *MANY_SUBS),
    FLOOR: ("publish", "consume"),
}
# Optional peer columns: (broker, column heading, ratio heading), shown when the run measured it.
OPTIONAL_PEERS = (
    (ARTEMIS, "Artemis median (min–max)", "ratio sharedsub ÷ Artemis"),
    (FLOOR, "proton floor median (min–max)", "ratio sharedsub ÷ proton floor"),
)


def _consume_rows(lines: list[dict[str, Any]]) -> list[Row]:
    """Rows of the consume measurement, one group per consumer count."""
    con = [ln for ln in lines if ln.get("bench") == "consume" and "subscribers" in ln]
    rows = []
    for n in sorted({ln["subscribers"] for ln in con}):
        m = "/".join(sorted({str(ln["count"]) for ln in con if ln["subscribers"] == n and "count" in ln})) or "?"
        p = "/".join(sorted({str(ln["prefetch"]) for ln in con if ln["subscribers"] == n and "prefetch" in ln})) or "?"
        rows += [
            Row(f"consume throughput, {n} consumer(s) on one shared durable subscription (RabbitMQ: one "
                f"durable queue), acknowledged 1 KB, M={m}, prefetch {p} (msg/s)", "consume", "msgs_per_s", "msg/s",
                "higher", n),
            Row(f"  broker CPU s per 1,000 messages consumed, {n} consumer(s)", "consume",
                "broker_cpu_s_per_1k_msgs", "x", "lower", n),
            Row(f"  credit granted → first delivery, {n} consumer(s) (ms)", "consume",
                "attach_to_first_delivery_ms", "ms", "lower", n),
        ]
        if n > 1:
            rows.append(Row(f"  least busy consumer's share of the messages, {n} consumers (even = {1 / n:.3f})",
                            "consume", "min_consumer_share", "frac", "", n))
    return rows


def _fanout_rows(lines: list[dict[str, Any]]) -> list[Row]:
    rows = []
    thr = [ln for ln in lines if ln.get("bench") == "fanout_throughput" and "subscribers" in ln]
    for n in sorted({ln["subscribers"] for ln in thr}):
        m = "/".join(sorted({str(ln["messages"]) for ln in thr if ln["subscribers"] == n and "messages" in ln})) or "?"
        rows += [
            Row(f"fan-out routing, {n} selector subscription(s), M={m} (published msg/s routed)",
                "fanout_throughput", "msgs_routed_per_s", "msg/s", "higher", n),
            Row(f"  same, timed from the query's first (row-less) micro-batch, {n} subscription(s)",
                "fanout_throughput", "msgs_routed_per_s_from_first_batch", "msg/s", "higher", n),
            Row(f"  average selectivity, {n} subscription(s)", "fanout_throughput", "avg_selectivity", "frac", "", n),
            Row(f"  routed rows committed, {n} subscription(s)", "fanout_throughput", "rows_committed", "n", "", n),
            Row(f"  subscription-table commits, {n} subscription(s)", "fanout_throughput",
                "subscription_table_commits", "n", "", n),
        ]
    lat = [ln for ln in lines if ln.get("bench") == "fanout_latency" and "subscribers" in ln]
    for n in sorted({ln["subscribers"] for ln in lat}):
        # Lines written before the idle variant existed had matching selectors.
        if all(ln.get("selectors_matching", True) for ln in lat if ln["subscribers"] == n):
            what = f"{n} selector subscribers attached"
        else:
            what = f"{n} selector subscribers attached, none matching"
        rows += [
            Row(f"end-to-end latency p50 at 1k msg/s, {what} (ms)", "fanout_latency", "e2e_p50_ms", "ms", "lower", n),
            Row(f"end-to-end latency p99 at 1k msg/s, {what} (ms)", "fanout_latency", "e2e_p99_ms", "ms", "lower", n),
            Row(f"  publish→accepted p50, {what} (ms)", "fanout_latency", "accepted_p50_ms", "ms", "lower", n),
            Row(f"  broker CPU s per 1,000 messages published, {what}", "fanout_latency",
                "broker_cpu_s_per_1k_msgs", "x", "lower", n),
        ]
    return rows


def _many_subs_rows(lines: list[dict[str, Any]]) -> list[Row]:
    """Rows of the many-subs measurement (bench/many_subs.py), one group per subscription count."""
    ms = [ln for ln in lines if ln.get("bench") == "many_subs" and "subscribers" in ln]
    fp = [ln for ln in lines if ln.get("bench") == "many_subs_footprint" and "subscribers" in ln]
    rows = []
    for n in sorted({ln["subscribers"] for ln in ms + fp}):
        def field(key: str, n: int = n) -> str:
            return "/".join(sorted({str(ln[key]) for ln in ms + fp if ln["subscribers"] == n and key in ln})) or "?"

        c, m = field("consumers"), field("count")
        idle = "/".join(sorted({f"{ln['idle_s']:.0f}" for ln in fp if ln["subscribers"] == n and ln.get("idle_s")}))
        rows += [
            Row(f"{n:,} unshared durable subscriptions with selectors, {c} with a consumer: attach rate (subs/s)",
                "many_subs", "attach_per_s", "msg/s", "higher", n),
            Row(f"  publish 1 KB durable to their topic, M={m} (msg/s)", "many_subs", "publish_msgs_per_s", "msg/s",
                "higher", n),
            Row(f"  deliveries/s, first publish → every expected delivery in, {n:,} subscriptions", "many_subs",
                "deliveries_per_s", "msg/s", "higher", n),
            Row(f"  first publish → every delivery in, {n:,} subscriptions (s)", "many_subs", "deliver_s", "s",
                "lower", n),
            Row(f"  deliveries lost, duplicated or wrong, {n:,} subscriptions", "many_subs", "faults", "faults",
                "lower", n),
            Row(f"  broker CPU s, first publish → every delivery in, {n:,} subscriptions", "many_subs",
                "broker_cpu_s", "x", "lower", n),
            Row(f"  broker RSS at the end, {n:,} subscriptions (MiB)", "many_subs", "broker_rss_mib", "n", "lower", n),
            Row(f"  subscription tables at the end, {n:,} subscriptions", "many_subs", "subscription_tables", "n", "",
                n, sharedsub_only=True),
            Row(f"  broker RSS per subscription made, {n:,} subscriptions (KiB)", "many_subs_footprint",
                "rss_per_sub_kib_total", "x", "lower", n),
            Row(f"    of it serve's own process, {n:,} subscriptions (KiB)", "many_subs_footprint",
                "rss_per_sub_kib_serve", "x", "lower", n, sharedsub_only=True),
            Row(f"    of it the fan-out job's processes (Python driver, Spark JVM, workers), {n:,} subscriptions "
                "(KiB)", "many_subs_footprint", "rss_per_sub_kib_fanout", "x", "lower", n, sharedsub_only=True),
            Row(f"      of those the Spark JVM, {n:,} subscriptions (KiB)", "many_subs_footprint",
                "rss_per_sub_kib_fanout_jvm", "x", "lower", n, sharedsub_only=True),
            Row(f"  idle broker CPU s over {idle or '?'} s, {n:,} subscriptions made, no traffic",
                "many_subs_footprint", "idle_cpu_s", "x", "lower", n),
            Row(f"  same per 1,000 subscriptions, {n:,} made (CPU s)", "many_subs_footprint", "idle_cpu_s_per_1k_subs", "x",
                "lower", n),
        ]
    return rows


def _values(lines: Iterable[dict[str, Any]], row: Row, broker: str) -> tuple[list[float], int]:
    values, failed = [], 0
    for ln in lines:
        if ln.get("bench") != row.bench or ln.get("broker") != broker:
            continue
        if row.subscribers is not None and ln.get("subscribers") != row.subscribers:
            continue
        v = ln.get(row.field)
        if v is None or ln.get("error"):
            failed += 1
        else:
            values.append(float(v))
    return values, failed


def _fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "–"
    if unit in ("msg/s", "n"):
        return f"{v:,.0f}"
    if unit == "frac":
        return f"{v:.3f}"
    if unit == "faults":
        return "ok" if v == 0 else f"**{v:,.0f} LOST/DUPLICATED/WRONG**"
    if unit == "ms":
        return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:,.0f}"
    return f"{v:.2f}"


def _cell(values: list[float], failed: int, unit: str) -> str:
    if not values:
        return "failed" if failed else "–"
    med = statistics.median(values)
    text = _fmt(med, unit)
    if len(values) > 1:
        text += f" ({_fmt(min(values), unit)}–{_fmt(max(values), unit)})"
    if failed:
        text += f", {failed} failed"
    return text


def _ratio(ours: list[float], other: list[float]) -> str:
    if not (ours and other and statistics.median(other) > 0):
        return "–"
    r = statistics.median(ours) / statistics.median(other)
    return f"{r:,.0f}×" if r >= 100 else f"{r:.1f}×" if r >= 10 else f"{r:.2f}×"


def summary_table(lines: list[dict[str, Any]]) -> str:
    """Return the markdown table: medians (min–max over runs), and the ratio of the medians.

    When the run measured Artemis or the proton floor (:data:`OPTIONAL_PEERS`), two columns per
    peer show it and the ratio sharedsub ÷ it. When
    it measured a variant of sharedsub too (:data:`VARIANTS`: fsync off, appends in-thread, on
    S3), two more columns per variant show it and the ratio of the default to it (of it to the
    default for :data:`VARIANT_OVER_DEFAULT`: s3 ÷ local).
    """
    variants = [v for v in VARIANTS if any(ln.get("broker") == v for ln in lines)]
    peers = [RABBITMQ, *(b for b, _, _ in OPTIONAL_PEERS if any(ln.get("broker") == b for ln in lines))]
    head = "| measure | sharedsub median (min–max) | RabbitMQ median (min–max) | ratio sharedsub ÷ RabbitMQ |"
    rule = "| --- | --- | --- | --- |"
    for broker, column, ratio in OPTIONAL_PEERS:
        if broker in peers:
            head += f" {column} | {ratio} |"
            rule += " --- | --- |"
    head += " better |"
    rule += " --- |"
    for variant in variants:
        head += f" {VARIANTS[variant][0]} | {VARIANTS[variant][1]} |"
        rule += " --- | --- |"
    out = [head, rule]
    for row in _rows(lines):
        if not any(ln.get("bench") == row.bench for ln in lines):
            continue
        ours, ours_failed = _values(lines, row, SHAREDSUB)
        line = f"| {row.label} | {_cell(ours, ours_failed, row.unit)} |"
        for broker in peers:
            peer, peer_failed = _values(lines, row, broker)
            measured = row.bench in PEER_BENCHES[broker] and not row.sharedsub_only
            peer_cell = _cell(peer, peer_failed, row.unit) if measured else "n/a"
            line += f" {peer_cell} | {_ratio(ours, peer)} |"
        line += f" {row.better} |"
        for variant in variants:
            off, off_failed = _values(lines, row, variant)
            ratio = _ratio(off, ours) if variant in VARIANT_OVER_DEFAULT else _ratio(ours, off)
            line += f" {_cell(off, off_failed, row.unit)} | {ratio} |"
        out.append(line)
    return "\n".join(out)


def notes(lines: list[dict[str, Any]]) -> list[str]:
    """Return one sentence per line that did not measure cleanly (error, timeout, losses)."""
    out = []
    for ln in lines:
        where = f"{ln.get('broker')} {ln.get('bench')}" + (f" run {ln['run']}" if "run" in ln else "")
        if "subscribers" in ln:
            where += f" N={ln['subscribers']}"
        if ln.get("error"):
            out.append(f"{where}: error: {ln['error']}")
            continue
        if ln.get("timed_out"):
            out.append(f"{where}: hit its time limit; figures cover what completed before it")
        for key in ("missing_deliveries", "missing_accepts", "duplicates", "not_accepted", "missing", "redelivered",
                    "unacknowledged_after", "wrong", "attaches_refused", "unexpected_detaches"):
            if ln.get(key):
                out.append(f"{where}: {key} = {ln[key]}")
        if ln.get("credit_stalls"):
            out.append(f"{where}: the publisher fell behind its schedule at {ln['credit_stalls']} ticks "
                       "(no link credit, or the window of unaccepted messages was full)")
        if ln.get("missing_deliveries") or ln.get("missing_accepts"):
            out.append(f"{where}: undelivered messages count as slower than all others; a percentile "
                       "among them is shown as failed")
        if ln.get("machine_quiet_before") is False and ln.get("bench") != "amplification":
            out.append(f"{where}: other processes kept {ln.get('other_busy_cores_before')} cores busy just before")
        if ln.get("bench") == "fanout_latency" and ln.get("selector_subs_expected"):
            got, want = ln.get("selector_subs_received", 0), ln["selector_subs_expected"]
            if got < want:
                out.append(f"{where}: the selector subscribers had {got:,} of the {want:,} matching deliveries "
                           "by the end of the drain")
        if ln.get("bench") == "fanout_note":
            out.append(f"fanout: {ln['skipped']}")
        if ln.get("bench") == "many_subs_note":
            out.append(f"many-subs: {ln['skipped']}")
        if ln.get("bench") == "many_subs" and ln.get("faults"):
            out.append(f"{where}: LOSS, DUPLICATES OR WRONG DELIVERIES: {ln.get('missing')} missing, "
                       f"{ln.get('duplicates')} duplicated, {ln.get('wrong')} wrong of "
                       f"{ln.get('expected_deliveries')} expected")
        if ln.get("bench") == "fanout_throughput" and ln.get("routed_as_expected") is False:
            out.append(f"{where}: routed {ln.get('routed_rows')} rows, expected {ln.get('expected_routed_rows')}")
        if ln.get("bench") == "amplification" and ln.get("all_delivered") is False:
            out.append(f"{where}: not every subscriber received every message")
    return out


def _git(*args: str) -> str:
    try:
        proc = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout.strip()


def _range(values: list[float], fmt: str) -> str:
    if not values:
        return "–"
    return f"{min(values):{fmt}}–{max(values):{fmt}}"


def describe_commit(repo: str) -> str:
    """Return HEAD's short hash, noting uncommitted changes to tracked files."""
    commit = _git("-C", repo, "rev-parse", "--short", "HEAD") or "unknown"
    if _git("-C", repo, "status", "--porcelain", "--untracked-files=no"):
        commit += " (tracked files had uncommitted changes)"
    return commit


def results_section(lines: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """Return the RESULTS.md section for one run: date, machine, command, table, notes."""
    m = meta["machine"]
    measured = [ln for ln in lines
                if ln.get("bench") in ("publish", "latency", "consume", "amplification", *SHAREDSUB_ONLY, "many_subs")]
    loads = [ln["loadavg_1m_before"] for ln in measured if "loadavg_1m_before" in ln]
    others = [ln["other_busy_cores_before"] for ln in measured if "other_busy_cores_before" in ln]
    versions = {ln["broker"]: ln.get("version", "") for ln in lines if ln.get("bench") == "broker_start"}
    for ln in lines:  # an Artemis started only for the fan-out latency or many-subs records its version there
        if ln.get("bench") in ("fanout_latency", "many_subs") and ln.get("version"):
            versions.setdefault(ln["broker"], ln["version"])
    parts = [
        f"## {meta['started_utc']}",
        "",
        f"- command: `{meta['command']}` (in `{meta['cwd']}`), {meta['wall_s']:.0f} s wall",
        f"- commit: {meta['commit']}",
        f"- machine: {m['nproc']} cores ({m['cpu_model']}), {m['mem_total_gib']} GiB RAM, "
        f"Linux {m['kernel']}, Python {m['python']}",
        f"- brokers: sharedsub {versions.get(SHAREDSUB) or '(not started)'}; "
        f"RabbitMQ {versions.get(RABBITMQ) or '(not started)'} with rabbitmq_amqp1_0, classic durable queue"
        + (f"; Artemis {versions[ARTEMIS]}, multicast address with a JMS global shared durable subscription "
           "(bench/artemis_peer.py)" if versions.get(ARTEMIS) else "")
        + (f"; proton floor: {versions[FLOOR]} (bench/proton_floor.py: no decode, no storage)"
           if versions.get(FLOOR) else "")
        + "".join(f"; {v}: {VARIANTS[v][2]}" for v in VARIANTS if v in versions),
        f"- settings: {meta['settings']}",
        f"- before each measurement: load average (1 min) {_range(loads, '.2f')}, "
        f"cores kept busy by other processes {_range(others, '.2f')}",
        f"- raw lines: `{meta['out_path']}` (not committed)",
        "",
        summary_table(lines),
        "",
    ]
    parts += stage_tables(lines)
    n = notes(lines)
    if n:
        parts += ["Notes:", "", *[f"- {x}" for x in n], ""]
    return "\n".join(parts)


def stage_tables(lines: list[dict[str, Any]]) -> list[str]:
    """Where sharedsub's time went, per measurement and sharedsub broker: the ``stages`` lines
    (bench/run.py, from sharedsub_stage_seconds on /metrics over each step, warm-up included),
    the median over the runs of each stage's count, mean, p50 and p99."""
    out: list[str] = []
    groups: dict[tuple[str, str], list[list[dict[str, Any]]]] = {}
    for ln in lines:
        if ln.get("bench") == "stages" and ln.get("stages"):
            groups.setdefault((ln["broker"], ln["step"]), []).append(ln["stages"])
    for (broker, step), runs in groups.items():
        out += [f"Where {broker}'s time went in `{step}` (median of {len(runs)} runs, warm-up included):", "",
                "| stage | count | mean ms | p50 ms | p99 ms |", "| --- | ---: | ---: | ---: | ---: |"]
        order = list(dict.fromkeys(r["stage"] for run in runs for r in run))
        for stage in order:
            rows = [r for run in runs for r in run if r["stage"] == stage]
            med = {k: statistics.median(r[k] for r in rows) for k in ("count", "mean_ms", "p50_ms", "p99_ms")}
            out.append(f"| {stage} | {med['count']:,.0f} | {med['mean_ms']:.2f} | {med['p50_ms']:.2f} | {med['p99_ms']:.2f} |")
        out.append("")
    return out


RESULTS_HEADER = """# Benchmark results

Written by `bench/run.py --write-results`; each section is one invocation, newest last.
sharedsub and RabbitMQ 3.10 (Debian, AMQP 1.0 plugin) are measured in the same invocation on
the same machine, one after the other, with the same python-qpid-proton client code; compare
them through the ratio column, not across sections (the machines are shared and noisy).

Ratio = sharedsub median ÷ RabbitMQ median. For throughput higher is better, for latency and
bytes lower is better. RabbitMQ delivers to a waiting consumer before its disk write, sharedsub
only after its Delta commit and a Spark micro-batch, so the end-to-end rows do not compare
like for like. publish→accepted is the closer comparison, each broker answering by its own
durability rule (RabbitMQ: once the queue has written the message or a consumer has acked it).
"""


def write_results(path: str, lines: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    """Append this run's section to ``path``, creating the file with its header if needed."""
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", encoding="utf-8") as f:
        if new:
            f.write(RESULTS_HEADER)
        f.write("\n" + results_section(lines, meta))
