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
    subscription was created (after its first attach was answered) and that its selector matches
    (a subscription without one: every message). Sent, not accepted: a message sent before the
    attach was answered may have been committed before the subscription's ``start_seq``.
``acked-redelivered``
    Nothing acknowledged is delivered again, unless a replay opened it again. Acks are
    group-committed to the ack log after the consumer settled, so a crash between the settle and
    the commit may redeliver those few; a delivery is *acknowledged* once its ack row is in the
    ack log (a row with a final outcome: a ``failed`` row only counts a failed delivery, and the
    loader leaves those out). Checkable form:

    * a message accepted by a consumer of a subscription is delivered again to that subscription
      by the same incarnation (the front end holds its acks in memory) only once per replay of
      that subscription that was asked for before the delivery, answered (or cut short) after
      the accept, and reopened the message (see *reopen* below); i.e. otherwise a redelivery is
      allowed only after a front-end kill that followed the accept;
    * a message settled for good when incarnation ``n`` started (its final ack rows stamped
      before then outnumber its reopens stamped before then: an earlier incarnation made it
      durable) is never delivered by incarnation ``n``, unless a replay reopened it after ``n``
      started.

    A message is *reopened* by a ``replayed`` ack-log row, or by a replay appending its row back
    to the subscription table (maintenance had deleted it); the checker counts both, stamped
    with the row's ``acked_at`` or the restore commit's time (sharedsub.core.delivery.acklog: settled ⇔ final
    rows > replayed rows). The history the checker reads still has the ack rows maintenance
    deleted, so a message a replay both marks and restores (possible only after a kill between
    maintenance's two deletes) counts two reopens: the rules only get more lenient then.
``ack-durable``
    After the run, every accept a consumer made on the last incarnation (no front-end kill
    followed it) has its row in the subscription's ack log.
``ack-complete``
    After the run, every message a subscription delivered is in its ack log, and none is in its
    backlog (in the current table and not settled by the current ack log: a replay that reopened
    it was followed by a redelivery and its acceptance): one whose ack was lost in a crash was
    delivered again after the restart and accepted then (consumers here accept everything).
``redelivery-marked``
    A delivery of a message the subscription delivered before carries ``delivery-count`` ≥ 1
    (docs/design.md §5: a restart redelivers the unacknowledged ones, marked redelivered; Qpid JMS derives
    JMSRedelivered from the count alone). ``first-acquirer`` false does not mark it: false is the
    field's default, so a first delivery carries it too. The consumers here settle every delivery
    with ``accepted``, so no redelivery comes from a release (which keeps the count).
``table-once``
    A subscription table holds every topic seq from its ``start_seq`` whose message its selector
    matches (all of them without one; every subscription here binds ``#``) exactly once, and no
    other: idempotent fan-out, nothing skipped, nothing misrouted.

*Selectors*: a subscription's selector (``Subscription.selector``, JMS syntax) is evaluated by
the reference evaluator (sharedsub.core.selector) on the application properties the publisher
gave the message (``Publish.properties``: names to longs, doubles, strings or booleans); a topic
row the publisher never recorded has none.
``one-generation``
    A subscription stays in its first generation: reattaching after a crash joins it, never
    replaces it (a new generation would start empty and lose the backlog).
``snapshot-once``
    The current snapshot of a subscription table (what maintenance and replays left of it) holds
    no seq twice, and only seqs the fan-out routed to it: deletes, compaction and restores never
    duplicate or invent a row.
``deleted-acked``
    Every routed row that is no longer in the current snapshot has a final ack row: maintenance
    deletes acknowledged rows only.
``replay-covers``
    A replay that answered re-delivers what it promised: the table as of its start version plus
    everything routed after, up to the latest version it reports (the driver replays from a
    version no maintenance delete precedes, so the table as of it holds every row routed up to
    it). Its ``messages`` is the number of those rows; each of them that was settled for good
    before the replay was asked for (by the ack rows and reopens stamped before) is reopened by
    it (stamped between the request and the reply); and its ``reopened`` is the number of
    messages it reopened. Rows open at the time (waiting, or outstanding on a link) are not
    reopened: they are delivered once, not twice.
``replay-delivered``
    Every message a replay reopened, also a replay cut short by a front-end kill (its ``replayed``
    rows and restored rows are durable before it re-delivers anything), is delivered to the
    subscription after the replay was asked for. Running a cut-short replay again after the
    restart must do the rest: the driver does, and ``replay-covers`` checks the rerun.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Iterable, Mapping

from sharedsub.core.selector import evaluate, parse_selector


@dataclasses.dataclass(frozen=True, slots=True)
class Publish:
    """One message the publisher sent; ``outcome`` None when it never saw one (in doubt)."""

    msg_id: str
    topic: str
    sent_at: float
    outcome: str | None  # accepted | rejected | released | modified | None
    properties: Mapping[str, int | float | str | bool] | None = None  # its application properties


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
    selector: str | None = None  # JMS selector text; None: every message


@dataclasses.dataclass(frozen=True, slots=True)
class Replay:
    """A replay the driver asked the service for (``POST /admin/replay``, as ``sharedsub replay``).

    ``requested_*`` is taken before the request went out, ``ended_*`` once the reply arrived or,
    when the front end was killed first, once that front end was dead (``messages`` and the
    other counts are then None: no reply). Monotonic and wall clock of the test process.
    """

    subscription: str
    from_version: int
    incarnation: int
    requested_at: float
    requested_wall: float
    ended_at: float
    ended_wall: float
    messages: int | None = None
    reopened: int | None = None
    latest_version: int | None = None

    @property
    def answered(self) -> bool:
        """True when the service replied (the replay completed)."""
        return self.messages is not None


@dataclasses.dataclass
class ClientLog:
    """Everything the clients recorded. ``incarnations[n]`` is the wall time incarnation n started."""

    publishes: list[Publish]
    deliveries: list[Delivery]
    accepts: list[Accept]
    subscriptions: list[Subscription]
    incarnations: list[float]
    replays: list[Replay] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class StoredSubscription:
    """What the tables hold for one subscription."""

    generation: int
    start_seq: int
    seqs: list[int]  # topic seqs the fan-out appended to its generation table, one per row
    acks: list[tuple[int, float]]  # (seq, acked_at wall seconds) per final ack-log row ever committed
    # (seq, wall seconds) per reopen: a ``replayed`` ack-log row (its acked_at) or a row a
    # replay appended back to the table (the restore commit's time).
    reopens: list[tuple[int, float]] = dataclasses.field(default_factory=list)
    routed_in: dict[int, int] = dataclasses.field(default_factory=dict)  # seq -> table version that routed it
    live: list[int] | None = None  # seqs in the current snapshot, one per row (None: not read)
    backlog: frozenset[int] = frozenset()  # seqs of the current snapshot the current ack log leaves open


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


def _property(value: int | float | str | bool) -> dict[str, object]:
    """A publisher's property value as the topic table's struct (the reference evaluator's input)."""
    if isinstance(value, bool):
        return {"type": "boolean", "bool": value}
    if isinstance(value, int):
        return {"type": "long", "long": value}
    if isinstance(value, float):
        return {"type": "double", "double": value}
    return {"type": "string", "string": value}


class _Selects:
    """Whether one subscription's selector matches a message, by id (see *Selectors*). Verdicts
    are kept by the message's properties in ``verdicts`` (shared by the subscriptions of one
    selector text): hundreds of subscriptions over thousands of messages with few distinct
    properties evaluate each pairing once."""

    def __init__(
        self,
        selector: str | None,
        properties: Mapping[str, frozenset[tuple[str, int | float | str | bool]]],
        verdicts: dict[frozenset[tuple[str, int | float | str | bool]], bool],
    ) -> None:
        self.selector = parse_selector(selector) if selector is not None else None
        self.properties = properties
        self.verdicts = verdicts

    def __call__(self, msg_id: str | None) -> bool:
        if self.selector is None:
            return True
        props = self.properties.get(msg_id, frozenset()) if msg_id is not None else frozenset()
        verdict = self.verdicts.get(props)
        if verdict is None:
            row = {"application_properties": {name: _property(v) for name, v in props}}
            verdict = self.verdicts[props] = evaluate(self.selector, row) is True
        return verdict


def _selected(log: ClientLog) -> dict[str, Callable[[str | None], bool]]:
    """Per subscription: whether its selector matches a message, by id."""
    properties = {p.msg_id: frozenset(p.properties.items()) for p in log.publishes if p.properties}
    verdicts: dict[str | None, dict[frozenset[tuple[str, int | float | str | bool]], bool]] = {}
    return {
        sub.name: _Selects(sub.selector, properties, verdicts.setdefault(sub.selector, {})) for sub in log.subscriptions
    }


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
    selected = _selected(log)
    out = []
    for sub in log.subscriptions:
        missing = [
            p.msg_id
            for p in log.publishes
            if p.outcome == "accepted"
            and p.topic == sub.topic
            and p.sent_at > sub.created_at
            and p.msg_id not in got[sub.name]
            and selected[sub.name](p.msg_id)
        ]
        if missing:
            out.append(
                Violation(
                    "complete",
                    f"{sub.name} never received {len(missing)} accepted messages sent after its creation: {missing[:10]}",
                )
            )
    return out


def _seq_of(log: ClientLog, stored: Stored) -> dict[str, dict[str, int]]:
    """Per subscription: message id -> topic seq."""
    by_topic = {topic: {mid: seq for seq, mid in rows if mid is not None} for topic, rows in stored.topics.items()}
    return {s.name: by_topic.get(s.topic, {}) for s in log.subscriptions}


class _History:
    """One subscription's final ack rows and reopens, by seq, for "settled at time t" questions."""

    def __init__(self, s: StoredSubscription) -> None:
        self.finals: dict[int, list[float]] = collections.defaultdict(list)
        self.reopens: dict[int, list[float]] = collections.defaultdict(list)
        for seq, at in s.acks:
            self.finals[seq].append(at)
        for seq, at in s.reopens:
            self.reopens[seq].append(at)

    def settled_before(self, seq: int, wall: float) -> bool:
        """Settled for good by the rows stamped before ``wall``: more final rows than reopens."""
        finals = sum(at < wall for at in self.finals.get(seq, ()))
        return finals > sum(at < wall for at in self.reopens.get(seq, ()))

    def first_final(self, seq: int) -> float | None:
        return min(self.finals[seq]) if self.finals.get(seq) else None

    def reopened_since(self, seq: int, wall: float) -> bool:
        return any(at >= wall for at in self.reopens.get(seq, ()))

    def reopened_by(self, replay: Replay) -> set[int]:
        """Seqs with a reopen stamped while ``replay`` ran (commit times are whole milliseconds)."""
        low, high = int(replay.requested_wall * 1000) / 1000, replay.ended_wall
        return {seq for seq, ats in self.reopens.items() if any(low <= at <= high for at in ats)}


def _histories(stored: Stored) -> dict[str, _History]:
    return {name: _History(s) for name, s in stored.subscriptions.items()}


def check_acked_redelivered(log: ClientLog, stored: Stored) -> list[Violation]:
    """``acked-redelivered`` (see the module docstring for the rule)."""
    out = []
    accepts: dict[tuple[str, str], list[Accept]] = collections.defaultdict(list)
    for a in log.accepts:
        accepts[(a.subscription, a.msg_id)].append(a)
    seq_of = _seq_of(log, stored)
    histories = _histories(stored)
    reopened = {
        id(r): histories[r.subscription].reopened_by(r) if r.subscription in histories else set() for r in log.replays
    }
    used: dict[tuple[str, str], set[int]] = collections.defaultdict(set)  # replays a redelivery already used
    for d in sorted(log.deliveries, key=lambda d: d.at):
        ident = (d.subscription, d.msg_id)
        seq = seq_of.get(d.subscription, {}).get(d.msg_id)
        same = [a for a in accepts.get(ident, []) if a.at < d.at and a.incarnation == d.incarnation]
        if same:
            last = max(a.at for a in same)
            replay = next(
                (
                    r
                    for r in log.replays
                    if r.subscription == d.subscription
                    and r.incarnation == d.incarnation
                    and r.requested_at < d.at
                    and last < r.ended_at
                    and seq in reopened[id(r)]
                    and id(r) not in used[ident]
                ),
                None,
            )
            if replay is not None:
                used[ident].add(id(replay))
                continue
            out.append(
                Violation(
                    "acked-redelivered",
                    f"{d.subscription}: {d.msg_id!r} delivered to {d.consumer} by incarnation {d.incarnation} after "
                    f"{same[0].consumer} accepted it on the same incarnation (no front-end kill in between, "
                    f"and no replay that reopened it since)",
                )
            )
            continue
        history = histories.get(d.subscription)
        if seq is None or history is None or d.incarnation >= len(log.incarnations):
            continue
        started = log.incarnations[d.incarnation]
        if history.settled_before(seq, started) and not history.reopened_since(seq, started):
            out.append(
                Violation(
                    "acked-redelivered",
                    f"{d.subscription}: {d.msg_id!r} (seq {seq}) delivered to {d.consumer} by incarnation {d.incarnation} "
                    f"although its ack row (acked_at {history.first_final(seq):.3f}) was committed before that "
                    f"incarnation started ({started:.3f}) and no replay reopened it since",
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
                f"{a.subscription}: {a.consumer} accepted {a.msg_id!r} on the last incarnation ({last}) "
                "but its ack log has no row for it",
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
        s = stored.subscriptions.get(name)
        if s is not None and s.backlog:
            open_ = sorted(mid for mid in ids if seq_of.get(name, {}).get(mid) in s.backlog)
            if open_:
                out.append(
                    Violation(
                        "ack-complete",
                        f"{name}: {len(open_)} delivered messages are still in its backlog (reopened, not "
                        f"acknowledged again): {open_[:10]}",
                    )
                )
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
    selected = _selected(log)
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
        expected = {seq for seq, mid in _ids(stored, sub.topic).items() if seq >= s.start_seq and selected[sub.name](mid)}
        missing = sorted(expected - counts.keys())
        extra = sorted(counts.keys() - expected)
        if missing:
            out.append(
                Violation(
                    "table-once",
                    f"{sub.name}: {len(missing)} topic seqs ≥ start_seq {s.start_seq} are not in its table: {missing[:10]}",
                )
            )
        if extra:
            out.append(
                Violation(
                    "table-once",
                    f"{sub.name}: {len(extra)} seqs in its table are not topic seqs ≥ start_seq {s.start_seq}"
                    + (f" its selector ({sub.selector}) matches" if sub.selector is not None else "")
                    + f": {extra[:10]}",
                )
            )
    return out


def check_snapshots(log: ClientLog, stored: Stored) -> list[Violation]:
    """``snapshot-once`` and ``deleted-acked`` (subscriptions whose snapshot was read)."""
    out = []
    for sub in log.subscriptions:
        s = stored.subscriptions.get(sub.name)
        if s is None or s.live is None:
            continue
        counts = collections.Counter(s.live)
        dups = sorted(seq for seq, n in counts.items() if n > 1)
        if dups:
            out.append(
                Violation("snapshot-once", f"{sub.name}: {len(dups)} seqs are in its current table more than once: {dups[:10]}")
            )
        strays = sorted(counts.keys() - set(s.seqs))
        if strays:
            out.append(
                Violation(
                    "snapshot-once", f"{sub.name}: {len(strays)} seqs in its current table were never routed to it: {strays[:10]}"
                )
            )
        acked = {seq for seq, _ in s.acks}
        gone = sorted(seq for seq in set(s.seqs) - counts.keys() if seq not in acked)
        if gone:
            out.append(
                Violation("deleted-acked", f"{sub.name}: {len(gone)} routed rows left its table without an ack row: {gone[:10]}")
            )
    return out


def check_replays(log: ClientLog, stored: Stored) -> list[Violation]:
    """``replay-covers`` and ``replay-delivered``."""
    out = []
    histories = _histories(stored)
    seq_of = _seq_of(log, stored)
    for r in log.replays:
        s, history = stored.subscriptions.get(r.subscription), histories.get(r.subscription)
        if s is None or history is None:
            out.append(Violation("replay-covers", f"replay of {r.subscription}: no subscription table found"))
            continue
        what = f"replay of {r.subscription} from version {r.from_version} on incarnation {r.incarnation}"
        reopened = history.reopened_by(r)
        if r.answered:
            promised = {seq for seq, version in s.routed_in.items() if version <= (r.latest_version or 0)}
            if r.messages != len(promised):
                out.append(
                    Violation(
                        "replay-covers",
                        f"{what} reported {r.messages} messages up to version {r.latest_version}; "
                        f"the table's log routed {len(promised)} up to it",
                    )
                )
            skipped = sorted(seq for seq in promised if history.settled_before(seq, r.requested_wall) and seq not in reopened)
            if skipped:
                out.append(
                    Violation(
                        "replay-covers",
                        f"{what}: {len(skipped)} messages acknowledged before it was asked for were not reopened: {skipped[:10]}",
                    )
                )
            if r.reopened != len(reopened):
                out.append(
                    Violation("replay-covers", f"{what} reported {r.reopened} messages reopened; the tables show {len(reopened)}")
                )
        ids = {seq: mid for mid, seq in seq_of.get(r.subscription, {}).items()}
        after = {d.msg_id for d in log.deliveries if d.subscription == r.subscription and d.at > r.requested_at}
        undelivered = sorted(seq for seq in reopened if ids.get(seq) not in after)
        if undelivered:
            state = "answered" if r.answered else "cut short by a front-end kill"
            out.append(
                Violation(
                    "replay-delivered",
                    f"{what} ({state}) reopened {len(reopened)} messages; {len(undelivered)} were not delivered after it: "
                    f"{[ids.get(seq, seq) for seq in undelivered[:10]]}",
                )
            )
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
        *check_snapshots(log, stored),
        *check_replays(log, stored),
    ]


EVENTUAL = frozenset({"complete", "ack-durable", "ack-complete", "table-once", "deleted-acked", "replay-delivered"})
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
