"""Human-readable text of the read-only CLI commands (tables, details); pure.

The CLI prints these when ``--json`` is not given. Tables have a header row and columns
separated by two spaces; numbers are right-aligned. Sizes are in bytes with a binary unit,
ages as ``1h02m``-style durations.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence

from sharedsub.core.fanout.explain import SelectorExplanation
from sharedsub.runtime.cluster.cluster_status import ClusterStatus, Member
from sharedsub.runtime.inspection import SubscriptionStatus
from sharedsub.storage.backlog import PartitionBacklog


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, right: Sequence[str] = ()) -> str:
    """Rows under headers, column-aligned; columns named in ``right`` are right-aligned."""
    cells = [[str(h) for h in headers]] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for r in cells:
        parts = [c.rjust(w) if h in right else c.ljust(w) for c, w, h in zip(r, widths, headers, strict=True)]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def size(n: int) -> str:
    """``n`` bytes for people: ``512 B``, ``1.5 KiB``, ``3.0 MiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def age(delta: dt.timedelta | None) -> str:
    """A duration for people: ``4.2s``, ``3m07s``, ``2h05m``, ``3d04h``; ``-`` for None."""
    if delta is None:
        return "-"
    s = max(delta.total_seconds(), 0.0)
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(int(s), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def _backlog_cell(status: SubscriptionStatus) -> str:
    # A non-durable subscription keeps no acks: its count is an upper bound.
    return str(status.messages) if status.exact_backlog else f"<={status.messages}"


def subscriptions_table(found: Sequence[SubscriptionStatus], now: dt.datetime | None = None) -> str:
    """``subscriptions list``: one row per subscription."""
    if not found:
        return "no subscriptions"
    rows = [
        (
            s.display_name,
            s.kind,
            s.record.topic if s.record.binding == "#" else f"{s.record.topic}/{s.record.binding}",
            s.record.generation,
            len(s.consumers),
            _backlog_cell(s),
            age(s.oldest_age(now)),
            "" if s.record.active else "deleted",
            s.key,
        )
        for s in found
    ]
    headers = ("NAME", "KIND", "SOURCE", "GEN", "CONSUMERS", "BACKLOG", "OLDEST", "STATE", "KEY")
    return table(headers, rows, right=("GEN", "CONSUMERS", "BACKLOG", "OLDEST"))


def backlog_table(found: Sequence[SubscriptionStatus], now: dt.datetime | None = None) -> str:
    """``backlog``: totals per subscription."""
    if not found:
        return "no subscriptions"
    rows = [
        (s.display_name, _backlog_cell(s), size(s.bytes), age(s.oldest_age(now)), len(s.partitions), s.routed, s.key)
        for s in found
    ]
    headers = ("NAME", "MESSAGES", "BYTES", "OLDEST", "PARTITIONS", "ROUTED", "KEY")
    return table(headers, rows, right=("MESSAGES", "BYTES", "OLDEST", "PARTITIONS", "ROUTED"))


def _partition_rows(parts: Sequence[PartitionBacklog], now: dt.datetime) -> list[tuple[object, ...]]:
    return [
        (
            p.partition,
            p.messages,
            size(p.bytes),
            age(None if p.oldest_published_at is None else now - p.oldest_published_at),
            p.routed,
        )
        for p in parts
    ]


def partitions_table(status: SubscriptionStatus, now: dt.datetime | None = None) -> str:
    """``backlog SUB``: one row per partition and a total."""
    at = now or dt.datetime.now(dt.UTC)
    rows = _partition_rows(status.partitions, at)
    rows.append(("total", _backlog_cell(status), size(status.bytes), age(status.oldest_age(at)), status.routed))
    head = f"{status.display_name} ({status.kind}, generation {status.record.generation}, {status.key})"
    note = "" if status.exact_backlog else "\nnon-durable: no acknowledgements are kept, the backlog is every routed message"
    return head + "\n" + table(("PARTITION", "MESSAGES", "BYTES", "OLDEST", "ROUTED"), rows,
                               right=("MESSAGES", "BYTES", "OLDEST", "ROUTED")) + note


def subscription_details(status: SubscriptionStatus, now: dt.datetime | None = None) -> str:
    """``subscriptions show``: every field, then consumers, then the backlog per partition."""
    rec, ident = status.record, status.record.identity
    try:
        source = json.dumps(json.loads(rec.source), sort_keys=True)
    except ValueError:
        source = rec.source
    fields = [
        ("key", rec.key),
        ("namespace", ident.namespace),
        ("name", ident.name),
        ("kind", status.kind),
        ("owner", rec.owner if rec.owner is not None else "(none: anonymous)"),
        ("state", str(rec.state)),
        ("generation", rec.generation),
        ("topic", rec.topic),
        ("binding", rec.binding),
        ("selector", rec.selector if rec.selector is not None else "(none)"),
        ("no-local", "yes" if rec.no_local else "no"),
        ("expiry policy", str(rec.expiry_policy)),
        ("start seq", rec.start_seq),
        ("table", rec.table),
        ("created", rec.created_at.isoformat()),
        ("updated", rec.updated_at.isoformat()),
        ("source", source),
    ]
    width = max(len(k) for k, _ in fields)
    lines = [f"{k.ljust(width)}  {v}" for k, v in fields]
    lines.append("")
    if status.consumers:
        lines.append(f"consumers ({len(status.consumers)}):")
        rows = [(c.link, c.container, c.connection, c.attached_at.isoformat()) for c in status.consumers]
        lines.append(table(("LINK", "CONTAINER", "CONNECTION", "ATTACHED"), rows))
    else:
        lines.append("consumers: none")
    lines.append("")
    if rec.active:
        lines.append("backlog:")
        lines.append(partitions_table(status, now).split("\n", 1)[1])
    return "\n".join(lines)


def selector_explanation(explained: SelectorExplanation) -> str:
    """``selector check``: valid, normalised form, identifiers, Spark SQL."""
    if explained.normalized is None:
        return "valid: blank selector (no selector): every message matches"
    lines = ["valid", f"normalized: {explained.normalized}", "identifiers:"]
    rows = [(i.name, i.kind, i.type, i.reads) for i in explained.identifiers]
    if rows:
        lines.append(table(("NAME", "KIND", "TYPE", "READS"), rows))
    else:
        lines.append("  (none: the result does not depend on the message)")
    lines.append(f"spark sql: {explained.spark_sql}")
    return "\n".join(lines)


def cluster_report(status: ClusterStatus) -> str:
    """``cluster status``: the members, the fan-out's lease, the topics' partitions."""

    def who(m: Member) -> str:
        return f"{m.pid} on {m.host}" if m.pid is not None else ""

    def written(m: Member) -> str:
        return "" if m.written_s_ago is None else age(dt.timedelta(seconds=m.written_s_ago))

    lines = [f"data dir {status.data_dir}", ""]
    if status.members:
        rows = [
            (m.slot, m.state, "" if m.epoch is None else m.epoch, who(m), m.amqp or "", m.http or "", written(m))
            for m in status.members
        ]
        headers = ("SLOT", "STATE", "EPOCH", "PROCESS", "AMQP", "HTTP", "WRITTEN")
        lines.append(table(headers, rows, right=("SLOT", "EPOCH", "WRITTEN")))
    else:
        lines.append("no members (no front end holds this data dir)")
    fanout = status.fanout
    if fanout is not None:
        lines += [
            "",
            f"fan-out: {fanout.state}, epoch {fanout.epoch}, process {who(fanout)}, lease written {written(fanout)} ago",
        ]
    lines.append("")
    if status.topics:
        partitions = [(t, ", ".join(str(p) for p in parts)) for t, parts in status.topics.items()]
        lines.append(table(("TOPIC", "PARTITIONS"), partitions))
    else:
        lines.append("no topics")
    if status.dispatch:
        owners = [
            (d.subscription, d.generation, d.partition, "released" if d.owner is None else d.owner) for d in status.dispatch
        ]
        lines += ["", table(("SUBSCRIPTION", "GEN", "PARTITION", "DISPATCHED BY SLOT"), owners, right=("GEN", "PARTITION"))]
    return "\n".join(lines)
