"""The dispatch rules (sharedsub.core.delivery.dispatch) as a decision table, one row per rule.

Each row: the state (built by the ``given`` events on a fresh subscription, their effects
dropped), one event, and the effects it must give, in order; ``then`` pins the state after it.
Row ids name the rule they pin: ``§5`` for docs/design.md §5 (delivery), ``#N`` for the row of the
table in sharedsub/core/delivery/dispatch.py's docstring, ``txn`` for the transaction rules. The wire (proton
links, frames, the ack log) is tested end to end in tests/e2e.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any

import pytest

from sharedsub.core.delivery.acked_seqs import AckedSeqs
from sharedsub.core.delivery.dispatch import (
    AddConsumer,
    CountSent,
    Credit,
    DeadLetterRow,
    Discharge,
    Drop,
    Effect,
    Event,
    Offer,
    Record,
    Release,
    RemoveConsumer,
    Send,
    Settle,
    SettleAll,
    SettleTransactional,
    Shutdown,
    SubscriptionDispatch,
)
from sharedsub.core.delivery.outcomes import AckOutcome, DeadLetterReason, Limits, Settlement

NOW = 1_000_000
P1 = 1 << 40  # topic partition 1's first seq (sharedsub.core.layout)
TEN = Limits(max_delivery_count=10)


def _tables(name: str) -> Any:
    from connectors.amqp.generations import GenerationTables

    return GenerationTables(f"{name}-table", f"{name}-acks", f"{name}-dead")


TABLES = _tables("k")
T = b"txn-1"
ACCEPTED, FAILED, EXPIRED = AckOutcome.ACCEPTED, AckOutcome.FAILED, AckOutcome.EXPIRED
REJECTED, MAX = DeadLetterReason.REJECTED, DeadLetterReason.MAX_DELIVERY_COUNT


@dataclasses.dataclass(frozen=True)
class R:
    """A row as the tailer offers it (the fields the rules read, and a topic)."""

    seq: int
    expires_at: int | None = None
    failures: int = 0
    maybe_delivered: bool = False
    topic: str = "t"


# ------------------------------------------------------------------------ event shorthands


def add(consumer: int, credit: int = 0, *, presettled: bool = False) -> AddConsumer:
    return AddConsumer(consumer, credit, presettled)


def offer(*rows: int | R) -> Offer:
    return Offer(tuple(r if isinstance(r, R) else R(r) for r in rows))


SETTLEMENTS: dict[str, tuple[Settlement, bool, bool]] = {
    "accepted": (Settlement.ACCEPTED, False, False),
    "released": (Settlement.RELEASED, False, False),
    "rejected": (Settlement.REJECTED, False, False),
    "modified": (Settlement.MODIFIED, False, False),
    "modified-failed": (Settlement.MODIFIED, True, False),
    "undeliverable": (Settlement.MODIFIED, False, True),
    "undeliverable-failed": (Settlement.MODIFIED, True, True),
}


def settle(consumer: int, seq: int, how: str, error: Any = None) -> Settle:
    settlement, failed, here = SETTLEMENTS[how]
    return Settle(consumer, seq, settlement, failed, here, error)


def txn_settle(consumer: int, seq: int, how: str, txn: bytes = T, error: Any = None) -> SettleTransactional:
    return SettleTransactional(txn, settle(consumer, seq, how, error))


def send(consumer: int, row: int | R, count: int = 0, *, first: bool = True, presettled: bool = False) -> Send:
    return Send(consumer, row if isinstance(row, R) else R(row), count, first, presettled)


def record(row: int | R, outcome: AckOutcome, consumer: int | None) -> Record:
    return Record(row if isinstance(row, R) else R(row), outcome, consumer)


def dead(row: int | R, reason: DeadLetterReason, count: int, consumer: int | None, error: Any = None) -> DeadLetterRow:
    return DeadLetterRow(row if isinstance(row, R) else R(row), reason, count, consumer, error)


# ------------------------------------------------------------------------ the table


@dataclasses.dataclass(frozen=True)
class Row:
    """One rule: how the state came to be, the event, the effects it gives, the state after."""

    id: str
    given: tuple[Event, ...]
    event: Event
    effects: tuple[Effect, ...]
    then: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    limits: Limits = TEN
    acked: frozenset[int] = frozenset()
    failures: Mapping[int, int] = dataclasses.field(default_factory=dict)
    now: int = NOW


ROWS: list[Row] = [
    # ---- round-robin, credit, order (§5 "Dispatch")
    Row("§5/#3 rows go round-robin over the consumers with credit",
        (add(1, 2), add(2, 2)), offer(1, 2, 3, 4),
        (send(1, 1), send(2, 2), send(1, 3), send(2, 4), CountSent(4)),
        {"outstanding": {1: 1, 2: 2, 3: 1, 4: 2}, "pending": ()}),
    Row("§5/#3 a consumer without credit gets nothing and holds nothing back",
        (add(1, 0), add(2, 5)), offer(1, 2, 3),
        (send(2, 1), send(2, 2), send(2, 3), CountSent(3))),
    Row("§5/#3 the round-robin goes on where it stopped",
        (add(1, 5), add(2, 5), offer(1)), offer(2, 3),
        (send(2, 2), send(1, 3), CountSent(2))),
    Row("§5/#3 no credit anywhere: the rows wait, in seq order",
        (add(1, 0),), offer(1, 2), (), {"pending": (1, 2)}),
    Row("§5/#14 credit arrives: waiting rows go, as many as it allows",
        (add(1, 0), offer(1, 2, 3)), Credit({1: 2}),
        (send(1, 1), send(1, 2), CountSent(2)), {"pending": (3,), "credit(1)": 0}),
    Row("§5/#14 a consumer joins: waiting rows go to it",
        (offer(1, 2),), add(1, 1), (send(1, 1), CountSent(1)), {"pending": (2,)}),
    Row("§5/#3 no consumer: offered rows wait",
        (), offer(1, 2), (), {"pending": (1, 2)}),
    Row("§5 a row is outstanding on one link only: more credit elsewhere does not send it again",
        (add(1, 1), add(2, 0), offer(1)), Credit({2: 5}), (), {"outstanding": {1: 1}}),
    # ---- offer: nothing queued twice (#1), replays in seq order (#2)
    Row("#1 acknowledged, outstanding and waiting rows are not queued again; they count as sent",
        (add(1, 1), offer(1, 2)), offer(1, 2, 5, 6),
        (CountSent(3),), {"pending": (2, 6), "outstanding": {1: 1}}, acked=frozenset({5})),
    Row("#1 a parked row is not queued again",
        (add(1, 1), offer(1), settle(1, 1, "undeliverable")), offer(1),
        (CountSent(1),), {"pending": (), "parked": {1: frozenset({1})}}),
    Row("#1/txn a row held by a transaction is not queued again",
        (add(1, 1), offer(1), txn_settle(1, 1, "accepted")), offer(1),
        (CountSent(1),), {"pending": (), "held": {T: (1,)}}),
    Row("#2 rows older than the newest waiting one (a replay's) are queued in seq order",
        (add(1, 0), offer(5, 6)), offer(2, 3), (), {"pending": (2, 3, 5, 6)}),
    Row("#2 a row's failures from the ack log become its delivery count",
        (add(1, 1),), offer(R(1, failures=3)),
        (send(1, R(1, failures=3), 3, first=False), CountSent(1)), {"failures": {1: 3}}),
    # ---- expiry (#5), pre-settled (#6), maybe-delivered
    Row("§5/#5 an expired row is recorded as expired and not sent, but leaves the in-flight window",
        (add(1, 1),), offer(R(1, expires_at=NOW), R(2, expires_at=NOW + 1)),
        (record(R(1, expires_at=NOW), EXPIRED, None), send(1, R(2, expires_at=NOW + 1)), CountSent(2)),
        {"acked": {1}}),
    Row("#6 a pre-settled consumer: each row sent settled and acknowledged at once",
        (add(1, 2, presettled=True),), offer(1, 2),
        (send(1, 1, presettled=True), record(1, ACCEPTED, 1), send(1, 2, presettled=True), record(2, ACCEPTED, 1),
         CountSent(2)),
        {"outstanding": {}, "acked": {1, 2}}),
    Row("§5 after an unclean stop a row goes out with delivery-count >= 1, first-acquirer false",
        (add(1, 1),), offer(R(1, maybe_delivered=True)),
        (send(1, R(1, maybe_delivered=True), 1, first=False), CountSent(1)), {"failures": {}}),
    Row("§5 a maybe-delivered row's mark does not count towards the limit",
        (add(1, 2), offer(R(1, maybe_delivered=True))), settle(1, 1, "modified-failed"),
        (record(R(1, maybe_delivered=True), FAILED, 1), send(1, R(1, maybe_delivered=True), 1, first=False)),
        {"failures": {1: 1}}),
    # ---- settlements (#7-#12)
    Row("§5/#7 accepted: acknowledged for good",
        (add(1, 1), offer(1)), settle(1, 1, "accepted"),
        (record(1, ACCEPTED, 1),), {"acked": {1}, "outstanding": {}}),
    Row("§5/#8 released: back first, delivery-count unchanged, first-acquirer false",
        (add(1, 3), offer(1, 2)), settle(1, 1, "released"),
        (send(1, 1, 0, first=False),), {"pending": (), "failures": {}}),
    Row("§5/#3 a row sent again after it came back is not counted again (it left the in-flight window once)",
        (add(1, 1), add(2, 0), offer(1, 2), settle(1, 1, "released")), Credit({2: 2}),
        (send(2, 1, 0, first=False), send(2, 2), CountSent(1)), {"outstanding": {1: 2, 2: 2}}),
    Row("§5/#8 released, no credit left: it waits at the head of the queue",
        (add(1, 1), offer(1, 2)), settle(1, 1, "released"), (), {"pending": (1, 2)}),
    Row("§5/#8 modified with neither flag: as released",
        (add(1, 2), offer(1)), settle(1, 1, "modified"), (send(1, 1, 0, first=False),)),
    Row("§5/#9 modified(delivery-failed): recorded as failed, delivery-count + 1",
        (add(1, 2), offer(1)), settle(1, 1, "modified-failed"),
        (record(1, FAILED, 1), send(1, 1, 1, first=False)), {"failures": {1: 1}}),
    Row("§5/#10 modified(undeliverable-here): parked, not sent back to the refusing link",
        (add(1, 5), offer(1)), settle(1, 1, "undeliverable"),
        (), {"parked": {1: frozenset({1})}, "failures": {}}),
    Row("§5/#4 a parked row goes to a link that did not refuse it, before the queue head",
        (add(1, 1), add(2, 0), offer(1, 2), settle(1, 1, "undeliverable")), Credit({2: 1}),
        (send(2, 1, 0, first=False),), {"parked": {}, "pending": (2,)}),
    Row("§5/#4 a parked row waits for a new link, which gets it",
        (add(1, 1), offer(1), settle(1, 1, "undeliverable")), add(2, 1),
        (send(2, 1, 0, first=False),), {"parked": {}}),
    Row("§5/#13 the refusing link goes: its refusal is lifted, the row returns to the queue",
        (add(1, 1), add(2, 0), offer(1), settle(1, 1, "undeliverable")), RemoveConsumer(1),
        (), {"parked": {}, "pending": (1,), "consumers": (2,)}),
    Row("§5/#9 #10 modified(undeliverable-here, delivery-failed): counted and parked",
        (add(1, 5), offer(1)), settle(1, 1, "undeliverable-failed"),
        (record(1, FAILED, 1),), {"parked": {1: frozenset({1})}, "failures": {1: 1}}),
    Row("§5/#11 rejected: dead-lettered with its error, never redelivered",
        (add(1, 1), offer(1)), settle(1, 1, "rejected", error="app:bad-order"),
        (dead(1, REJECTED, 0, 1, "app:bad-order"),), {"acked": {1}, "pending": ()}, failures={}),
    Row("§5/#12 modified(delivery-failed) reaching max_delivery_count: dead-lettered",
        (add(1, 1), offer(1)), settle(1, 1, "modified-failed"),
        (dead(1, MAX, 10, 1),), {"acked": {1}, "failures": {}}, failures={1: 9}),
    Row("§5/#12 max_delivery_count 0: no limit",
        (add(1, 2), offer(1)), settle(1, 1, "modified-failed"),
        (record(1, FAILED, 1), send(1, 1, 1001, first=False)), limits=Limits(0), failures={1: 1000}),
    Row("#7 a settlement for a row not outstanding on that consumer does nothing",
        (add(1, 1), add(2, 1), offer(1)), settle(2, 1, "accepted"), (), {"outstanding": {1: 1}}),
    # ---- link, session, connection lost (#13)
    Row("§5/#13 a link goes: its unsettled rows fail (count + 1) and go back in seq order",
        (add(1, 5), add(2, 0), offer(1, 2)), RemoveConsumer(1),
        (record(2, FAILED, 1), record(1, FAILED, 1)), {"pending": (1, 2), "failures": {1: 1, 2: 1}, "outstanding": {}}),
    Row("§5/#13 ... and another link gets them marked redelivered",
        (add(1, 5), add(2, 0), offer(1, 2), RemoveConsumer(1)), Credit({2: 5}),
        (send(2, 1, 1, first=False), send(2, 2, 1, first=False))),
    Row("§5/#12 #13 a lost delivery reaching max_delivery_count: dead-lettered",
        (add(1, 5), offer(1)), RemoveConsumer(1), (dead(1, MAX, 2, 1),), {"pending": ()},
        limits=Limits(2), failures={1: 1}),
    # ---- rows given back go to whoever the round-robin reaches (#21)
    Row("§5/#13/#21 requeued rows go round-robin to the consumers with credit, one that joined since included",
        (add(1, 1000), add(2, 1000), offer(1, 2, 3, 4, 5, 6, 7, 8), add(3, 1000)), RemoveConsumer(2),
        (record(8, FAILED, 2), record(6, FAILED, 2), record(4, FAILED, 2), record(2, FAILED, 2),
         send(1, 2, 1, first=False), send(3, 4, 1, first=False), send(1, 6, 1, first=False),
         send(3, 8, 1, first=False)),
        {"outstanding": {1: 1, 3: 1, 5: 1, 7: 1, 2: 1, 4: 3, 6: 1, 8: 3}, "consumers": (1, 3)}),
    Row("§5/#8/#21 released rows go round-robin to the consumers with credit, one that joined since included",
        (add(1, 1000), add(2, 2), offer(1, 2, 3, 4), add(3, 1000), settle(2, 2, "released")),
        settle(2, 4, "released"),
        (send(3, 4, 0, first=False),), {"outstanding": {1: 1, 2: 1, 3: 1, 4: 3}}),
    Row("§5/#14/#21 a requeued row waiting for credit goes to a consumer that joined since, when its credit comes",
        (add(1, 1), offer(1), add(2, 0), RemoveConsumer(1)), Credit({2: 5}),
        (send(2, 1, 1, first=False),), {"outstanding": {1: 2}}),
    # ---- shutdown (#19)
    Row("#19 shutdown: every outstanding row fails (count + 1)",
        (add(1, 1), offer(1, 2)), Shutdown(),
        (record(1, FAILED, 1),), {"outstanding": {}, "pending": (1, 2), "failures": {1: 1}}),
    Row("#19 after shutdown nothing is sent",
        (add(1, 1), offer(1), Shutdown()), Credit({1: 5}), ()),
    Row("#19 shutdown at the limit dead-letters",
        (add(1, 1), offer(1)), Shutdown(), (dead(1, MAX, 10, 1),), failures={1: 9}),
    Row("#19/txn shutdown fails the rows transactions hold",
        (add(1, 1), offer(1), txn_settle(1, 1, "accepted")), Shutdown(),
        (record(1, FAILED, 1),), {"held": {}}),
    # ---- drop (#20)
    Row("#20 drop: consumers and queued rows forgotten, held rows kept",
        (add(1, 1), offer(1, 2), txn_settle(1, 1, "accepted")), Drop(),
        (), {"consumers": (), "pending": (), "held": {T: (1,)}}),
    # ---- transactions (#15-#18)
    Row("txn/#15 settled in a transaction: held, not outstanding, nothing recorded yet",
        (add(1, 1), offer(1)), txn_settle(1, 1, "accepted"),
        (), {"outstanding": {}, "held": {T: (1,)}, "acked": set()}),
    Row("txn/#15 a held row is not requeued when its link goes",
        (add(1, 1), add(2, 5), offer(1), txn_settle(1, 1, "released")), RemoveConsumer(1),
        (), {"held": {T: (1,)}, "pending": ()}),
    Row("txn/#15 a transactional settlement from another consumer does nothing",
        (add(1, 1), offer(1)), txn_settle(2, 1, "accepted"), (), {"outstanding": {1: 1}, "held": {}}),
    Row("txn/#16 commit of accepted: acknowledged",
        (add(1, 1), offer(1), txn_settle(1, 1, "accepted")), Discharge(T, commit=True),
        (record(1, ACCEPTED, 1),), {"acked": {1}, "held": {}}),
    Row("txn/#16 commit of released: back, count unchanged, first-acquirer false",
        (add(1, 2), offer(1), txn_settle(1, 1, "released")), Discharge(T, commit=True),
        (send(1, 1, 0, first=False),)),
    Row("txn/#16 commit of modified(delivery-failed): count + 1",
        (add(1, 2), offer(1), txn_settle(1, 1, "modified-failed")), Discharge(T, commit=True),
        (record(1, FAILED, 1), send(1, 1, 1, first=False))),
    Row("txn/#16 commit of modified(undeliverable-here): parked away from its consumer",
        (add(1, 2), offer(1), txn_settle(1, 1, "undeliverable")), Discharge(T, commit=True),
        (), {"parked": {1: frozenset({1})}}),
    Row("txn/#16 commit of undeliverable-here after its consumer went: back to the queue",
        (add(1, 2), add(2, 0), offer(1), txn_settle(1, 1, "undeliverable"), RemoveConsumer(1)),
        Discharge(T, commit=True), (), {"parked": {}, "pending": (1,)}),
    Row("txn/#16 commit of rejected: dead-lettered with its error",
        (add(1, 1), offer(1), txn_settle(1, 1, "rejected", error="app:no")), Discharge(T, commit=True),
        (dead(1, REJECTED, 0, 1, "app:no"),), {"acked": {1}}),
    Row("txn/#16 commit of modified(delivery-failed) at the limit: dead-lettered",
        (add(1, 1), offer(1), txn_settle(1, 1, "modified-failed")), Discharge(T, commit=True),
        (dead(1, MAX, 10, 1),), failures={1: 9}),
    Row("txn/#16 commit applies outcomes of a consumer that has gone",
        (add(1, 1), offer(1), txn_settle(1, 1, "accepted"), RemoveConsumer(1)), Discharge(T, commit=True),
        (record(1, ACCEPTED, 1),), {"acked": {1}}),
    Row("txn/#17 rollback: back marked redelivered, count + 1 (recorded as failed)",
        (add(1, 2), offer(1), txn_settle(1, 1, "accepted")), Discharge(T, commit=False),
        (record(1, FAILED, 1), send(1, 1, 1, first=False)), {"acked": set(), "failures": {1: 1}}),
    Row("txn/#17 rollback of several rows: back at the head of the queue in seq order",
        (add(1, 2), offer(1, 2, 3), txn_settle(1, 2, "rejected"), txn_settle(1, 1, "accepted")),
        Discharge(T, commit=False),
        (record(2, FAILED, 1), record(1, FAILED, 1)), {"pending": (1, 2, 3), "failures": {1: 1, 2: 1}}),
    Row("txn/#17 rollback at max_delivery_count: dead-lettered",
        (add(1, 1), offer(1), txn_settle(1, 1, "accepted")), Discharge(T, commit=False),
        (dead(1, MAX, 10, 1),), {"acked": {1}}, failures={1: 9}),
    Row("txn/#18 discharge of an unknown transaction: nothing",
        (add(1, 1), offer(1), txn_settle(1, 1, "accepted")), Discharge(b"other", commit=True),
        (), {"held": {T: (1,)}}),
    Row("release/#22 a partition handed over: its waiting rows forgotten and counted, the others stay",
        (add(1, 1), offer(1, P1, P1 + 1, 2)), Release(frozenset({1})),
        (CountSent(2),), {"pending": (2,), "outstanding": {1: 1}}),
    Row("release/#22 its sent rows stay outstanding until settled",
        (add(1, 2), offer(P1, P1 + 1, 2)), Release(frozenset({1})),
        (), {"pending": (2,), "outstanding": {P1: 1, P1 + 1: 1}}),
    Row("release/#22 a row given back is forgotten, not counted again",
        (add(1, 1), offer(P1), offer(2), settle(1, P1, "released")), Release(frozenset({1})),
        (), {"pending": (2,), "outstanding": {}}),
    # ---- a run of dispositions as one event (#23)
    Row("#23 several settlements at once: each applied in order, as its own event would be",
        (add(1, 3), add(2, 2), offer(1, 2, 3, 4, 5)),
        SettleAll((settle(1, 1, "accepted"), settle(2, 2, "accepted"), settle(1, 3, "rejected", error="app:x"),
                   settle(2, 4, "accepted"))),
        (record(1, ACCEPTED, 1), record(2, ACCEPTED, 2), dead(3, REJECTED, 0, 1, "app:x"), record(4, ACCEPTED, 2)),
        {"acked": {1, 2, 3, 4}, "outstanding": {5: 1}}),
    Row("#23 a released row among them is sent again before the next settlement is applied",
        (add(1, 3), add(2, 1), offer(1, 2, 3)),
        SettleAll((settle(1, 1, "released"), settle(2, 2, "accepted"), settle(1, 3, "modified-failed"))),
        (send(1, 1, 0, first=False), record(2, ACCEPTED, 2), record(3, FAILED, 1)),
        {"outstanding": {1: 1}, "pending": (3,), "failures": {3: 1}}),
]


def _state(row: Row) -> tuple[SubscriptionDispatch, list[Effect]]:
    sub = SubscriptionDispatch(AckedSeqs(row.acked), dict(row.failures), row.limits)
    for event in row.given:
        sub.handle(event, row.now)
    return sub, sub.handle(row.event, row.now)


def _view(sub: SubscriptionDispatch, name: str) -> Any:
    if name == "acked":
        return set(sub.acked)  # the explicit seqs (no row here moves the floor)
    if name == "failures":
        return sub.failures
    if name.startswith("credit("):
        return sub.credit(int(name[7:-1]))
    return getattr(sub, name)


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_dispatch_table(row: Row) -> None:
    sub, effects = _state(row)
    assert effects == list(row.effects)
    for name, value in row.then.items():
        assert _view(sub, name) == value, name


def test_ids_are_unique() -> None:
    ids = [r.id for r in ROWS]
    assert len(ids) == len(set(ids))


def test_every_effect_kind_is_produced() -> None:
    produced = {type(e) for row in ROWS for e in _state(row)[1]}
    assert produced == set(typing.get_args(Effect))


def test_every_event_kind_is_a_row() -> None:
    assert {type(r.event) for r in ROWS} == set(typing.get_args(Event))


# ------------------------------------------------------------------------ properties


def test_a_row_is_never_outstanding_on_two_consumers_or_sent_twice_while_open() -> None:
    """Many consumers joining, leaving, settling every way: at any time each open seq is in at
    most one place, every offered row ends acknowledged or dead-lettered, and each row leaves the
    tailer's in-flight window once (CountSent totals the rows ever sent, redeliveries apart)."""
    import random

    rng = random.Random(7)
    sub = SubscriptionDispatch(AckedSeqs(), {}, Limits(4))
    seqs = list(range(1, 60))
    consumers: list[int] = []
    next_id = 0
    done: set[int] = set()
    ever_sent: set[int] = set()
    counted = 0
    assert sub.handle(offer(*seqs), NOW) == []  # no consumer yet: nothing leaves the queue
    for step in range(3000):
        choice = rng.random()
        if choice < 0.1 or not consumers:
            next_id += 1
            consumers.append(next_id)
            effects = sub.handle(add(next_id, rng.randint(0, 3)), NOW)
        elif choice < 0.15:
            gone = consumers.pop(rng.randrange(len(consumers)))
            effects = sub.handle(RemoveConsumer(gone), NOW)
        elif choice < 0.4:
            effects = sub.handle(Credit({c: rng.randint(0, 3) for c in consumers}), NOW)
        elif choice < 0.5 and sub.held:
            effects = sub.handle(Discharge(T, commit=rng.random() < 0.5), NOW)
        else:
            open_ = sub.outstanding
            if not open_:
                continue
            seq = rng.choice(sorted(open_))
            how = rng.choice(list(SETTLEMENTS))
            if rng.random() < 0.2:
                effects = sub.handle(txn_settle(open_[seq], seq, how), NOW)
            else:
                effects = sub.handle(settle(open_[seq], seq, how), NOW)
        for e in effects:
            if isinstance(e, Send):
                assert e.row.seq not in done
                ever_sent.add(e.row.seq)
            if isinstance(e, DeadLetterRow) or (isinstance(e, Record) and e.outcome != FAILED):
                done.add(e.row.seq)
            if isinstance(e, CountSent):
                counted += e.count
        assert counted == len(ever_sent), step
        places = [*sub.pending, *sub.parked, *sub.outstanding, *(s for held in sub.held.values() for s in held)]
        assert len(places) == len(set(places)), step
        assert not set(places) & done
        assert set(places) | done == set(seqs), step


