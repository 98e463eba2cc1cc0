"""What TLS (and SASL) cost publishing: one ``sharedsub serve``, plain amqp and amqps, interleaved.

    .venv/bin/python bench/tls_cost.py [--rounds 6] [--warmup-rounds 1] [--count 10000] [--warmup 1000]
                                       [--modes amqp-anonymous,amqp-plain,amqps-plain] [--connects 200]

One ``sharedsub serve`` (with its fan-out job) on a fresh data dir, with one user in its users
file (``sharedsub users add --password-stdin``), an amqps listener on a free port
(``[security] tls_port``, a throwaway CA and an RSA-2048 server certificate made now with the
openssl CLI, tests/tls_certs.py) and ``[security] anonymous = "true"`` so that anonymous and
password clients share the same listeners. The bench's own publisher (workloads.publish_throughput:
python-qpid-proton, 1 KB durable messages, at most ``--window`` unaccepted) publishes one round
per mode in turn (amqp-anonymous, amqp-plain, amqps-plain, then again, the order rotated each
cycle), each round on a fresh connection: ``--warmup`` messages not timed, then ``--count``
timed. The first ``--warmup-rounds`` cycles are discarded. Per mode: msg/s of each round, the
median, and the broker's CPU seconds per 1,000 messages (serve's process alone, over the timed
part; and serve with its Spark JVM, over the whole round).

python-qpid-proton's client has no SCRAM (no Cyrus SASL in the wheel), so password publishing
uses PLAIN; after the SASL outcome the bytes of a connection are the same whatever mechanism
authenticated it. SCRAM-SHA-256 is timed where it differs, at connection set-up: ``--connects``
connections per mode (bench/connect_probe.py: TCP, TLS handshake, SASL, AMQP open), in blocks
of ``--block``, modes interleaved, with serve's CPU per connection.

Prints two markdown tables and the command; one JSON line per round, per connect block and a
summary go to bench/out/tls-cost-<UTC>.jsonl.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import procstat
import report
import workloads
from connect_probe import Target, client_tls, connect_once
from proton import SSLDomain
from sharedsub_service import SharedSubService, sharedsub_executable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from tests.tls_certs import Certs, make_certs  # noqa: E402  (openssl CLI; shared with the TLS tests)

TOPIC = "tls-cost"
USER, PASSWORD = "bench", "bench-password-1"
# mode -> (over TLS, SASL mechanism)
PUBLISH_MODES = {"amqp-anonymous": (False, "ANONYMOUS"), "amqp-plain": (False, "PLAIN"), "amqps-plain": (True, "PLAIN")}
CONNECT_MODES = {
    "amqp-anonymous": (False, "ANONYMOUS"),
    "amqp-plain": (False, "PLAIN"),
    "amqp-scram-sha-256": (False, "SCRAM-SHA-256"),
    "amqps-plain": (True, "PLAIN"),
    "amqps-scram-sha-256": (True, "SCRAM-SHA-256"),
}


def start_service(certs: Certs, log_path: str) -> SharedSubService:
    """serve with a user, an amqps listener and anonymous clients allowed; the topic created."""
    env = {
        "SHAREDSUB_SECURITY_TLS_PORT": "0",
        "SHAREDSUB_SECURITY_TLS_CERT": str(certs.server_cert),
        "SHAREDSUB_SECURITY_TLS_KEY": str(certs.server_key),
        "SHAREDSUB_SECURITY_ANONYMOUS": "true",
    }
    svc = SharedSubService(log=lambda m: print(m, file=sys.stderr), log_path=log_path, env=env)
    svc.create_topics([TOPIC])
    subprocess.run(
        [sharedsub_executable(), "users", "add", USER, "--password-stdin", "--data-dir", svc.data_dir],
        input=PASSWORD + "\n", text=True, capture_output=True, check=True, timeout=120,
    )
    try:
        svc.start()
        if svc.tls_url is None:
            raise RuntimeError(f"serve printed no amqps URL in its ready line (amqp: {svc.url})")
    except BaseException:
        svc.__exit__(None, None, None)  # stop it and delete its data dir
        raise
    return svc


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def publish_options(svc: SharedSubService, certs: Certs, mode: str) -> tuple[str, dict[str, Any]]:
    """(URL, Container.connect options) of a publish mode."""
    tls, mechanism = PUBLISH_MODES[mode]
    options: dict[str, Any] = {"allowed_mechs": mechanism}
    if mechanism == "PLAIN":
        options |= {"user": USER, "password": PASSWORD, "allow_insecure_mechs": not tls}
    if not tls:
        return svc.url, options
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(str(certs.ca))
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    assert svc.tls_url is not None
    return f"amqps://localhost:{_port(svc.tls_url)}", options | {"ssl_domain": domain}


def publish_round(svc: SharedSubService, certs: Certs, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """One round of ``mode``; msg/s and CPU per 1,000 messages."""
    pid = svc.broker_pid()
    assert pid is not None
    others = procstat.other_busy_cores([pid], 1.0)  # also a pause for the previous round's commits
    tree = procstat.cpu_reader(pid)
    tree_before = tree()
    url, options = publish_options(svc, certs, mode)
    res = workloads.publish_throughput(
        url, TOPIC, warmup=args.warmup, count=args.count, window=args.window, size=args.size,
        timeout_s=args.timeout, cpu_probe=lambda: procstat.process_cpu_seconds(pid), connect_options=options,
    )
    tree_s = tree() - tree_before
    out = {"mode": mode, "other_busy_cores_before": round(others, 2)} | res
    if res.get("broker_cpu_s") is not None and res["measured_accepted"]:
        out["serve_cpu_s_per_1k"] = res["broker_cpu_s"] / res["measured_accepted"] * 1000
    if res["accepted"]:
        out["tree_cpu_s_per_1k"] = tree_s / res["accepted"] * 1000
    return out


def connect_block(svc: SharedSubService, certs: Certs, mode: str, n: int) -> dict[str, Any]:
    """``n`` connections of ``mode``; their set-up times and serve's CPU over the block."""
    tls, mechanism = CONNECT_MODES[mode]
    port = _port(svc.tls_url) if tls and svc.tls_url else _port(svc.url)
    target = Target("127.0.0.1", port, mechanism, USER, PASSWORD, client_tls(str(certs.ca)) if tls else None)
    pid = svc.broker_pid()
    assert pid is not None
    cpu_before = procstat.process_cpu_seconds(pid) or 0.0
    times = [connect_once(target) for _ in range(n)]
    cpu = (procstat.process_cpu_seconds(pid) or 0.0) - cpu_before
    return {"mode": mode, "connects": n, "setup_s": times, "serve_cpu_s": cpu}


