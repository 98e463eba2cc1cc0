"""Read-only views of a data dir: subscriptions, their consumers, backlog, history, pending messages.

The public functions here are what ``sharedsub subscriptions|backlog`` print and what
notebooks/backlog.ipynb calls; they read the Delta tables directly (through
:mod:`sharedsub.storage`), whether or not a service runs on the data dir, and never write.

What the tables can tell, and so what these views mean:

* **Consumers** are the links whose last ``catalog/links`` event is ``attached``. A front end
  that was killed leaves its links recorded as attached until it starts again (it then records
  them detached), so on a stopped data dir this is "attached when the service last ran".
* **Backlog** is routed minus settled-for-good (:mod:`sharedsub.storage.backlog`). Non-durable
  subscriptions keep no acknowledgements, so theirs is every routed row (an upper bound;
  ``SubscriptionStatus.exact_backlog`` is False).
* **History** comes from the Delta logs of the generation table and its ack log: one point per
  commit of either, as far back as the logs are retained.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict

import pyarrow as pa
import pyarrow.compute as pc

from sharedsub.core import layout
from sharedsub.core.delivery.acklog import AckCounter, ack_state_of
from sharedsub.core.errors import AmbiguousSubscription, SubscriptionNotFound
from sharedsub.core.model import SubscriptionRecord
from sharedsub.storage import schemas
from sharedsub.storage.backlog import PartitionBacklog, subscription_backlog
from sharedsub.storage.catalog import attached_links, load_catalog
from sharedsub.storage.delta import table_history
from sharedsub.storage.delta.table_reads import read_files, read_table
from sharedsub.storage.payload_index import TopicIndex


@dataclasses.dataclass(frozen=True, slots=True)
class Consumer:
    """A consumer link recorded as attached to a subscription."""

    link: str
    container: str
    connection: str
    generation: int
    attached_at: dt.datetime


class PartitionJSON(TypedDict):
    """One partition's backlog in :meth:`SubscriptionStatus.to_json`."""

    partition: int
    messages: int
    bytes: int
    routed: int
    oldest_published_at: str | None


class BacklogJSON(TypedDict):
    """The ``backlog`` of :meth:`SubscriptionStatus.to_json`."""

    messages: int
    bytes: int
    routed: int
    exact: bool
    oldest_published_at: str | None
    oldest_age_s: float | None
    partitions: list[PartitionJSON]


class SubscriptionJSON(TypedDict):
    """:meth:`SubscriptionStatus.to_json` (the CLI's ``--json`` output)."""

    key: str
    name: str
    namespace: str
    subscription: str
    shared: bool
    durable: bool
    owner: str | None
    state: str
    generation: int
    topic: str
    binding: str
    selector: str | None
    no_local: bool
    expiry_policy: str
    start_seq: int
    table: str
    created_at: str
    updated_at: str
    consumers: list[dict[str, object]]
    backlog: BacklogJSON