def test_settle_all_has_the_effects_of_its_settles_one_by_one() -> None:
    """#23 as a property: two states given the same random events, one taking each run of
    settlements as one SettleAll, the other one Settle at a time, give the same effects and end
    in the same state."""
    import random

    rng = random.Random(23)
    together = SubscriptionDispatch(AckedSeqs(), {}, Limits(3))
    alone = SubscriptionDispatch(AckedSeqs(), {}, Limits(3))
    seqs = list(range(1, 200))
    for sub in (together, alone):
        sub.handle(offer(*seqs), NOW)
    consumers: list[int] = []
    for step in range(1500):
        choice = rng.random()
        events: list[Event]
        if choice < 0.1 or not consumers:
            consumers.append(step + 1)
            events = [add(step + 1, rng.randint(0, 4))]
        elif choice < 0.15:
            events = [RemoveConsumer(consumers.pop(rng.randrange(len(consumers))))]
        elif choice < 0.4:
            events = [Credit({c: rng.randint(0, 4) for c in consumers})]
        else:
            open_ = together.outstanding
            if not open_:
                continue
            picked = rng.sample(sorted(open_), min(len(open_), rng.randint(1, 6)))
            # A settlement of a row not outstanding on that consumer (seq 0) is in a run too.
            run = [settle(open_[seq], seq, rng.choice(list(SETTLEMENTS))) for seq in picked] + [settle(1, 0, "accepted")]
            rng.shuffle(run)
            assert together.handle(SettleAll(tuple(run)), NOW) == [e for one in run for e in alone.handle(one, NOW)], step
            continue
        for event in events:
            assert together.handle(event, NOW) == alone.handle(event, NOW), step
        for view in ("pending", "parked", "outstanding", "held", "failures", "consumers"):
            assert _view(together, view) == _view(alone, view), (step, view)
        assert set(together.acked) == set(alone.acked), step


