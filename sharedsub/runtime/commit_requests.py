"""What the group committer is asked to store, and what it answers: its vocabulary.

A request is queued with :meth:`sharedsub.runtime.committer.Committer.submit` from any thread and
answered by a :class:`Result` on the committer's thread, with every other result of its group.
Each request says where it goes in a group (:meth:`join`, over the buckets of :class:`Group`);
the committer commits the buckets in a fixed order (its module docstring), so no request kind
is sorted by an ``isinstance`` test.

A request that needs an answer on the front end's thread carries a :data:`Token`: an int under
which the front end keeps what to do with the result (connectors/amqp/tokens.py). Proton objects
and closures over them never travel through the committer's thread (a proton wrapper dropped on
another thread corrupts proton's heap).

A request whose sender waits for its answer before it sends anything more says so with
``awaited`` (the committer then starts its group without waiting for the commit interval:
sharedsub.core.publish.commit_pace).

What a result's :attr:`Result.value` holds depends on its request; the typed readers
(:meth:`Result.seq`, :meth:`Result.seqs`, :meth:`Result.record`, :meth:`Result.path`) say which.
"""

from __future__ import annotations

import dataclasses
from typing import TypedDict, TypeVar

from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.publish.topic_row import TopicColumns

_T = TypeVar("_T")

Token = int
"""A handle the front end keeps a request's continuation under (never a proton object)."""


class DeadLetterRow(TypedDict):
    """A schemas.DEAD_LETTER row but ``dead_lettered_at`` (the commit's time)."""

    topic: str
    seq: int
    reason: str  # sharedsub.core.delivery.outcomes.DeadLetterReason
    error_condition: str | None  # a rejection's condition
    error_description: str | None
    delivery_count: int
    consumer: str  # the container-id of the consumer's connection ("" when none)
    message_id: str | None


class LinkRow(TypedDict):
    """A schemas.LINKS row but ``at`` (the commit's time)."""

    key: str
    generation: int
    link: str
    container: str
    connection: str
    event: str  # "attached" or "detached"


@dataclasses.dataclass(slots=True)
class Group:
    """The requests of one group commit, by where they go (filled by :meth:`join`)."""

    publishes: dict[str, list[Publish]] = dataclasses.field(default_factory=dict)  # by topic
    saves: list[SaveSubscription] = dataclasses.field(default_factory=list)
    creates: list[CreateTopic] = dataclasses.field(default_factory=list)
    acks: dict[str, list[Ack]] = dataclasses.field(default_factory=dict)  # by ack table
    dead_letters: dict[str, list[DeadLetterMessage]] = dataclasses.field(default_factory=dict)  # by table
    links: list[LinkEvent] = dataclasses.field(default_factory=list)
    drops: list[DropTopic] = dataclasses.field(default_factory=list)
    transactions: list[CommitTransaction] = dataclasses.field(default_factory=list)
    barriers: list[Barrier] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(slots=True)
class Publish:
    """Store one message in a topic. ``columns``: its topic row but ``seq``, ``published_at`` and
    ``message`` (sharedsub.core.publish.topic_row), which the committer adds."""

    topic: str
    columns: TopicColumns
    message: bytes
    token: Token | None
    received: float = 0.0  # time.perf_counter() when its transfer was complete (stage publish_accept)
    # Its publisher waits for its outcome before sending again: its group is committed without
    # waiting for the commit interval (sharedsub.core.publish.commit_pace).
    awaited: bool = False
    # Its group may wait for company under light traffic (commit_pace.PublisherPace.wants_company:
    # not a synchronous publisher's message).
    company: bool = True

    def join(self, group: Group) -> None:
        """Go into ``group``'s bucket for this kind (see :class:`Group`)."""
        group.publishes.setdefault(self.topic, []).append(self)

    @property
    def size(self) -> int:
        """Bytes of message data this brings into a group (its share of max_batch_bytes)."""
        return len(self.message)


@dataclasses.dataclass(slots=True)
class SaveSubscription:
    """Write a catalog revision. ``assign_start`` sets start_seq to the topic's next seq."""

    record: SubscriptionRecord
    assign_start: bool
    token: Token | None

    def join(self, group: Group) -> None:  # noqa: D102 (Publish.join says it)
        group.saves.append(self)

    size = 0
    awaited = False


@dataclasses.dataclass(slots=True)
class CreateTopic:
    """Create a topic table if it does not exist."""

    topic: str
    token: Token | None

    def join(self, group: Group) -> None:  # noqa: D102
        group.creates.append(self)

    size = 0
    awaited = False


