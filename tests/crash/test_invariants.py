"""The crash-run invariant checker on hand-made inputs: a consistent run passes, and each rule
catches the violation it is there for (and lets through what it must allow)."""

from __future__ import annotations

import dataclasses

from tests.crash.invariants import (
    Accept,
    ClientLog,
    Delivery,
    Publish,
    Replay,
    Stored,
    StoredSubscription,
    Subscription,
    check,
    rules,
)

T = "orders"
S = "sub"
START = 1000.0  # wall time incarnation 0 started
RESTART = 2000.0  # wall time incarnation 1 started


def _run(n: int = 4) -> tuple[ClientLog, Stored]:
    """n messages published, accepted, stored, routed, delivered once each, accepted and acked."""
    ids = [f"m{i}" for i in range(n)]
    log = ClientLog(
        publishes=[Publish(mid, T, 10.0 + i, "accepted") for i, mid in enumerate(ids)] + [Publish("doubt", T, 50.0, None)],
        deliveries=[Delivery(S, "c1", mid, 0, 20.0 + i, 0, None) for i, mid in enumerate(ids)],
        accepts=[Accept(S, "c1", mid, 0, 20.5 + i) for i, mid in enumerate(ids)],
        subscriptions=[Subscription(S, T, 5.0)],
        incarnations=[START],
    )
    stored = Stored(
        topics={T: [(i, mid) for i, mid in enumerate(ids)]},
        subscriptions={S: StoredSubscription(1, 0, list(range(n)), [(i, START + 30 + i) for i in range(n)])},
    )
    return log, stored


def _restarted() -> tuple[ClientLog, Stored]:
    """The run of :func:`_run`, then a front-end kill and incarnation 1 (started at RESTART)."""
    log, stored = _run()
    log.incarnations.append(RESTART)
    return log, stored


def test_a_consistent_run_passes() -> None:
    log, stored = _run()
    assert check(log, stored) == []


def test_an_in_doubt_message_may_be_stored_once_or_not_at_all() -> None:
    log, stored = _run()
    assert check(log, stored) == []  # "doubt" is not in the topic
    stored.topics[T].append((4, "doubt"))
    stored.subscriptions[S].seqs.append(4)
    log.deliveries.append(Delivery(S, "c1", "doubt", 0, 60.0, 0, None))
    log.accepts.append(Accept(S, "c1", "doubt", 0, 60.5))
    stored.subscriptions[S].acks.append((4, START + 70))
    assert check(log, stored) == []


def test_topic_once_catches_a_lost_accepted_message() -> None:
    log, stored = _run()
    stored.topics[T] = [row for row in stored.topics[T] if row[1] != "m2"]
    violations = check(log, stored)
    assert "topic-once" in rules(violations)
    assert any("'m2' is not in topic" in v.detail for v in violations)


def test_topic_once_catches_a_duplicated_message() -> None:
    log, stored = _run()
    stored.topics[T].append((4, "m1"))
    stored.subscriptions[S].seqs.append(4)
    violations = [v for v in check(log, stored) if v.rule == "topic-once"]
    assert len(violations) == 1 and "'m1' is in topic 'orders' 2 times" in violations[0].detail


def test_unknown_delivery_is_caught() -> None:
    log, stored = _run()
    log.deliveries.append(Delivery(S, "c1", "ghost", 0, 30.0, 0, None))
    assert rules(check(log, stored)) >= {"unknown-delivery"}


def test_complete_catches_a_message_never_delivered() -> None:
    log, stored = _run()
    log.deliveries = [d for d in log.deliveries if d.msg_id != "m3"]
    log.accepts = [a for a in log.accepts if a.msg_id != "m3"]
    violations = check(log, stored)
    assert rules(violations) == {"complete"}
    assert "m3" in violations[0].detail