GIVE_BACK: dict[str, tuple[bool, list[Event]]] = {
    # how consumer 2 gives its rows (the even seqs) back: (keeps its credit, the events)
    "released after a drain (Qpid JMS closing a consumer)": (
        False, [Credit({2: 0}), *(settle(2, s, "released") for s in range(2, 21, 2))]),
    "released, the releaser keeps its credit": (True, [settle(2, s, "released") for s in range(2, 21, 2)]),
    "modified(delivery-failed) after a drain": (
        False, [Credit({2: 0}), *(settle(2, s, "modified-failed") for s in range(2, 21, 2))]),
    "link lost": (False, [RemoveConsumer(2)]),
    "rollback after a drain": (
        False, [*(txn_settle(2, s, "accepted") for s in range(2, 21, 2)), Credit({2: 0}), Discharge(T, commit=False)]),
}


@pytest.mark.parametrize("how", GIVE_BACK)
def test_given_back_rows_spread_over_the_consumers_with_credit(how: str) -> None:
    """#21: consumers 1 and 2 share rows 1-20; consumer 3 joins; 2 gives its ten back one way or
    another. They go round-robin over the consumers with credit, the one that joined after they
    were first sent included (and 2 itself if it kept credit), not all to one of them."""
    keeps_credit, events = GIVE_BACK[how]
    sub = SubscriptionDispatch(AckedSeqs(), {}, TEN)
    setup: list[Event] = [add(1, 1000), add(2, 1000), offer(*range(1, 21)), add(3, 1000)]
    for given in setup:
        sub.handle(given, NOW)
    assert sub.outstanding == {s: 2 - s % 2 for s in range(1, 21)}
    got: dict[int, list[int]] = {1: [], 2: [], 3: []}
    for event in events:
        for effect in sub.handle(event, NOW):
            if isinstance(effect, Send):
                got[effect.consumer].append(effect.row.seq)
    takers = [1, 2, 3] if keeps_credit else [1, 3]
    assert sorted(s for seqs in got.values() for s in seqs) == list(range(2, 21, 2)), got
    counts = [len(got[c]) for c in takers]
    assert min(counts) >= 10 // len(takers) and max(counts) - min(counts) <= 1, got
    if not keeps_credit:
        assert got[2] == [], got


