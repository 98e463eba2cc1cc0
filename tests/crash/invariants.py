"""The invariants of a crash run: what the clients saw, checked against what the Delta tables hold.

Pure: :func:`check` takes a :class:`ClientLog` (what the load driver recorded) and a
:class:`Stored` (what the tables hold, read by :mod:`tests.crash.tables`) and returns every
:class:`Violation` it finds, each naming its rule and saying what exactly is wrong. An empty list
means the run kept every promise below.

Times: ``sent_at`` and ``at`` are ``time.monotonic()`` of the test process (all clients run in it,
so they order events of different threads); ``started_wall`` and ``acked_at`` are wall-clock
seconds since the epoch (the service stamps ack rows with its wall clock, same host).

An *incarnation* is one run of the front-end process on the data dir; the driver numbers them 0,
1, 2, ... and starts incarnation ``n + 1`` only after incarnation ``n`` is dead (SIGKILLed, and
reaped). A client records, for every connection, the incarnation current when it *began* to
connect: such a connection can only reach that incarnation or fail, so every delivery and accept
carries the incarnation that really served it. Killing only the fan-out job does not start a new
incarnation.

The rules (``Violation.rule``):

``topic-once``
    Every message whose publish the publisher saw *accepted* is in its topic table exactly once,
    and no message id is in a topic table twice. A message whose outcome the publisher never saw
    (the front end died first) may be there once or not at all.
``unknown-delivery``
    Every delivered message id is a row of its subscription's topic table.
``complete``
    Every subscription receives, at least once, every accepted message that was *sent* after the
    subscription was created (after its first attach was answered). Sent, not accepted: a
    message sent before the attach was answered may have been committed before the
    subscription's ``start_seq``.
``acked-redelivered``
    Nothing acknowledged is delivered again. Acks are group-committed to the ack log after the
    consumer settled, so a crash between the settle and the commit may redeliver those few; a
    delivery is *acknowledged* once its ack row is in the ack log (a row with a final outcome: a
    ``failed`` row only counts a failed delivery, and the loader leaves those out). Checkable form:

    * a message accepted by a consumer of a subscription is never delivered again to that
      subscription by the same incarnation (the front end holds its acks in memory), i.e. a
      redelivery is allowed only after a front-end kill that followed the accept;
    * a message whose ack row carries an ``acked_at`` before incarnation ``n`` started (so an
      earlier incarnation wrote it: it was durable) is never delivered by incarnation ``n``.
``ack-durable``
    After the run, every accept a consumer made on the last incarnation (no front-end kill
    followed it) has its row in the subscription's ack log.
``ack-complete``
    After the run, every message a subscription delivered is in its ack log: one whose ack was
    lost in a crash was delivered again after the restart and accepted then (consumers here
    accept everything).
``redelivery-marked``
    A delivery of a message the subscription delivered before carries ``delivery-count`` ≥ 1
    (DESIGN §5: a restart redelivers the unacknowledged ones, marked redelivered; Qpid JMS derives
    JMSRedelivered from the count alone). ``first-acquirer`` false does not mark it: false is the
    field's default, so a first delivery carries it too. The consumers here settle every delivery
    with ``accepted``, so no redelivery comes from a release (which keeps the count).
``table-once``
    A subscription table holds every topic seq from its ``start_seq`` (these subscriptions have
    no selector and bind ``#``) exactly once: idempotent fan-out, nothing skipped.
``one-generation``
    A subscription stays in its first generation: reattaching after a crash joins it, never
    replaces it (a new generation would start empty and lose the backlog).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable


@dataclasses.dataclass(frozen=True, slots=True)
class Publish:
    """One message the publisher sent; ``outcome`` None when it never saw one (in doubt)."""

    msg_id: str
    topic: str
    sent_at: float
    outcome: str | None  # accepted | rejected | released | modified | None


@dataclasses.dataclass(frozen=True, slots=True)
class Delivery:
    """One transfer a consumer received."""

    subscription: str
    consumer: str
    msg_id: str
    incarnation: int
    at: float
    delivery_count: int
    first_acquirer: bool | None


@dataclasses.dataclass(frozen=True, slots=True)
class Accept:
    """A consumer settled a delivery with ``accepted``."""

    subscription: str
    consumer: str
    msg_id: str
    incarnation: int
    at: float


@dataclasses.dataclass(frozen=True, slots=True)
class Subscription:
    """A subscription the clients used; ``created_at`` is when its first attach was answered."""

    name: str
    topic: str
    created_at: float


@dataclasses.dataclass
class ClientLog:
    """Everything the clients recorded. ``incarnations[n]`` is the wall time incarnation n started."""

    publishes: list[Publish]
    deliveries: list[Delivery]
    accepts: list[Accept]
    subscriptions: list[Subscription]
    incarnations: list[float]


@dataclasses.dataclass
class StoredSubscription:
    """What the tables hold for one subscription."""

    generation: int
    start_seq: int
    seqs: list[int]  # topic seqs in its generation table, one per row
    acks: list[tuple[int, float]]  # (seq, acked_at wall seconds) per ack-log row


@dataclasses.dataclass
class Stored:
    """What the Delta tables hold: topic rows ``(seq, message_id)`` per topic, subscriptions by name."""

    topics: dict[str, list[tuple[int, str | None]]]
    subscriptions: dict[str, StoredSubscription]


@dataclasses.dataclass(frozen=True, slots=True)
class Violation:
    """One broken promise: the rule's name and what exactly was seen."""

    rule: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.detail}"