@dataclasses.dataclass(slots=True)
class DropTopic:
    """Remove a topic table (admin ``topics drop``), after everything queued before it.

    Handled last in its group, so catalog revisions submitted before it (the DELETED revisions of
    the topic's subscriptions) are committed first. Forgets the topic's appender, next seq and
    cached payloads, so a topic created again under the name starts afresh.
    """

    topic: str
    token: Token | None = None

    def join(self, group: Group) -> None:  # noqa: D102
        group.drops.append(self)

    size = 0
    awaited = False


@dataclasses.dataclass(slots=True)
class Ack:
    """Record settled-for-good rows of a subscription generation in its acknowledgement log."""

    table: str  # ack table, relative to the data dir
    seqs: list[int]
    outcome: str
    consumer: str
    token: Token | None = None

    def join(self, group: Group) -> None:  # noqa: D102
        group.acks.setdefault(self.table, []).append(self)

    size = 0
    awaited = False


@dataclasses.dataclass(slots=True)
class DeadLetterMessage:
    """Move a message to a subscription generation's dead-letter table.

    ``row`` is a schemas.DEAD_LETTER row without ``dead_lettered_at``. The dead-letter row is
    committed first and the ``dead-lettered`` row of the ack log (when ``ack_table`` is given)
    after it, in the same group: a crash between the two can leave the message dead-lettered
    twice after a restart, never lost.
    """

    table: str  # dead-letter table, relative to the data dir
    ack_table: str | None  # ack log, relative to the data dir (None: acks are not persisted)
    row: DeadLetterRow
    token: Token | None = None

    def join(self, group: Group) -> None:  # noqa: D102
        group.dead_letters.setdefault(self.table, []).append(self)

    size = 0
    awaited = False


@dataclasses.dataclass(slots=True)
class LinkEvent:
    """Record a consumer link attaching to or detaching from a subscription (catalog/links)."""

    row: LinkRow
    token: Token | None = None

    def join(self, group: Group) -> None:  # noqa: D102
        group.links.append(self)

    size = 0
    awaited = False


@dataclasses.dataclass(slots=True)
class CommitTransaction:
    """Store every message a transaction published, never split: all of a topic's messages of
    the transaction land in one Delta commit (with whatever else the group holds for that
    topic). Its result fails when any of them failed; ``value`` is their seqs."""

    publishes: list[Publish]
    token: Token | None = None

    def join(self, group: Group) -> None:  # noqa: D102
        group.transactions.append(self)
        for item in self.publishes:
            item.join(group)

    @property
    def size(self) -> int:  # noqa: D102
        return sum(len(p.message) for p in self.publishes)

    # The client waits for the discharge's outcome (a JMS Session.commit() blocks): the group is
    # committed without waiting for the commit interval (sharedsub.core.publish.commit_pace).
    awaited = True


@dataclasses.dataclass(slots=True)
class Barrier:
    """Nothing to store: its result comes once everything queued before it has been committed
    (results of a group are reported together, after all of the group's commits)."""

    token: Token | None = None

    def join(self, group: Group) -> None:  # noqa: D102
        group.barriers.append(self)

    size = 0
    awaited = False


Request = (
    Publish | SaveSubscription | CreateTopic | Ack | DeadLetterMessage | LinkEvent | DropTopic | CommitTransaction | Barrier
)

ResultValue = int | list[int] | SubscriptionRecord | str | None


@dataclasses.dataclass(slots=True)
class Result:
    """Outcome of one request: ``error`` when it failed, else ``value`` (see the readers)."""

    request: Request
    error: BaseException | None = None
    value: ResultValue = None

    def seq(self) -> int:
        """A stored :class:`Publish`'s seq."""
        return _expect(self.value, int)

    def seqs(self) -> list[int]:
        """A stored :class:`CommitTransaction`'s seqs, in the order of its publishes."""
        return _expect(self.value, list)

    def record(self) -> SubscriptionRecord:
        """A :class:`SaveSubscription`'s record as stored (start_seq and revision filled in)."""
        return _expect(self.value, SubscriptionRecord)

    def path(self) -> str:
        """A :class:`CreateTopic`'s or :class:`DropTopic`'s table path."""
        return _expect(self.value, str)


def _expect(value: object, kind: type[_T]) -> _T:
    if not isinstance(value, kind):
        raise TypeError(f"a result of this request holds {type(value).__name__}, not {kind.__name__}")
    return value