def test_credit_of_is_read_when_a_pass_starts_and_only_then() -> None:
    """``credit_of`` replaces the credit set before, once per event, and an event that
    dispatches nothing (an acceptance) reads none."""
    sub = SubscriptionDispatch(AckedSeqs(), {}, TEN)
    sub.handle(add(1, 0), NOW)
    sub.handle(add(2, 0), NOW)
    reads: list[int] = []

    def links(credit: dict[int, int]) -> Any:
        def credit_of(consumer: int) -> int:
            reads.append(consumer)
            return credit[consumer]

        return credit_of

    # Credit set before (0) is replaced by what the links have when the pass starts.
    assert sub.handle(offer(1, 2, 3), NOW, links({1: 1, 2: 5})) == [send(1, 1), send(2, 2), send(2, 3), CountSent(3)]
    assert sorted(reads) == [1, 2]  # once per consumer, though the pass went round twice
    reads.clear()
    assert sub.handle(settle(1, 1, "accepted"), NOW, links({1: 9, 2: 9})) == [record(1, ACCEPTED, 1)]
    assert reads == []  # nothing to dispatch: no link read
    assert sub.credit(2) == 3  # the state's own count after its sends, not the links' 9
    assert sub.handle(settle(2, 2, "released"), NOW, links({1: 0, 2: 1})) == [send(2, 2, first=False)]
    assert sorted(reads) == [1, 2]
    # Without credit_of the credit the state holds is used: none left after that send, then one.
    assert sub.handle(settle(2, 3, "released"), NOW) == []
    sub.set_credit(2, 1)
    assert sub.handle(Credit({}), NOW) == [send(2, 3, first=False)]