def test_complete_requires_only_messages_sent_after_the_subscription_was_created() -> None:
    log, stored = _run()
    log.subscriptions = [Subscription(S, T, 12.5)]  # m0..m2 were sent before, m3 after
    stored.subscriptions[S] = StoredSubscription(1, 3, [3], [(3, START + 33)])
    log.deliveries = [d for d in log.deliveries if d.msg_id == "m3"]
    log.accepts = [a for a in log.accepts if a.msg_id == "m3"]
    assert check(log, stored) == []
    log.deliveries, log.accepts = [], []
    assert rules(check(log, stored)) == {"complete"}


def test_a_shared_subscription_is_complete_across_its_consumers() -> None:
    log, stored = _run()
    log.deliveries = [dataclasses.replace(d, consumer="c2") if d.msg_id in ("m1", "m3") else d for d in log.deliveries]
    assert check(log, stored) == []


def test_redelivery_after_an_accept_on_the_same_incarnation_is_caught() -> None:
    log, stored = _run()
    log.deliveries.append(Delivery(S, "c2", "m1", 0, 40.0, 1, False))  # marked, but no kill since the accept
    violations = check(log, stored)
    assert rules(violations) == {"acked-redelivered"}
    assert "same incarnation" in violations[0].detail


def test_redelivery_after_a_front_end_kill_that_followed_the_accept_is_allowed() -> None:
    log, stored = _restarted()
    # m1's ack row was committed by incarnation 1 (after RESTART): the first ack was lost in the kill.
    stored.subscriptions[S].acks = [(s, at) for s, at in stored.subscriptions[S].acks if s != 1] + [(1, RESTART + 5)]
    log.deliveries.append(Delivery(S, "c1", "m1", 1, 40.0, 1, False))
    log.accepts.append(Accept(S, "c1", "m1", 1, 40.5))
    assert check(log, stored) == []


def test_redelivery_of_a_message_acked_durably_before_the_restart_is_caught() -> None:
    log, stored = _restarted()
    # m1's ack row (acked_at START + 31) was in the log before incarnation 1 started.
    log.deliveries.append(Delivery(S, "c1", "m1", 1, 40.0, 1, False))
    log.accepts.append(Accept(S, "c1", "m1", 1, 40.5))
    violations = check(log, stored)
    assert rules(violations) == {"acked-redelivered"}
    assert "committed before that incarnation started" in violations[0].detail


def test_ack_durable_catches_an_accept_of_the_last_incarnation_without_ack_row() -> None:
    log, stored = _run()
    stored.subscriptions[S].acks = [(s, at) for s, at in stored.subscriptions[S].acks if s != 2]
    violations = check(log, stored)
    assert rules(violations) == {"ack-durable", "ack-complete"}
    assert any(v.rule == "ack-durable" and "'m2'" in v.detail for v in violations)


def test_an_accept_lost_in_a_kill_must_be_made_good_by_a_later_delivery() -> None:
    log, stored = _restarted()
    stored.subscriptions[S].acks = [(s, at) for s, at in stored.subscriptions[S].acks if s != 2]
    # Accepted on incarnation 0, which was killed: not ack-durable's business, but m2 was never
    # delivered and accepted again, so the subscription still owes it.
    assert rules(check(log, stored)) == {"ack-complete"}
    log.deliveries.append(Delivery(S, "c1", "m2", 1, 40.0, 1, False))
    log.accepts.append(Accept(S, "c1", "m2", 1, 40.5))
    stored.subscriptions[S].acks.append((2, RESTART + 5))
    assert check(log, stored) == []


def test_an_unmarked_redelivery_is_caught() -> None:
    log, stored = _restarted()
    stored.subscriptions[S].acks = [(s, at) for s, at in stored.subscriptions[S].acks if s != 1] + [(1, RESTART + 5)]
    log.deliveries.append(Delivery(S, "c1", "m1", 1, 40.0, 0, None))
    log.accepts.append(Accept(S, "c1", "m1", 1, 40.5))
    violations = check(log, stored)
    assert rules(violations) == {"redelivery-marked"}
    # first-acquirer false is the default, on first deliveries too: it does not mark one.
    log.deliveries[-1] = Delivery(S, "c1", "m1", 1, 40.0, 0, False)
    assert rules(check(log, stored)) == {"redelivery-marked"}
    log.deliveries[-1] = Delivery(S, "c1", "m1", 1, 40.0, 1, False)
    assert check(log, stored) == []