def _ids(stored: Stored, topic: str) -> dict[int, str | None]:
    return dict(stored.topics.get(topic, []))


def check_topic_once(log: ClientLog, stored: Stored) -> list[Violation]:
    """``topic-once``."""
    out: list[Violation] = []
    counts: dict[str, collections.Counter[str | None]] = {
        topic: collections.Counter(mid for _, mid in rows) for topic, rows in stored.topics.items()
    }
    for topic, counter in counts.items():
        for mid, n in counter.items():
            if n > 1:
                out.append(Violation("topic-once", f"message {mid!r} is in topic {topic!r} {n} times"))
    for p in log.publishes:
        if p.outcome != "accepted":
            continue
        n = counts.get(p.topic, collections.Counter())[p.msg_id]
        if n == 0:
            out.append(Violation("topic-once", f"accepted message {p.msg_id!r} is not in topic {p.topic!r}"))
    return out


def check_unknown_deliveries(log: ClientLog, stored: Stored) -> list[Violation]:
    """``unknown-delivery``."""
    topic_of = {s.name: s.topic for s in log.subscriptions}
    known = {topic: {mid for _, mid in rows} for topic, rows in stored.topics.items()}
    out = []
    for d in log.deliveries:
        topic = topic_of.get(d.subscription, "")
        if d.msg_id not in known.get(topic, set()):
            out.append(Violation("unknown-delivery", f"{d.subscription} got {d.msg_id!r}, which topic {topic!r} does not hold"))
    return out


def check_complete(log: ClientLog) -> list[Violation]:
    """``complete``."""
    got: dict[str, set[str]] = collections.defaultdict(set)
    for d in log.deliveries:
        got[d.subscription].add(d.msg_id)
    out = []
    for sub in log.subscriptions:
        missing = [
            p.msg_id
            for p in log.publishes
            if p.outcome == "accepted" and p.topic == sub.topic and p.sent_at > sub.created_at and p.msg_id not in got[sub.name]
        ]
        if missing:
            out.append(
                Violation("complete", f"{sub.name} never received {len(missing)} accepted messages sent after its creation: {missing[:10]}")
            )
    return out


def _seq_of(log: ClientLog, stored: Stored) -> dict[str, dict[str, int]]:
    """Per subscription: message id -> topic seq."""
    by_topic = {topic: {mid: seq for seq, mid in rows if mid is not None} for topic, rows in stored.topics.items()}
    return {s.name: by_topic.get(s.topic, {}) for s in log.subscriptions}


def check_acked_redelivered(log: ClientLog, stored: Stored) -> list[Violation]:
    """``acked-redelivered`` (see the module docstring for the rule)."""
    out = []
    accepts: dict[tuple[str, str], list[Accept]] = collections.defaultdict(list)
    for a in log.accepts:
        accepts[(a.subscription, a.msg_id)].append(a)
    seq_of = _seq_of(log, stored)
    first_ack: dict[str, dict[int, float]] = {}  # per subscription: seq -> earliest acked_at
    for name, s in stored.subscriptions.items():
        firsts = first_ack[name] = {}
        for seq, at in s.acks:
            firsts[seq] = min(at, firsts.get(seq, at))
    for d in log.deliveries:
        earlier = [a for a in accepts.get((d.subscription, d.msg_id), []) if a.at < d.at]
        same = [a for a in earlier if a.incarnation == d.incarnation]
        if same:
            out.append(
                Violation(
                    "acked-redelivered",
                    f"{d.subscription}: {d.msg_id!r} delivered to {d.consumer} by incarnation {d.incarnation} after "
                    f"{same[0].consumer} accepted it on the same incarnation (no front-end kill in between)",
                )
            )
            continue
        seq = seq_of.get(d.subscription, {}).get(d.msg_id)
        acked_at = first_ack.get(d.subscription, {}).get(seq) if seq is not None else None
        if acked_at is None or d.incarnation >= len(log.incarnations):
            continue
        started = log.incarnations[d.incarnation]
        if acked_at < started:
            out.append(
                Violation(
                    "acked-redelivered",
                    f"{d.subscription}: {d.msg_id!r} (seq {seq}) delivered to {d.consumer} by incarnation {d.incarnation} "
                    f"although its ack row (acked_at {acked_at:.3f}) was committed before that incarnation started ({started:.3f})",
                )
            )
    return out