# ------------------------------------------------------------------------ the adapter
# connectors.amqp.dispatcher.Dispatcher applies the effects to proton links: real ones here, each
# with a client on the other end (tests/proton_pair.py). What the client receives is read back as
# stand-ins with __slots__ for the dispositions the adapter is handed (the adapter may not hang
# attributes on them); how proton's own deliveries read as those is tests/unit/test_proton_events.py.


class _Remote:
    __slots__ = ("condition", "failed", "undeliverable")

    def __init__(self) -> None:
        self.failed = self.undeliverable = False
        self.condition = None


class _Delivery:
    """A delivery the client received, as the adapter's ``settled`` reads a disposition of it."""

    __slots__ = ("tag", "payload", "settled", "local_settled", "remote_state", "remote")

    def __init__(self, tag: str, payload: bytes, sent_settled: bool) -> None:
        self.tag, self.payload = tag, payload
        self.settled = False  # by the peer (the client), as proton says
        self.local_settled = sent_settled  # by the adapter: on sending, or by ``settle``
        self.remote_state = 0
        self.remote = _Remote()

    def settle(self) -> None:
        self.local_settled = True

    @property
    def delivery(self) -> _Delivery:
        """As connectors.amqp.wire.proton_events ``Transfer.delivery``: proton's view of the same."""
        return self