def test_table_once_catches_a_duplicate_row() -> None:
    log, stored = _run()
    stored.subscriptions[S].seqs.append(2)
    violations = check(log, stored)
    assert rules(violations) == {"table-once"}
    assert "more than once: [2]" in violations[0].detail


def test_table_once_catches_a_skipped_and_a_stray_row() -> None:
    log, stored = _run()
    stored.subscriptions[S] = StoredSubscription(1, 1, [0, 2, 3], [(i, START + 30 + i) for i in range(4)])
    details = [v.detail for v in check(log, stored) if v.rule == "table-once"]
    assert any("not in its table: [1]" in d for d in details)
    assert any("not topic seqs ≥ start_seq 1: [0]" in d for d in details)


def test_one_generation_catches_a_replaced_subscription() -> None:
    log, stored = _run()
    stored.subscriptions[S].generation = 2
    assert rules(check(log, stored)) == {"one-generation"}


def test_a_subscription_without_tables_is_reported() -> None:
    log, stored = _run()
    del stored.subscriptions[S]
    assert "table-once" in rules(check(log, stored))


# ---------------------------------------------------------------- replays, snapshots, backlog

REPLAY_WALL = START + 40.0  # wall time the replay below was asked for (its rows are stamped after)


def _replayed() -> tuple[ClientLog, Stored]:
    """The run of :func:`_run` (routed at table version 1), then a replay from version 0 that
    reopened all four acknowledged messages, which were delivered again (count 1), accepted and
    acknowledged again; the table still holds the four rows."""
    log, stored = _run()
    s = stored.subscriptions[S]
    s.routed_in = {seq: 1 for seq in range(4)}
    s.live = [0, 1, 2, 3]
    s.reopens = [(seq, REPLAY_WALL + 0.5) for seq in range(4)]
    log.replays.append(Replay(S, 0, 0, 30.0, REPLAY_WALL, 31.0, REPLAY_WALL + 1, messages=4, reopened=4, latest_version=1))
    for i in range(4):
        log.deliveries.append(Delivery(S, "c1", f"m{i}", 0, 32.0 + i, 1, False))
        log.accepts.append(Accept(S, "c1", f"m{i}", 0, 32.5 + i))
        s.acks.append((i, REPLAY_WALL + 3 + i))
    return log, stored


def test_a_replay_redelivers_accepted_messages_on_the_same_incarnation() -> None:
    log, stored = _replayed()
    assert check(log, stored) == []


def test_a_redelivery_needs_a_replay_that_reopened_the_message() -> None:
    log, stored = _replayed()
    stored.subscriptions[S].reopens = [(seq, at) for seq, at in stored.subscriptions[S].reopens if seq != 2]
    log.replays[0] = dataclasses.replace(log.replays[0], reopened=3)
    violations = check(log, stored)
    assert rules(violations) == {"acked-redelivered", "replay-covers"}
    assert any(v.rule == "acked-redelivered" and "'m2'" in v.detail for v in violations)
    assert any(v.rule == "replay-covers" and "were not reopened: [2]" in v.detail for v in violations)


def test_one_replay_allows_one_redelivery() -> None:
    log, stored = _replayed()
    log.deliveries.append(Delivery(S, "c2", "m1", 0, 40.0, 2, False))  # after the re-accept, no new replay
    violations = check(log, stored)
    assert rules(violations) == {"acked-redelivered"}
    assert "'m1'" in violations[0].detail


