"""The many-subscriptions scenario of bench/run.py (``--only many-subs``, issue 41): many JMS
unshared durable subscriptions with selectors on one topic, against a started broker.

The shape (the rhea client's ``many_subs`` workload, bench/rhea_client.js, runs it):

* N subscriptions as Qpid JMS ``createDurableSubscriber(topic, "sub-<i>", "k = <i % 100>", false)``
  makes them: receiver link ``sub-<i>``, source {address, durable unsettled-state, expiry
  never, capabilities [topic], the selector as ``apache.org:selector-filter:string``}, on
  connections whose container id is the JMS ClientID :data:`CONTAINER_ID` (no
  ``sole-connection-for-container``: several connections share it), ceil(N / 500) of them.
  All attaches are sent at once. Subscriptions i < C (the consumers) stay attached with
  ``prefetch`` credit topped up per message; the others are detached (not closed: a durable
  subscription stays) as soon as their attach is answered;
* then M messages n = 0..M-1, 1 KB durable, application properties ``k = n % 100`` (int) and
  ``bench_seq = n`` (long), from one connection, unsettled, at most ``window`` unaccepted;
* every delivery is accepted by the receiver. A consumer i expects the messages with
  ``k = i % 100``; expected deliveries are the sum over the consumers (M × C / 100 when C is a
  multiple of 100).

Measured (one ``many_subs`` line per broker and N): attach rate (N ÷ the subscriber connections
opened and the first attach sent → the last attach answered, the detaches of the consumer-less
ones included), publish msg/s (first send →
last accepted), deliveries/s (expected deliveries ÷ first send → last expected delivery in, also
given in seconds), correctness (deliveries, duplicates: a bench_seq twice on one receiver not
marked redelivered; redelivered ones; wrong: k not the receiver's selector's; missing: expected
but not in by the end or the time limit; receivers short), broker CPU over the attaches and
from the first send to the run's end (the later of the last accepted and the last expected
delivery; none when the run timed out), broker RSS at the end. One ``many_subs_footprint``
line: broker RSS before the attaches, after them and after the idle span; RSS per subscription
((after the attaches − before) ÷ N; for sharedsub by part: serve's own process, the fan-out's
process tree, its JVM); broker CPU over ``idle_s`` seconds with every subscription made and no
traffic, per subscription.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import procstat
import rhea_workloads
from artemis_peer import ArtemisPeer
from sharedsub_service import SharedSubService

CONTAINER_ID = "bench-many-subs"  # the JMS ClientID of the subscriber connections
LABEL = "many"  # the topic: sharedsub bench-many, Artemis bench.many
MODULO = 100  # k = n % MODULO; subscription i selects k = i % MODULO

Broker = SharedSubService | ArtemisPeer


@dataclasses.dataclass(frozen=True, slots=True)
class Shape:
    """One run of the scenario."""

    subscriptions: int
    consumers: int
    count: int
    size: int
    window: int
    prefetch: int
    links_per_connection: int
    idle_s: float
    timeout_s: float  # the attaches; then publishing and delivering, each


def consumers_for(subscriptions: int, asked: int | None) -> int:
    """Subscriptions with a consumer: ``asked`` (at most N), else all of them up to 1,000
    subscriptions and 1,000 above (issue 41: 10,000 subscriptions, 1,000 consumed)."""
    if asked is not None:
        return min(asked, subscriptions)
    return subscriptions if subscriptions <= 1000 else 1000


def expected_deliveries(count: int, consumers: int, modulo: int = MODULO) -> int:
    """Deliveries the consumers 0..C-1 expect of messages 0..M-1 (consumer i: k = i % modulo)."""
    per_key = [len(range(r, count, modulo)) for r in range(modulo)]
    return sum(per_key[i % modulo] for i in range(consumers))


def _rss(t: Broker) -> dict[str, int | None]:
    """Resident bytes of the broker: by part for sharedsub, the JVM's tree for Artemis."""
    if isinstance(t, SharedSubService):
        return t.rss_parts()
    return {"total": t.rss_bytes()}


def _per_sub(after: dict[str, int | None], before: dict[str, int | None], n: int) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for part, value in after.items():
        was = before.get(part)
        out[part] = (value - was) / n if value is not None and was is not None and n else None
    return out