class _Link:
    """A consumer's link: the server side's real proton sender (``sender``, what the adapter is
    given) and its client, whose receiver grants ``credit``; ``sent`` is what the client got."""

    def __init__(self, container: str, credit: int, *, presettled: bool = False) -> None:
        import proton

        from tests.proton_pair import LinkedPair

        self._pair = LinkedPair(proton.Collector(), container, credit)
        self.sender = self._pair.sender
        if presettled:  # as the front end echoes a pre-settled consumer's mode
            self.sender.snd_settle_mode = proton.Link.SND_SETTLED
        self._got: list[_Delivery] = []

    @property
    def sent(self) -> list[_Delivery]:
        """Every delivery the client has received, in order (the sender's frames moved first)."""
        self._got += [_Delivery(*arrived) for arrived in self._pair.arrived()]
        return self._got

    @property
    def credit(self) -> int:
        """The sender link's credit."""
        return int(self.sender.credit)

    @credit.setter
    def credit(self, credit: int) -> None:
        """The client grants credit until the sender has ``credit``."""
        from tests.proton_pair import pump

        self._pair.receiver.flow(credit - self.credit)
        pump(self._pair.client_transport, self._pair.server_transport)
        assert self.credit == credit

    def drain(self) -> None:
        """The client asks for a drain (as Qpid JMS does before it closes a consumer); the
        sender's link then has its drain mode set, credit unchanged until it is ``drained``."""
        from tests.proton_pair import pump

        self._pair.receiver.drain(0)
        pump(self._pair.client_transport, self._pair.server_transport)
        assert self.sender.drain_mode


class _Adapter:
    """A Dispatcher recording what it submits to the committer, with one subscription ``k``
    opened as generation :data:`TABLES`."""

    def __init__(self, limits: Limits = TEN) -> None:
        from connectors.amqp.dispatcher import Dispatcher

        self.submitted: list[Any] = []
        self.sent_counts: list[int] = []
        self.d = Dispatcher(self.submitted.append, lambda _k, n: self.sent_counts.append(n), limits=limits, clock=lambda: NOW)
        self.acked = self.d.open("k", TABLES)

    def settled(self, dlv: Any) -> None:
        """A disposition as the front end hands it over: kept, then applied at the end of its
        run of delivery events (connectors/amqp/handler.py)."""
        self.d.settle_later(dlv)
        self.d.apply_settled()

    @property
    def acks(self) -> list[tuple[str, int, str, str]]:
        """The acknowledgements recorded in TABLES' ack log: (key, seq, outcome, consumer)."""
        from sharedsub.runtime.commit_requests import Ack

        out = []
        for req in self.submitted:
            if isinstance(req, Ack):
                assert req.table == TABLES.ack_table
                out += [("k", seq, str(req.outcome), req.consumer) for seq in req.seqs]
        return out

    @property
    def dead(self) -> list[tuple[object, ...]]:
        """The dead letters recorded: (seq, reason, delivery count, error condition, consumer)."""
        from sharedsub.runtime.commit_requests import DeadLetterMessage

        out: list[tuple[object, ...]] = []
        for req in self.submitted:
            if isinstance(req, DeadLetterMessage):
                assert (req.table, req.ack_table) == (TABLES.dead_letter_table, TABLES.ack_table)
                row = req.row
                out.append((row["seq"], row["reason"], row["delivery_count"], row["error_condition"], row["consumer"]))
        return out

    def rows(self, *seqs: int) -> list[Any]:
        from proton import Message

        from sharedsub.runtime.tailer import Row

        return [Row("t", s, Message(body=f"m{s}").encode()) for s in seqs]


def _header(payload: bytes) -> tuple[int, bool]:
    """(delivery-count, first-acquirer) of an encoded message."""
    from proton import Message

    msg = Message()
    msg.decode(payload)
    return msg.delivery_count, bool(msg.first_acquirer)


def test_adapter_sends_round_robin_and_acknowledges_an_accept() -> None:
    import proton

    a = _Adapter()
    one, two = _Link("c1", 1), _Link("c2", 5)
    a.d.add_consumer("k", one.sender)
    a.d.add_consumer("k", two.sender)
    a.d.offer("k", a.rows(1, 2, 3))
    assert [len(one.sent), len(two.sent)] == [1, 2]
    assert a.sent_counts == [3]
    dlv = one.sent[0]
    dlv.remote_state, dlv.settled = proton.Delivery.ACCEPTED, True
    a.settled(dlv)
    assert dlv.local_settled
    assert a.acks == [("k", 1, "accepted", "c1")]
    bare = two.sent[0]
    bare.settled = True  # settled with no outcome: accepted
    a.settled(bare)
    assert a.acks[-1] == ("k", 2, "accepted", "c2")