def check_acks(log: ClientLog, stored: Stored) -> list[Violation]:
    """``ack-durable`` and ``ack-complete``."""
    out = []
    last = len(log.incarnations) - 1
    seq_of = _seq_of(log, stored)
    acked = {name: {seq for seq, _ in s.acks} for name, s in stored.subscriptions.items()}
    lost = [
        a
        for a in log.accepts
        if a.incarnation == last and seq_of.get(a.subscription, {}).get(a.msg_id) not in acked.get(a.subscription, set())
    ]
    for a in lost[:20]:
        out.append(
            Violation(
                "ack-durable",
                f"{a.subscription}: {a.consumer} accepted {a.msg_id!r} on the last incarnation ({last}) but its ack log has no row for it",
            )
        )
    if len(lost) > 20:
        out.append(Violation("ack-durable", f"... and {len(lost) - 20} more accepts without an ack row"))
    delivered: dict[str, set[str]] = collections.defaultdict(set)
    for d in log.deliveries:
        delivered[d.subscription].add(d.msg_id)
    for name, ids in sorted(delivered.items()):
        missing = sorted(mid for mid in ids if seq_of.get(name, {}).get(mid) not in acked.get(name, set()))
        if missing:
            out.append(Violation("ack-complete", f"{name}: {len(missing)} delivered messages have no ack row: {missing[:10]}"))
    return out


def check_redelivery_marked(log: ClientLog) -> list[Violation]:
    """``redelivery-marked``."""
    seen: set[tuple[str, str]] = set()
    unmarked: dict[str, list[str]] = collections.defaultdict(list)
    for d in sorted(log.deliveries, key=lambda d: d.at):
        ident = (d.subscription, d.msg_id)
        if ident in seen and d.delivery_count < 1:
            unmarked[d.subscription].append(f"{d.msg_id} (incarnation {d.incarnation})")
        seen.add(ident)
    return [
        Violation("redelivery-marked", f"{name}: {len(items)} redeliveries with delivery-count 0: {items[:10]}")
        for name, items in sorted(unmarked.items())
    ]


def check_tables(log: ClientLog, stored: Stored) -> list[Violation]:
    """``table-once`` and ``one-generation``."""
    out = []
    for sub in log.subscriptions:
        s = stored.subscriptions.get(sub.name)
        if s is None:
            out.append(Violation("table-once", f"{sub.name}: no subscription table found"))
            continue
        if s.generation != 1:
            out.append(Violation("one-generation", f"{sub.name} is in generation {s.generation}, not 1"))
        counts = collections.Counter(s.seqs)
        dups = sorted(seq for seq, n in counts.items() if n > 1)
        if dups:
            out.append(Violation("table-once", f"{sub.name}: {len(dups)} seqs are in its table more than once: {dups[:10]}"))
        expected = {seq for seq in _ids(stored, sub.topic) if seq >= s.start_seq}
        missing = sorted(expected - counts.keys())
        extra = sorted(counts.keys() - expected)
        if missing:
            out.append(Violation("table-once", f"{sub.name}: {len(missing)} topic seqs ≥ start_seq {s.start_seq} are not in its table: {missing[:10]}"))
        if extra:
            out.append(Violation("table-once", f"{sub.name}: {len(extra)} seqs in its table are not topic seqs ≥ start_seq {s.start_seq}: {extra[:10]}"))
    return out


def check(log: ClientLog, stored: Stored) -> list[Violation]:
    """Every rule of the module docstring; an empty list when all hold."""
    return [
        *check_topic_once(log, stored),
        *check_unknown_deliveries(log, stored),
        *check_complete(log),
        *check_acked_redelivered(log, stored),
        *check_acks(log, stored),
        *check_redelivery_marked(log),
        *check_tables(log, stored),
    ]


EVENTUAL = frozenset({"complete", "ack-durable", "ack-complete", "table-once"})
"""Rules a run still catching up breaks for a while (fan-out lag, deliveries and ack commits in
flight); the others, once broken, stay broken."""


def redeliveries(log: ClientLog) -> dict[str, int]:
    """Deliveries per subscription of a message it had delivered before (to show a run exercised them)."""
    seen: set[tuple[str, str]] = set()
    out: dict[str, int] = collections.Counter()
    for d in log.deliveries:
        ident = (d.subscription, d.msg_id)
        if ident in seen:
            out[d.subscription] += 1
        seen.add(ident)
    return dict(out)


def rules(violations: Iterable[Violation]) -> set[str]:
    """The names of the rules broken."""
    return {v.rule for v in violations}