@dataclasses.dataclass(frozen=True, slots=True)
class SubscriptionStatus:
    """One subscription's catalog record, consumers and backlog of its current generation."""

    record: SubscriptionRecord
    consumers: tuple[Consumer, ...]
    partitions: tuple[PartitionBacklog, ...]

    @property
    def key(self) -> str:
        """The catalog key (what every command accepts)."""
        return self.record.key

    @property
    def display_name(self) -> str:
        """``<namespace>:<name>``: the namespace is the container-id, or ``global``."""
        return display_name(self.record)

    @property
    def kind(self) -> str:
        """``shared durable``, ``shared non-durable``, ``durable`` or ``non-durable``."""
        ident = self.record.identity
        return ("shared " if ident.shared else "") + ("durable" if ident.durable else "non-durable")

    @property
    def exact_backlog(self) -> bool:
        """False for non-durable subscriptions: no ack log, the backlog is every routed row."""
        return self.record.identity.durable

    @property
    def messages(self) -> int:
        """Messages not settled for good, all partitions."""
        return sum(p.messages for p in self.partitions)

    @property
    def bytes(self) -> int:
        """Encoded size of those messages."""
        return sum(p.bytes for p in self.partitions)

    @property
    def routed(self) -> int:
        """Rows the current generation's table holds: routed and not yet removed (maintenance deletes
        acknowledged rows below the ack watermark, so this is not a lifetime total)."""
        return sum(p.routed for p in self.partitions)

    @property
    def oldest_published_at(self) -> dt.datetime | None:
        """Publish time of the oldest message in the backlog (None when it is empty)."""
        times = [p.oldest_published_at for p in self.partitions if p.oldest_published_at is not None]
        return min(times) if times else None

    def oldest_age(self, now: dt.datetime | None = None) -> dt.timedelta | None:
        """Age of the oldest message in the backlog at ``now`` (default: the current time)."""
        oldest = self.oldest_published_at
        if oldest is None:
            return None
        return (now or dt.datetime.now(dt.UTC)) - oldest

    def to_json(self, now: dt.datetime | None = None) -> SubscriptionJSON:
        """JSON-ready dict (``--json`` output of the CLI)."""
        rec, ident = self.record, self.record.identity
        age = self.oldest_age(now)
        return {
            "key": rec.key,
            "name": self.display_name,
            "namespace": ident.namespace,
            "subscription": ident.name,
            "shared": ident.shared,
            "durable": ident.durable,
            "owner": rec.owner,
            "state": str(rec.state),
            "generation": rec.generation,
            "topic": rec.topic,
            "binding": rec.binding,
            "selector": rec.selector,
            "no_local": rec.no_local,
            "expiry_policy": str(rec.expiry_policy),
            "start_seq": rec.start_seq,
            "table": rec.table,
            "created_at": rec.created_at.isoformat(),
            "updated_at": rec.updated_at.isoformat(),
            "consumers": [
                {**dataclasses.asdict(c), "attached_at": c.attached_at.isoformat()} for c in self.consumers
            ],
            "backlog": {
                "messages": self.messages,
                "bytes": self.bytes,
                "routed": self.routed,
                "exact": self.exact_backlog,
                "oldest_published_at": None if self.oldest_published_at is None else self.oldest_published_at.isoformat(),
                "oldest_age_s": None if age is None else round(age.total_seconds(), 3),
                "partitions": [_partition_json(p) for p in self.partitions],
            },
        }


def _partition_json(p: PartitionBacklog) -> PartitionJSON:
    return {
        "partition": p.partition,
        "messages": p.messages,
        "bytes": p.bytes,
        "routed": p.routed,
        "oldest_published_at": None if p.oldest_published_at is None else p.oldest_published_at.isoformat(),
    }


def display_name(record: SubscriptionRecord) -> str:
    """``<namespace>:<name>`` of a record."""
    return f"{record.identity.namespace}:{record.identity.name}"


# --------------------------------------------------------------------------- finding subscriptions


def find_subscription(records: Mapping[str, SubscriptionRecord], name: str) -> SubscriptionRecord:
    """The record ``name`` designates: its key, ``<namespace>:<name>``, or a bare subscription
    name. Active subscriptions are searched first; deleted ones only when no active one matches
    (so a deleted subscription can still be shown by its key). Pure.

    Raises:
        SubscriptionNotFound: nothing matches.
        AmbiguousSubscription: several match (``candidates`` lists their keys, sorted).
    """
    if name in records:
        return records[name]
    for wanted_active in (True, False):
        pool = [r for r in records.values() if r.active is wanted_active]
        matches = [r for r in pool if display_name(r) == name] or [r for r in pool if r.identity.name == name]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise AmbiguousSubscription(name, sorted(r.key for r in matches))
    raise SubscriptionNotFound(name)


def consumers_by_key(root: str) -> dict[str, list[Consumer]]:
    """Consumer links recorded as attached, by subscription key, ordered by attach time."""
    out: dict[str, list[Consumer]] = {}
    for (key, link, container, connection), row in attached_links(root).items():
        out.setdefault(key, []).append(Consumer(link, container, connection, int(row["generation"]), row["at"]))
    for links in out.values():
        links.sort(key=lambda c: (c.attached_at, c.link))
    return out