def test_adapter_applies_kept_dispositions_as_one_ack_per_outcome_and_consumer_in_order() -> None:
    """settle_later keeps what dispositions decide until apply_settled (the handler's end of a
    run of delivery events): then the accepts of one consumer are one Ack, a reject between them
    splits them around its dead letter, and the committer gets it all in the order settled."""
    import proton

    from sharedsub.runtime.commit_requests import Ack, DeadLetterMessage

    a = _Adapter()
    one, two = _Link("c1", 4), _Link("c2", 2)
    a.d.add_consumer("k", one.sender)
    a.d.add_consumer("k", two.sender)
    a.d.offer("k", a.rows(1, 2, 3, 4, 5, 6))
    settled = [(one.sent[0], proton.Delivery.ACCEPTED), (one.sent[1], proton.Delivery.ACCEPTED),
               (two.sent[0], proton.Delivery.ACCEPTED), (one.sent[2], proton.Delivery.REJECTED),
               (one.sent[3], proton.Delivery.ACCEPTED)]
    for dlv, state in settled:
        dlv.remote_state, dlv.settled = state, True
        a.d.settle_later(dlv)  # type: ignore[arg-type]
        assert dlv.local_settled  # with its peer at once
    assert a.submitted == []
    a.d.apply_settled()
    kinds = [(type(r).__name__, list(r.seqs) if isinstance(r, Ack) else r.row["seq"]) for r in a.submitted
             if isinstance(r, (Ack, DeadLetterMessage))]
    # rows 1, 3, 5, 6 went to c1 and 2, 4 to c2 (round-robin, c2's credit spent after two)
    assert kinds == [("Ack", [1, 3]), ("Ack", [2]), ("DeadLetterMessage", 5), ("Ack", [6])]
    assert [c for _k, _s, _o, c in a.acks] == ["c1", "c1", "c2", "c1"]


def test_adapter_applies_kept_dispositions_before_any_other_event() -> None:
    """A disposition kept for later is applied before the dispatcher's next event (here its
    link detaching): the row it accepted is acknowledged, not failed and sent again."""
    import proton

    a = _Adapter()
    one, two = _Link("c1", 1), _Link("c2", 1)
    a.d.add_consumer("k", one.sender)
    a.d.add_consumer("k", two.sender)
    a.d.offer("k", a.rows(1, 2))
    dlv = one.sent[0]
    dlv.remote_state, dlv.settled = proton.Delivery.ACCEPTED, True
    a.d.settle_later(dlv)  # type: ignore[arg-type]
    assert a.d.remove_consumer("k", one.sender) == 1
    assert a.acks == [("k", 1, "accepted", "c1")]
    assert a.d.draining("k", frozenset({0})) == 1  # row 2, on c2


def test_adapter_presettled_consumer_is_settled_and_acknowledged_on_send() -> None:
    a = _Adapter()
    link = _Link("c1", 5, presettled=True)
    a.d.add_consumer("k", link.sender)
    a.d.offer("k", a.rows(1, 2))
    assert all(d.local_settled for d in link.sent)
    assert [s for _k, s, o, _c in a.acks if o == "accepted"] == [1, 2]


def test_adapter_transaction_commit_applies_the_held_outcomes() -> None:
    import proton

    a = _Adapter()
    link, other = _Link("c1", 2), _Link("c2", 0)
    a.d.add_consumer("k", link.sender)
    a.d.add_consumer("k", other.sender)
    a.d.offer("k", a.rows(1, 2))
    first, second = link.sent
    a.d.settle_transactional(first, b"T1", proton.Delivery.ACCEPTED)  # type: ignore[arg-type]
    a.d.settle_transactional(  # type: ignore[arg-type]
        second, b"T1", proton.Delivery.REJECTED, condition=proton.Condition("app:no", "bad")
    )
    assert first.local_settled and second.local_settled
    assert a.acks == [] and a.dead == []
    # The link goes before the discharge: its settled-in-a-transaction rows are not requeued.
    assert a.d.remove_consumer("k", link.sender) == 1
    other.credit = 5
    a.d.credit_arrived(other.sender)
    assert other.sent == []
    a.d.discharge(b"T1", True)
    assert a.acks == [("k", 1, "accepted", "c1")]
    assert a.dead == [(2, "rejected", 0, "app:no", "c1")]
    a.d.discharge(b"T1", True)  # already discharged: unknown now, nothing happens
    a.d.discharge(b"never", False)
    assert len(a.acks) == 1 and len(a.dead) == 1


def test_adapter_transaction_rollback_redelivers_marked_redelivered() -> None:
    import proton

    a = _Adapter()
    link, other = _Link("c1", 1), _Link("c2", 0)
    a.d.add_consumer("k", link.sender)
    a.d.add_consumer("k", other.sender)
    a.d.offer("k", a.rows(1))
    (dlv,) = link.sent
    assert dlv.payload == a.rows(1)[0].message  # a first delivery goes out as published
    a.d.settle_transactional(dlv, b"T2", proton.Delivery.ACCEPTED)  # type: ignore[arg-type]
    other.credit = 1
    a.d.discharge(b"T2", False)
    assert a.acks == [("k", 1, "failed", "c1")]
    (again,) = other.sent
    assert _header(again.payload) == (1, False)
    assert a.d.delivery_state_sizes() == {TABLES.table: 1}  # its failed delivery, no acknowledged seq


def test_adapter_transaction_outlives_the_subscriptions_last_consumer() -> None:
    """A consumer settles in a transaction and detaches (the subscription goes idle here); the
    commit still acknowledges, and a rollback's row comes back when a consumer attaches again."""
    import proton

    a = _Adapter()
    link = _Link("c1", 2)
    a.d.add_consumer("k", link.sender)
    a.d.offer("k", a.rows(1, 2))
    one, two = link.sent
    a.d.settle_transactional(one, b"C", proton.Delivery.ACCEPTED)  # type: ignore[arg-type]
    a.d.settle_transactional(two, b"R", proton.Delivery.ACCEPTED)  # type: ignore[arg-type]
    assert a.d.remove_consumer("k", link.sender) == 0
    a.d.drop("k")
    assert a.d.consumers("k") == 0
    a.d.discharge(b"C", True)
    assert a.acks == [("k", 1, "accepted", "c1")]
    a.d.open("k", TABLES)
    again = _Link("c3", 5)
    a.d.add_consumer("k", again.sender)
    a.d.offer("k", a.rows(2))  # the backlog loaded again: row 2 is still held by R
    assert again.sent == []
    a.d.discharge(b"R", False)
    assert a.acks[-1] == ("k", 2, "failed", "c1")
    (redelivered,) = again.sent
    assert _header(redelivered.payload) == (1, False)


