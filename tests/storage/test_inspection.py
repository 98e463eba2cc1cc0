"""sharedsub.runtime.inspection and table_history.history on real Delta tables in a tmp dir (no service)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from sharedsub.core import layout
from sharedsub.core.errors import AmbiguousSubscription, SubscriptionNotFound
from sharedsub.core.model import SubscriptionRecord, SubscriptionState
from sharedsub.runtime import inspection
from sharedsub.storage import schemas
from sharedsub.storage.delta import table_history
from sharedsub.storage.delta.appender import DeltaAppender
from sharedsub.storage.delta.table_reads import read_table
from tests import builders as b


def _route(root: str, record: SubscriptionRecord, seqs: list[int]) -> None:
    """Append the topic rows ``seqs`` to ``record``'s generation table, as the fan-out does."""
    topic = read_table(layout.topic_table(root, record.topic))
    assert topic is not None
    rows = [r for r in topic.to_pylist() if r["seq"] in set(seqs)]
    out = [{**{c: r[c] for c in schemas.SUBSCRIPTION_FROM_TOPIC}, "topic": record.topic, "routed_at": b.T0} for r in rows]
    data = pa.Table.from_pylist(out, schema=schemas.SUBSCRIPTION)
    DeltaAppender(layout.join(root, record.table), schemas.SUBSCRIPTION).append(data)


def _ack(root: str, record: SubscriptionRecord, rows: list[tuple[int, str]]) -> None:
    path = layout.join(root, layout.ack_table_rel(record.key, record.generation))
    data: dict[str, list[Any]] = {
        "seq": [s for s, _ in rows],
        "outcome": [o for _, o in rows],
        "acked_at": [b.T0] * len(rows),
        "consumer": ["c"] * len(rows),
    }
    DeltaAppender(path, schemas.ACK).append(pa.Table.from_pydict(data, schema=schemas.ACK))


def test_find_subscription_by_key_qualified_or_bare_name() -> None:
    a = b.subscription("t", namespace="app-1", name="billing")
    c = b.subscription("t", namespace="app-3", name="billing")
    d = b.subscription("t", namespace="global", name="audit", shared=False)
    records = {r.key: r for r in (a, c, d)}
    assert inspection.find_subscription(records, a.key) is a
    assert inspection.find_subscription(records, "app-3:billing") is c
    assert inspection.find_subscription(records, "audit") is d
    with pytest.raises(AmbiguousSubscription) as err:
        inspection.find_subscription(records, "billing")
    assert err.value.candidates == sorted([a.key, c.key])
    with pytest.raises(SubscriptionNotFound):
        inspection.find_subscription(records, "app-2:billing")


def test_find_subscription_prefers_active_and_falls_back_to_deleted() -> None:
    gone = b.subscription("t", namespace="app-1", name="s", durable=True)
    gone = dataclasses.replace(gone, state=SubscriptionState.DELETED)
    live = b.subscription("t", namespace="app-1", name="s", durable=False)
    records = {gone.key: gone, live.key: live}
    assert inspection.find_subscription(records, "app-1:s") is live
    assert inspection.find_subscription(records, gone.key) is gone
    del records[live.key]
    assert inspection.find_subscription(records, "s") is gone


def test_history_backlog_and_pending_messages(tmp_path: Path) -> None:
    root = str(tmp_path)
    b.publish(root, "t", ["a", "b", "c"], properties={"region": "eu", "n": 7})
    b.publish(root, "t", ["d", "e"])
    (sub,) = b.register(root, b.subscription("t", namespace="app-1", name="s"))
    _route(root, sub, [0, 1, 2])
    _route(root, sub, [3, 4])
    _ack(root, sub, [(0, "accepted"), (1, "failed")])
    _ack(root, sub, [(1, "failed"), (3, "dead-lettered"), (0, "accepted")])  # a repeated ack counts once

    history = inspection.backlog_history(root, sub)
    assert len(history) == 4
    assert [p.at for p in history] == sorted(p.at for p in history)
    last = history[-1]
    assert (last.routed, last.settled, last.backlog) == (5, 2, 3)
    assert max(p.routed for p in history) == 5

    # A maintenance delete of settled rows rewrites the table: not an append, no new rows.
    table = layout.join(root, sub.table)
    DeltaTable(table).delete("seq IN (0, 3)")
    entries = table_history.history(table)
    assert [e.is_append for e in entries] == [True, True, False]
    assert inspection.backlog_history(root, sub)[-1].routed == 5

    pending = inspection.pending_messages(root, sub)
    assert pending.column("seq").to_pylist() == [1, 2, 4]
    assert pending.column("delivery_failures").to_pylist() == [2, 0, 0]
    assert pending.column("subject").to_pylist() == ["b", "c", "e"]
    props = [inspection.plain_properties(p) for p in pending.column("application_properties").to_pylist()]
    assert props == [{"region": "eu", "n": 7}, {"region": "eu", "n": 7}, {}]
    assert inspection.pending_messages(root, sub, limit=1).column("seq").to_pylist() == [1]

    status = inspection.subscription_status(root, "app-1:s")
    assert (status.messages, status.consumers, status.exact_backlog) == (3, (), True)


def test_history_of_a_missing_table_is_empty(tmp_path: Path) -> None:
    assert table_history.history(str(tmp_path / "nothing")) == []
    sub = b.subscription("t")
    assert inspection.backlog_history(str(tmp_path), sub) == []


def test_throughput_counts_commits_inside_the_window() -> None:
    now = dt.datetime(2026, 1, 1, 0, 10, tzinfo=dt.UTC)
    at = [now - dt.timedelta(seconds=s) for s in (400, 200, 100)]
    history = [
        inspection.BacklogPoint(at[0], routed=10, settled=0, backlog=10),
        inspection.BacklogPoint(at[1], routed=40, settled=5, backlog=35),
        inspection.BacklogPoint(at[2], routed=70, settled=35, backlog=35),
    ]
    rate = inspection.throughput(history, window_s=300, now=now)
    assert (rate.routed_per_s, rate.settled_per_s) == (60 / 300, 35 / 300)
    assert inspection.throughput([], window_s=60, now=now).routed_per_s == 0