def test_a_replay_asked_for_before_the_accept_does_not_allow_a_redelivery() -> None:
    log, stored = _replayed()
    # The replay answered at 31.0, before m3 was first accepted (23.5 moved to 31.5).
    log.accepts = [dataclasses.replace(a, at=31.5) if (a.msg_id, a.at) == ("m3", 23.5) else a for a in log.accepts]
    assert "acked-redelivered" in rules(check(log, stored))


def test_a_replay_cut_short_by_a_kill_lets_the_next_incarnation_redeliver() -> None:
    log, stored = _restarted()
    s = stored.subscriptions[S]
    s.routed_in = {seq: 1 for seq in range(4)}
    # Killed after its replayed row for m1 was committed (before RESTART): m1 was open again when
    # incarnation 1 started, which delivered it, and it was accepted and acknowledged again.
    log.replays.append(Replay(S, 0, 0, 30.0, RESTART - 10, 31.0, RESTART - 9))
    s.reopens = [(1, RESTART - 9.5)]
    log.deliveries.append(Delivery(S, "c1", "m1", 1, 40.0, 1, False))
    log.accepts.append(Accept(S, "c1", "m1", 1, 40.5))
    s.acks.append((1, RESTART + 5))
    assert check(log, stored) == []
    # Without that replayed row, m1 was acknowledged for good before incarnation 1 started.
    s.reopens = []
    assert rules(check(log, stored)) == {"acked-redelivered"}


def test_replay_covers_catches_a_wrong_message_count() -> None:
    log, stored = _replayed()
    log.replays[0] = dataclasses.replace(log.replays[0], messages=3)
    violations = check(log, stored)
    assert rules(violations) == {"replay-covers"}
    assert "reported 3 messages up to version 1; the table's log routed 4" in violations[0].detail


def test_replay_covers_counts_only_what_was_routed_up_to_its_latest_version() -> None:
    log, stored = _replayed()
    stored.subscriptions[S].routed_in[3] = 2  # routed after the replay's latest version (1)
    log.replays[0] = dataclasses.replace(log.replays[0], messages=3)
    assert check(log, stored) == []


def test_replay_covers_catches_a_wrong_reopened_count() -> None:
    log, stored = _replayed()
    log.replays[0] = dataclasses.replace(log.replays[0], reopened=5)
    violations = check(log, stored)
    assert rules(violations) == {"replay-covers"}
    assert "reported 5 messages reopened; the tables show 4" in violations[0].detail


def test_replay_covers_lets_messages_open_at_the_time_go_unreopened() -> None:
    log, stored = _replayed()
    s = stored.subscriptions[S]
    # m3 was acknowledged only after the replay was asked for (still outstanding then): not
    # reopened, not delivered again.
    s.acks = [(seq, at) for seq, at in s.acks if seq != 3] + [(3, REPLAY_WALL + 0.2)]
    s.reopens = [(seq, at) for seq, at in s.reopens if seq != 3]
    log.deliveries = [d for d in log.deliveries if (d.msg_id, d.delivery_count) != ("m3", 1)]
    log.accepts = [a for a in log.accepts if (a.msg_id, a.at) != ("m3", 35.5)]
    log.replays[0] = dataclasses.replace(log.replays[0], reopened=3)
    assert check(log, stored) == []


def test_replay_delivered_catches_a_reopened_message_never_delivered_again() -> None:
    log, stored = _replayed()
    log.deliveries = [d for d in log.deliveries if (d.msg_id, d.delivery_count) != ("m2", 1)]
    log.accepts = [a for a in log.accepts if (a.msg_id, a.at) != ("m2", 34.5)]
    stored.subscriptions[S].backlog = frozenset({2})  # reopened, so open again
    violations = check(log, stored)
    assert rules(violations) == {"replay-delivered", "ack-complete"}
    assert any(v.rule == "replay-delivered" and "['m2']" in v.detail for v in violations)
    assert any(v.rule == "ack-complete" and "still in its backlog" in v.detail for v in violations)