def test_adapter_refuses_an_unknown_outcome_code() -> None:
    a = _Adapter()
    link = _Link("c1", 1)
    a.d.add_consumer("k", link.sender)
    a.d.offer("k", a.rows(1))
    with pytest.raises(ValueError, match="not an outcome"):
        a.d.settle_transactional(link.sent[0], b"T", 0x23)  # type: ignore[arg-type]


def test_adapter_shutdown_fails_outstanding_and_held_rows() -> None:
    import proton

    a = _Adapter()
    link = _Link("c1", 2)
    a.d.add_consumer("k", link.sender)
    a.d.offer("k", a.rows(1, 2))
    a.d.settle_transactional(link.sent[0], b"T", proton.Delivery.ACCEPTED)  # type: ignore[arg-type]
    a.d.fail_outstanding()
    assert sorted(a.acks) == [("k", 1, "failed", "c1"), ("k", 2, "failed", "c1")]
    a.d.discharge(b"T", True)
    link.credit = 5
    a.d.credit_arrived(link.sender)
    assert len(link.sent) == 2 and len(a.acks) == 2


def test_adapter_leaves_a_transactional_disposition_to_the_coordinator() -> None:
    """The handler hands every disposition to ``settled``; one with a transactional state
    (0x34) must not count as settled without an outcome (accepted)."""
    import proton

    a = _Adapter()
    link = _Link("c1", 1)
    a.d.add_consumer("k", link.sender)
    a.d.offer("k", a.rows(1))
    (dlv,) = link.sent
    dlv.remote_state, dlv.settled = 0x34, True
    a.settled(dlv)
    assert a.acks == [] and not dlv.local_settled
    a.d.settle_transactional(dlv, b"T", proton.Delivery.RELEASED)  # type: ignore[arg-type]
    a.settled(dlv)  # in either order
    a.d.discharge(b"T", True)
    assert a.acks == []
    link.credit = 1
    a.d.credit_arrived(link.sender)
    assert len(link.sent) == 2


def test_adapter_credit_arrived_reads_the_flowed_link_only() -> None:
    """A flow on one link dispatches with that link's credit read and every other consumer's
    credit as the state counted it (exact: it changes only by sends, flows and drains)."""
    a = _Adapter()
    one, two = _Link("c1", 0), _Link("c2", 0)
    a.d.add_consumer("k", one.sender)
    a.d.add_consumer("k", two.sender)
    a.d.offer("k", a.rows(1, 2, 3, 4, 5, 6))
    one.credit = 2
    a.d.credit_arrived(one.sender)
    assert [len(one.sent), len(two.sent)] == [2, 0]
    one.credit = 3  # a flow whose event has not been handled yet: not read by the next pass
    two.credit = 1
    a.d.credit_arrived(two.sender)
    assert [len(one.sent), len(two.sent)] == [2, 1]
    a.d.credit_arrived(one.sender)  # now it is
    assert [len(one.sent), len(two.sent)] == [5, 1]
    assert sorted(int(_body(d.payload)[1:]) for d in one.sent + two.sent) == [1, 2, 3, 4, 5, 6]


def _body(payload: bytes) -> str:
    from proton import Message

    msg = Message()
    msg.decode(payload)
    return str(msg.body)


def test_adapter_requeued_rows_spread_to_a_link_that_joined_since() -> None:
    """#21 on proton links: a link that attached after the rows were first sent, with its credit
    coming in a flow after the attach (as Qpid JMS grants it), shares the rows a detached link
    gave back with the link that was there before."""
    a = _Adapter()
    one, two = _Link("c1", 1000), _Link("c2", 1000)
    a.d.add_consumer("k", one.sender)
    a.d.add_consumer("k", two.sender)
    a.d.offer("k", a.rows(*range(1, 9)))
    assert [_body(d.payload) for d in two.sent] == ["m2", "m4", "m6", "m8"]
    three = _Link("c3", 0)
    a.d.add_consumer("k", three.sender)
    three.credit = 1000
    a.d.credit_arrived(three.sender)
    assert a.d.remove_consumer("k", two.sender) == 2
    again = one.sent[4:]
    assert [_body(d.payload) for d in again] == ["m2", "m6"]
    assert [_body(d.payload) for d in three.sent] == ["m4", "m8"]
    assert {_header(d.payload) for d in again + three.sent} == {(1, False)}


def test_adapter_released_rows_spread_after_the_releasing_link_drained() -> None:
    """#21 on proton links, as Qpid JMS closes a consumer: its link drains, then releases what
    it prefetched. The released rows alternate between the link that was there before and one
    that attached after they were first sent; none goes back to the drained link."""
    import proton

    a = _Adapter()
    one, two = _Link("c1", 1000), _Link("c2", 1000)
    a.d.add_consumer("k", one.sender)
    a.d.add_consumer("k", two.sender)
    a.d.offer("k", a.rows(*range(1, 9)))
    three = _Link("c3", 1000)
    a.d.add_consumer("k", three.sender)
    two.drain()
    # What the handler does with a drain flow (connectors/amqp/handler.py on_link_flow).
    a.d.credit_arrived(two.sender)
    two.sender.drained()
    a.d.credit_drained(two.sender)
    assert two.credit == 0
    for dlv in list(two.sent):
        dlv.remote_state, dlv.settled = proton.Delivery.RELEASED, True
        a.settled(dlv)
    assert len(two.sent) == 4
    again = one.sent[4:]
    assert [_body(d.payload) for d in again] == ["m2", "m6"]
    assert [_body(d.payload) for d in three.sent] == ["m4", "m8"]
    assert {_header(d.payload) for d in again + three.sent} == {(0, False)}


def test_a_member_handing_partitions_over_waits_for_their_sent_and_held_rows() -> None:
    sub = SubscriptionDispatch(AckedSeqs(), {}, TEN)
    sub.handle(add(1, 3), NOW)
    sub.handle(offer(1, P1, P1 + 1), NOW)
    sub.handle(txn_settle(1, P1 + 1, "accepted"), NOW)
    sub.handle(Release(frozenset({1})), NOW)
    assert sub.draining(frozenset({1})) == 2  # P1 outstanding, P1 + 1 held by the transaction
    sub.handle(settle(1, P1, "accepted"), NOW)
    sub.handle(Discharge(T, commit=True), NOW)
    assert sub.draining(frozenset({1})) == 0 and sub.draining(frozenset({0})) == 1