def _status(root: str, record: SubscriptionRecord, consumers: Mapping[str, list[Consumer]]) -> SubscriptionStatus:
    mine = tuple(c for c in consumers.get(record.key, []) if c.generation == record.generation)
    if not record.active:
        return SubscriptionStatus(record, mine, ())
    return SubscriptionStatus(record, mine, tuple(subscription_backlog(root, record.key, record.generation)))


def list_subscriptions(
    root: str, *, include_deleted: bool = False, progress: Callable[[int, int], None] | None = None
) -> list[SubscriptionStatus]:
    """Every active subscription (and deleted ones when asked) with consumers and backlog,
    ordered by display name then key. Deleted ones have no backlog (empty ``partitions``).

    ``progress(done, total)`` is called after each subscription's backlog was read.
    """
    records = load_catalog(root)
    consumers = consumers_by_key(root)
    chosen = [r for r in records.values() if include_deleted or r.active]
    chosen.sort(key=lambda r: (display_name(r), r.key))
    out = []
    for record in chosen:
        out.append(_status(root, record, consumers))
        if progress is not None:
            progress(len(out), len(chosen))
    return out


def subscription_status(root: str, name: str) -> SubscriptionStatus:
    """One subscription (see :func:`find_subscription` for ``name``) with consumers and backlog.

    Raises:
        SubscriptionNotFound, AmbiguousSubscription: as :func:`find_subscription`.
    """
    record = find_subscription(load_catalog(root), name)
    return _status(root, record, consumers_by_key(root))


# --------------------------------------------------------------------------- history


@dataclasses.dataclass(frozen=True, slots=True)
class BacklogPoint:
    """Backlog of a subscription generation just after one commit of its table or ack log."""

    at: dt.datetime
    routed: int  # rows routed so far
    settled: int  # distinct messages settled for good so far (a replay takes some back)
    backlog: int  # routed - settled


def backlog_history(root: str, record: SubscriptionRecord) -> list[BacklogPoint]:
    """Backlog over time of ``record``'s generation, one point per retained commit of its
    generation table or ack log, oldest first (empty before the fan-out created the table)."""
    table = layout.join(root, record.table)
    acks = layout.join(root, layout.ack_table_rel(record.key, record.generation))
    events: list[tuple[int, int, int]] = []  # (timestamp_ms, routed added, settled added)
    for entry in table_history.history(table):
        # Only appends bring new rows; a maintenance delete or compaction re-adds kept rows.
        data = read_files(entry.added, ["seq"]) if entry.is_append else None
        events.append((entry.timestamp_ms, 0 if data is None else data.num_rows, 0))
    counter = AckCounter()  # the ack log so far; sharedsub.core.delivery.acklog decides what it settles
    for entry in table_history.history(acks):
        # Appends only: a maintenance delete re-adds the rows it keeps, already counted.
        data = read_files(entry.added, ["seq", "outcome"]) if entry.is_append else None
        before = counter.settled_count
        for seq, outcome in zip(*(data.column(c).to_pylist() for c in ("seq", "outcome")), strict=True) if data else ():
            counter.add(seq, outcome)
        events.append((entry.timestamp_ms, 0, counter.settled_count - before))
    events.sort()
    points: list[BacklogPoint] = []
    routed = done = 0
    for ms, added, acked in events:
        routed += added
        done += acked
        at = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
        points.append(BacklogPoint(at, routed, done, routed - done))
    return points


@dataclasses.dataclass(frozen=True, slots=True)
class Throughput:
    """Messages routed to and settled from a subscription per second over a time window."""

    window_s: float
    routed_per_s: float
    settled_per_s: float