def serve_idle_cpu(svc: SharedSubService, seconds: float) -> float:
    """serve's CPU seconds per second while no client is connected (its background threads):
    the floor under the per-connection CPU figures."""
    pid = svc.broker_pid()
    assert pid is not None
    before = procstat.process_cpu_seconds(pid) or 0.0
    time.sleep(seconds)
    return ((procstat.process_cpu_seconds(pid) or 0.0) - before) / seconds


def tls_session(svc: SharedSubService, certs: Certs) -> str:
    """Protocol and cipher the probe client negotiates with the amqps listener."""
    assert svc.tls_url is not None
    with socket.create_connection(("127.0.0.1", _port(svc.tls_url)), timeout=10) as raw:
        with client_tls(str(certs.ca)).wrap_socket(raw, server_hostname="localhost") as sock:
            return f"{sock.version()} {sock.cipher()[0]}"


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _median(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def summarise(rounds: list[dict[str, Any]], blocks: list[dict[str, Any]], modes: list[str]) -> dict[str, Any]:
    """Per publish mode: counted rounds' msg/s, medians; per connect mode: set-up time and CPU."""
    publish: dict[str, Any] = {}
    for mode in modes:
        kept = [r for r in rounds if r["mode"] == mode and not r["warmup_round"] and r["msgs_per_s"]]
        publish[mode] = {
            "msgs_per_s": [round(r["msgs_per_s"]) for r in kept],
            "median_msgs_per_s": _median(kept, "msgs_per_s"),
            "median_serve_cpu_s_per_1k": _median(kept, "serve_cpu_s_per_1k"),
            "median_tree_cpu_s_per_1k": _median(kept, "tree_cpu_s_per_1k"),
            "failed_rounds": sum(1 for r in rounds if r["mode"] == mode and (r["timed_out"] or r["error_count"])),
        }
    connect: dict[str, Any] = {}
    for mode in CONNECT_MODES:
        mine = [b for b in blocks if b["mode"] == mode]
        times = [t * 1000 for b in mine for t in b["setup_s"]]
        if times:
            connect[mode] = {
                "connects": len(times),
                "median_ms": statistics.median(times),
                "p90_ms": _quantile(times, 0.9),
                "serve_cpu_ms_per_connect": 1000 * sum(b["serve_cpu_s"] for b in mine) / len(times),
            }
    return {"publish": publish, "connect": connect}


def _num(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def print_tables(summary: dict[str, Any], baseline: str) -> None:
    """The publish table and, when connections were timed, the set-up table (markdown)."""
    base = summary["publish"].get(baseline, {}).get("median_msgs_per_s")
    print(f"| mode | msg/s per counted round | median msg/s | vs {baseline} | serve CPU s / 1,000 msgs"
          " | serve + JVM CPU s / 1,000 msgs |")
    print("| --- | --- | --- | --- | --- | --- |")
    for mode, p in summary["publish"].items():
        med = p["median_msgs_per_s"]
        ratio = f"{(med / base - 1) * 100:+.1f}%" if med and base else "n/a"
        per_round = ", ".join(f"{v:,}" for v in p["msgs_per_s"]) or "none counted"
        if p["failed_rounds"]:
            per_round += f" ({p['failed_rounds']} failed)"
        print(f"| {mode} | {per_round} | {_num(med, ',.0f')} | {ratio} | "
              f"{_num(p['median_serve_cpu_s_per_1k'], '.3f')} | {_num(p['median_tree_cpu_s_per_1k'], '.3f')} |")
    if summary["connect"]:
        print("\n| connection set-up (TCP + TLS + SASL + AMQP open) | connects | median ms | p90 ms"
              " | serve CPU ms per connect |")
        print("| --- | --- | --- | --- | --- |")
        for mode, c in summary["connect"].items():
            print(f"| {mode} | {c['connects']} | {c['median_ms']:.2f} | {c['p90_ms']:.2f} "
                  f"| {c['serve_cpu_ms_per_connect']:.2f} |")


def run(svc: SharedSubService, certs: Certs, args: argparse.Namespace, modes: list[str], out: Any) -> dict[str, Any]:
    """The publish rounds, then the connect blocks; every record also written to ``out``."""
    rounds: list[dict[str, Any]] = []
    for cycle in range(args.warmup_rounds + args.rounds):
        shift = cycle % len(modes)
        for mode in modes[shift:] + modes[:shift]:
            r = publish_round(svc, certs, mode, args) | {"cycle": cycle, "warmup_round": cycle < args.warmup_rounds}
            rounds.append(r)
            out.write(json.dumps({"bench": "tls_cost_round"} | r) + "\n")
            rate = _num(r["msgs_per_s"], ",.0f")
            print(f"cycle {cycle} {mode}: {rate} msg/s, errors {r['error_count']}", file=sys.stderr, flush=True)
    idle = serve_idle_cpu(svc, 5.0)
    blocks: list[dict[str, Any]] = []
    names = list(CONNECT_MODES)
    for b in range(-(-args.connects // args.block) if args.connects > 0 else 0):
        shift = b % len(names)
        for mode in names[shift:] + names[:shift]:
            block = connect_block(svc, certs, mode, min(args.block, args.connects - b * args.block))
            blocks.append(block)
            out.write(json.dumps({"bench": "tls_cost_connect"} | block) + "\n")
    return summarise(rounds, blocks, modes) | {"serve_idle_cpu_ms_per_s": round(idle * 1000, 2)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=6, help="counted rounds per mode (default 6)")
    p.add_argument("--warmup-rounds", type=int, default=1, help="cycles of rounds discarded first (default 1)")
    p.add_argument("--count", type=int, default=10000, help="timed messages per round (default 10000)")
    p.add_argument("--warmup", type=int, default=1000, help="untimed messages at the start of each round")
    p.add_argument("--window", type=int, default=1000)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--timeout", type=float, default=180.0, help="seconds allowed per round")
    p.add_argument("--modes", default=",".join(PUBLISH_MODES), help="publish modes, in cycle order")
    p.add_argument("--baseline", default="amqp-plain", help="the mode the others are compared with")
    p.add_argument("--connects", type=int, default=200, help="connections per connect mode (0: skip)")
    p.add_argument("--block", type=int, default=25, help="connections in a row of one mode")
    args = p.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in PUBLISH_MODES]
    if unknown:
        p.error(f"unknown modes {unknown}; known: {', '.join(PUBLISH_MODES)}")
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    os.makedirs(os.path.join(HERE, "out"), exist_ok=True)
    out_path = os.path.join(HERE, "out", f"tls-cost-{stamp}.jsonl")
    work = tempfile.mkdtemp(prefix="sharedsub-tls-cost-")
    certs = make_certs(Path(work) / "certs")
    started = time.perf_counter()
    serve_log = os.path.join(HERE, "out", f"tls-cost-serve-{stamp}.log")
    with open(out_path, "w", encoding="utf-8") as out, start_service(certs, serve_log) as svc:
        session = tls_session(svc, certs)
        print(f"serve ready: {svc.url} {svc.tls_url} ({session}); writing {out_path}", file=sys.stderr)
        summary = run(svc, certs, args, modes, out)
        meta = {
            "bench": "tls_cost_summary",
            "command": shlex.join(sys.orig_argv),
            "commit": report.describe_commit(os.path.dirname(HERE)),
            "machine": procstat.machine_info(),
            "tls": session,
            "settings": dict(vars(args)),
            "wall_s": round(time.perf_counter() - started, 1),
            "loadavg_1m_after": procstat.loadavg_1m(),
        }
        out.write(json.dumps(meta | summary) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    print_tables(summary, args.baseline)
    print(f"\ncommand: {meta['command']} (in {os.getcwd()}); commit {meta['commit']}; TLS {session}; "
          f"{meta['wall_s']} s; load average after {meta['loadavg_1m_after']:.2f}; serve idle "
          f"{summary['serve_idle_cpu_ms_per_s']} ms CPU per s; raw: {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