def test_replay_delivered_holds_a_replay_cut_short_by_a_kill_too() -> None:
    log, stored = _restarted()
    s = stored.subscriptions[S]
    s.routed_in = {seq: 1 for seq in range(4)}
    log.replays.append(Replay(S, 0, 0, 30.0, RESTART - 10, 31.0, RESTART - 9))
    s.reopens = [(1, RESTART - 9.5)]  # durable, but incarnation 1 never delivered m1
    violations = check(log, stored)
    assert rules(violations) == {"replay-delivered"}
    assert "cut short by a front-end kill" in violations[0].detail


def test_ack_complete_catches_a_delivered_message_left_in_the_backlog() -> None:
    log, stored = _run()
    stored.subscriptions[S].backlog = frozenset({1})
    violations = check(log, stored)
    assert rules(violations) == {"ack-complete"}
    assert "['m1']" in violations[0].detail


def test_snapshot_once_catches_a_duplicated_and_an_invented_row() -> None:
    log, stored = _run()
    stored.subscriptions[S].live = [0, 1, 1, 2, 3, 7]
    details = [v.detail for v in check(log, stored) if v.rule == "snapshot-once"]
    assert len(details) == 2
    assert any("more than once: [1]" in d for d in details)
    assert any("never routed to it: [7]" in d for d in details)


def test_deleted_acked_catches_a_row_deleted_before_its_ack() -> None:
    log, stored = _run()
    s = stored.subscriptions[S]
    s.live = [2, 3]  # maintenance deleted 0 and 1: both acknowledged
    assert check(log, stored) == []
    s.acks = [(seq, at) for seq, at in s.acks if seq != 1]
    violations = [v for v in check(log, stored) if v.rule == "deleted-acked"]
    assert len(violations) == 1 and "without an ack row: [1]" in violations[0].detail


def _selected_run() -> tuple[ClientLog, Stored]:
    """The run of :func:`_run` with property ``k`` = i % 2 on message i, and a second
    subscription whose selector ``k = 1`` matches m1 and m3 only (routed, delivered, acked)."""
    log, stored = _run()
    log.publishes = [
        dataclasses.replace(p, properties={"k": int(p.msg_id[1:]) % 2}) if p.msg_id != "doubt" else p for p in log.publishes
    ]
    odd = "odd"
    log.subscriptions.append(Subscription(odd, T, 5.0, selector="k = 1"))
    log.deliveries += [Delivery(odd, "c3", mid, 0, 20.0 + i, 0, None) for i, mid in ((1, "m1"), (3, "m3"))]
    log.accepts += [Accept(odd, "c3", mid, 0, 20.5 + i) for i, mid in ((1, "m1"), (3, "m3"))]
    stored.subscriptions[odd] = StoredSubscription(1, 0, [1, 3], [(1, START + 31), (3, START + 33)])
    return log, stored


def test_a_selector_limits_what_a_subscription_owes() -> None:
    log, stored = _selected_run()
    assert check(log, stored) == []


def test_complete_catches_a_matching_message_never_delivered() -> None:
    log, stored = _selected_run()
    log.deliveries = [d for d in log.deliveries if (d.subscription, d.msg_id) != ("odd", "m3")]
    log.accepts = [a for a in log.accepts if (a.subscription, a.msg_id) != ("odd", "m3")]
    violations = check(log, stored)
    assert rules(violations) == {"complete"} and "odd never received 1" in violations[0].detail


def test_table_once_catches_a_row_the_selector_does_not_match_and_a_skipped_match() -> None:
    log, stored = _selected_run()
    stored.subscriptions["odd"].seqs = [1, 2]  # m2 (k = 0) routed, m3 (k = 1) skipped
    details = [v.detail for v in check(log, stored) if v.rule == "table-once"]
    assert any("not in its table: [3]" in d for d in details)
    assert any("its selector (k = 1) matches: [2]" in d for d in details)