def run(t: Broker, address: str, shape: Shape, log: Callable[[str], None]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the scenario on the started broker ``t`` with topic ``address``; return the
    ``many_subs`` and ``many_subs_footprint`` lines' figures (without bench and broker)."""
    n = shape.subscriptions
    rss_before = _rss(t)
    cpu = t.cpu_probe()  # the broker's processes as they are now (sharedsub: serve and its Spark JVM)
    idle: dict[str, Any] = {}
    by_command = t.cpu_by_command()

    def on_attached() -> None:
        idle["rss_after_attach"] = _rss(t)
        log(f"{t.name} many-subs N={n}: {n} subscriptions made; {shape.idle_s:.0f} s idle")
        idle_by_command = t.cpu_by_command()
        c0, t0 = cpu(), time.perf_counter()
        time.sleep(shape.idle_s)
        c1, t1 = cpu(), time.perf_counter()
        idle["idle_s"] = round(t1 - t0, 2)
        idle["idle_cpu_s"] = c1 - c0 if c0 is not None and c1 is not None else None
        idle["idle_cpu_s_by_command"] = procstat.cpu_by_command_delta(idle_by_command, t.cpu_by_command())
        idle["rss_after_idle"] = _rss(t)

    res = rhea_workloads.many_subs(
        t.url, address, subscriptions=n, consumers=shape.consumers, count=shape.count, container_id=CONTAINER_ID,
        modulo=MODULO, links_per_connection=shape.links_per_connection, prefetch=shape.prefetch,
        window=shape.window, size=shape.size, attach_timeout_s=shape.timeout_s, timeout_s=shape.timeout_s,
        cpu_probe=cpu, on_attached=on_attached,
    )
    rss_end = _rss(t)
    # Which of the broker's processes did the work (sharedsub: front end vs Spark JVM and workers),
    # over the whole workload (attaches, the idle span, publishing, delivering).
    whole = procstat.cpu_by_command_delta(by_command, t.cpu_by_command())
    faults = sum(res.get(k) or 0 for k in ("missing", "duplicates", "wrong", "not_accepted", "attaches_refused",
                                           "unexpected_detaches"))
    line = {
        "subscribers": n, "consumers": shape.consumers, "count": shape.count, "size": shape.size,
        "window": shape.window, "prefetch": shape.prefetch, "container_id": CONTAINER_ID, "address": address,
        **{k: v for k, v in res.items() if k not in ("subscriptions", "consumers", "count")},
        # Every expected delivery in once, nothing else: 0. The table shows it as "ok".
        "faults": faults,
        "broker_cpu_s_per_1k_deliveries": (res["broker_cpu_s"] / res["expected_deliveries"] * 1000
                                           if res.get("broker_cpu_s") is not None and res["expected_deliveries"]
                                           else None),
        "broker_rss_bytes": rss_end.get("total"), "broker_rss_mib": _mib(rss_end.get("total")),
        "broker_rss_bytes_by_part": rss_end, "broker_cpu_s_by_command_whole_workload": whole,
    }
    after = idle.get("rss_after_attach")
    idle_cpu = idle.get("idle_cpu_s")
    footprint: dict[str, Any] = {
        "subscribers": n, "consumers": shape.consumers, "rss_before": rss_before, "rss_after_attach": after,
        "rss_after_idle": idle.get("rss_after_idle"), "idle_s": idle.get("idle_s"), "idle_cpu_s": idle_cpu,
        "idle_cpu_s_by_command": idle.get("idle_cpu_s_by_command"),
        "idle_cpu_s_per_sub": idle_cpu / n if idle_cpu is not None else None,
        "idle_cpu_s_per_1k_subs": idle_cpu / n * 1000 if idle_cpu is not None else None,
    }
    if after is not None:
        per_sub = _per_sub(after, rss_before, n)
        footprint["rss_per_sub_bytes"] = per_sub
        for part, value in per_sub.items():  # flat KiB figures for the table
            footprint[f"rss_per_sub_kib_{part}"] = value / 1024 if value is not None else None
    return line, footprint


def _mib(value: int | None) -> float | None:
    return value / 2**20 if value is not None else None


def correctness(line: dict[str, Any]) -> str:
    """One sentence on what arrived, loud when anything was lost, duplicated or wrong."""
    text = (f"{line.get('distinct_deliveries')} of {line.get('expected_deliveries')} expected deliveries in "
            f"({line.get('deliveries')} deliveries, all accepted by the receivers: {line.get('deliveries_accepted')}); "
            f"missing {line.get('missing')}, duplicates {line.get('duplicates')}, redelivered "
            f"{line.get('redelivered')}, wrong {line.get('wrong')}; per consumer "
            f"{line.get('per_consumer_min')}–{line.get('per_consumer_max')}")
    if line.get("faults"):
        text = f"!!! LOSS, DUPLICATES OR WRONG DELIVERIES: {text}"
    return text