def throughput(history: Sequence[BacklogPoint], *, window_s: float = 300.0, now: dt.datetime | None = None) -> Throughput:
    """Rates over the ``window_s`` seconds before ``now`` (default the current time) from a
    :func:`backlog_history`; pure. Commits before the window count as the starting level."""
    end = now or dt.datetime.now(dt.UTC)
    start = end - dt.timedelta(seconds=window_s)
    before = [p for p in history if p.at <= start]
    inside = [p for p in history if start < p.at <= end]
    base_routed = before[-1].routed if before else 0
    base_settled = before[-1].settled if before else 0
    last = inside[-1] if inside else (before[-1] if before else None)
    routed = (last.routed - base_routed) if last else 0
    settled = (last.settled - base_settled) if last else 0
    return Throughput(window_s, routed / window_s, settled / window_s)


# --------------------------------------------------------------------------- pending messages

# Topic columns shown next to each pending message that the subscription table lacks (never
# the payload).
_MESSAGE_COLUMNS = ["seq", "to", "reply_to", "content_type", "creation_time", "application_properties"]


def pending_messages(root: str, record: SubscriptionRecord, *, limit: int | None = None) -> pa.Table:
    """The messages of ``record``'s generation not settled for good, oldest seq first (at most
    ``limit``), with their routing columns, failed-delivery count and application properties.

    Columns: the subscription table's (``schemas.SUBSCRIPTION``), then ``delivery_failures``
    (the delivery count: ack-log ``failed`` and ``replayed`` rows, sharedsub.core.delivery.acklog), then from
    the topic table ``to``, ``reply_to``, ``content_type``, ``creation_time`` and
    ``application_properties`` (map of typed values, :data:`schemas.PROPERTY_VALUE`;
    :func:`plain_properties` turns one into a dict).
    """
    routed = read_table(layout.join(root, record.table))
    if routed is None:
        routed = schemas.SUBSCRIPTION.empty_table()
    # Files rewritten by a maintenance delete may use other physical types (string_view).
    routed = routed.select(schemas.SUBSCRIPTION.names).cast(schemas.SUBSCRIPTION)
    acks = read_table(layout.join(root, layout.ack_table_rel(record.key, record.generation)), ["seq", "outcome"])
    state = ack_state_of(acks)
    final, failures = state.settled, state.delivery_counts
    keep = pc.invert(pc.is_in(routed.column("seq"), value_set=pa.array(sorted(final), pa.int64())))
    pending = routed.filter(keep).sort_by("seq")
    if limit is not None:
        pending = pending.slice(0, limit)
    seqs = pending.column("seq").to_pylist()
    pending = pending.append_column("delivery_failures", pa.array([failures.get(s, 0) for s in seqs], pa.int64()))
    index = TopicIndex(root, record.topic)
    files = list(index.files_for(seqs)) if seqs else []
    details = read_files(files, _MESSAGE_COLUMNS)
    extra = [c for c in _MESSAGE_COLUMNS if c != "seq"]
    by_seq: dict[int, dict[str, Any]] = {}  # Any: rows as pyarrow's to_pylist() gives them
    if details is not None:
        wanted = set(seqs)
        for row in details.to_pylist():
            if row["seq"] in wanted:
                by_seq[row["seq"]] = row
    topic_schema = schemas.TOPIC
    for column in extra:
        values = [by_seq.get(s, {}).get(column) for s in seqs]
        pending = pending.append_column(topic_schema.field(column), pa.array(values, topic_schema.field(column).type))
    return pending


def plain_properties(entries: Any) -> dict[str, object]:  # Any: a to_pylist() value of application_properties
    """An ``application_properties`` value (list of ``(name, typed value)`` pairs, or a dict) as
    ``{name: python value}``: the typed field that is set, else the string rendering. Pure."""
    items = entries.items() if isinstance(entries, Mapping) else (entries or [])
    out: dict[str, object] = {}
    for name, value in items:
        if value is None:
            out[name] = None
            continue
        for field in ("long", "double", "bool", "string"):
            if value.get(field) is not None:
                out[name] = value[field]
                break
        else:
            out[name] = None
    return out
