"""The owner lease on a real S3 server (versitygw) and on a local directory: taking, refusing,
taking over, renewing, losing, releasing (sharedsub.runtime.cluster.member_lease; rules in
sharedsub.core.ownership.lease, tested as tables in tests/unit/test_lease_table.py)."""

from __future__ import annotations

import dataclasses
import socket
import threading

import pytest

from sharedsub.core.errors import DataDirInUse
from sharedsub.core.layout import member_lease
from sharedsub.core.ownership.lease import LeaseRecord
from sharedsub.runtime.cluster.member_lease import LeaseHolder, take_lease, take_slot
from sharedsub.storage.cluster.lease_objects import read_lease
from sharedsub.storage.objects import open_store
from sharedsub.storage.objects.store import ObjectStore
from tests.s3_server import S3Server

OWNER_LEASE = member_lease(0)  # the lease of a single front end: member slot 0

HOST = socket.gethostname()


class Clock:
    """A monotonic clock the test moves (sleeping moves it too)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds




def _me(name: str, *, host: str = "host-a", pid: int = 100, ttl: float = 15.0, renew: float = 3.0) -> LeaseRecord:
    return LeaseRecord(f"{host}:{pid}:{name}", 0, host, pid, ttl, renew, amqp=f"amqp://{name}:5672")


def test_the_first_front_end_creates_epoch_1_and_a_live_holder_refuses_the_second(store: ObjectStore) -> None:
    clock = Clock()
    taken = take_lease(store, OWNER_LEASE, _me("a"), pid_alive=lambda _pid: True, clock=clock, sleep=clock.sleep)
    assert taken[0].epoch == 1
    holder = LeaseHolder(store, OWNER_LEASE, taken, lambda _r: None, clock=clock)

    def sleep_while_renewing(seconds: float) -> None:
        clock.sleep(seconds)
        holder.renew_once()  # the holder renews every renew_s of the same clock

    with pytest.raises(DataDirInUse, match=r"in use by process 100 on host-a serving amqp://a:5672"):
        take_lease(
            store, OWNER_LEASE, _me("b", host="host-b"), pid_alive=lambda _pid: True, clock=clock, sleep=sleep_while_renewing
        )
    assert clock.now - 1000.0 <= 3.0 + 1e-9  # refused after one renewal interval, not a TTL


def test_a_lease_not_renewed_for_its_ttl_is_taken_over_and_its_old_holder_loses_it(store: ObjectStore) -> None:
    clock = Clock()
    lost: list[str] = []
    taken = take_lease(store, OWNER_LEASE, _me("a"), pid_alive=lambda _p: True, clock=clock, sleep=clock.sleep)
    old = LeaseHolder(store, OWNER_LEASE, taken, lost.append, clock=clock)
    # A SIGSTOPped holder renews nothing: the taker (another host) watches the tag for a TTL.
    new = take_lease(store, OWNER_LEASE, _me("b", host="host-b"), pid_alive=lambda _p: True, clock=clock, sleep=clock.sleep)
    assert new[0].epoch == 2 and clock.now - 1000.0 >= 15.0
    record, _tag = read_lease(store, OWNER_LEASE) or (None, "")
    assert record is not None and record.holder == "host-b:100:b" and record.epoch == 2
    old.renew_once()  # SIGCONT: its next renewal is refused
    assert lost == ["the lease was taken over by another front end"] and old.lost
    assert read_lease(store, OWNER_LEASE)[0].holder == "host-b:100:b"  # type: ignore[index]


def test_a_dead_holder_of_this_host_is_taken_over_at_once(store: ObjectStore) -> None:
    clock = Clock()
    take_lease(store, OWNER_LEASE, _me("a", host=HOST, pid=4_000_000), pid_alive=lambda _p: True, clock=clock)
    taken = take_lease(
        store,
        OWNER_LEASE,
        _me("b", host=HOST, pid=4_000_001),
        pid_alive=lambda pid: pid != 4_000_000,
        clock=clock,
        sleep=clock.sleep,
    )
    assert taken[0].epoch == 2 and clock.now == 1000.0


def test_a_released_lease_is_taken_at_once_with_the_next_epoch(store: ObjectStore) -> None:
    clock = Clock()
    first = LeaseHolder(store, OWNER_LEASE, take_lease(store, OWNER_LEASE, _me("a"), pid_alive=lambda _p: True), lambda _r: None)
    first.release()
    rec = read_lease(store, OWNER_LEASE)
    assert rec is not None and rec[0].released and rec[0].epoch == 1
    taken = take_lease(store, OWNER_LEASE, _me("b", host="host-b"), pid_alive=lambda _p: True, clock=clock, sleep=clock.sleep)
    assert taken[0].epoch == 2 and clock.now == 1000.0


def test_an_unanswered_renewal_keeps_serving_until_ttl_minus_renew_then_stops(
    s3_server: S3Server, s3_env: dict[str, str]
) -> None:
    store = open_store(s3_server.url(), {"connect_timeout": "1s", "timeout": "2s"})
    clock = Clock()
    lost: list[str] = []
    holder = LeaseHolder(
        store,
        OWNER_LEASE,
        take_lease(store, OWNER_LEASE, _me("a"), pid_alive=lambda _p: True, clock=clock),
        lost.append,
        clock=clock,
    )
    s3_server.kill()
    try:
        # 9 s without an answer: under ttl - renew (12 s), still held. One unanswered renewal at
        # 9 s (the holder decides on the time since its last renewal was sent) shows what three at
        # 3, 6 and 9 s did; each costs the client's retries against the dead server, ~4 s here.
        clock.sleep(9.0)
        holder.renew_once()
        assert lost == [] and holder.lost is None
        clock.sleep(3.0)
        holder.renew_once()  # 12 s: a taker may take it 3 s from now: stop
        assert lost and "could not be renewed for 12 s" in lost[0]
    finally:
        s3_server.start()


def test_a_holder_whose_renewal_hangs_stops_at_its_deadline_not_when_the_request_gives_up(
    s3_server: S3Server, s3_env: dict[str, str]
) -> None:
    # A SIGSTOPped store takes the connection and never answers: the renewal request waits for
    # the client's timeout (30 s), far past this lease's deadline (ttl 2 s - renew 0.5 s).
    store = open_store(s3_server.url())
    lost = threading.Event()
    taken = take_lease(store, OWNER_LEASE, _me("a", ttl=2.0, renew=0.5), pid_alive=lambda _p: True)
    holder = LeaseHolder(store, OWNER_LEASE, taken, lambda _r: lost.set()).start()
    try:
        with s3_server.stopped():
            assert lost.wait(20), "the holder did not stop while its renewal hung"
        assert holder.lost is not None and "could not be renewed" in holder.lost
    finally:
        holder.release()


def test_a_renewal_whose_answer_was_lost_is_kept(store: ObjectStore) -> None:
    """The store wrote a renewal but its answer never came: the next renewal is refused (the
    tag moved), reads the lease back, finds itself, and keeps it."""
    clock = Clock()
    lost: list[str] = []
    taken = take_lease(store, OWNER_LEASE, _me("a"), pid_alive=lambda _p: True, clock=clock)
    holder = LeaseHolder(store, OWNER_LEASE, taken, lost.append, clock=clock)
    record, tag = read_lease(store, OWNER_LEASE) or (taken[0], "")
    # The lost-answer write: what the holder's renewal would have written, behind its back.
    store.put_if_match(OWNER_LEASE, dataclasses.replace(record, renewals=1).to_json(), tag)
    clock.sleep(3.0)
    holder.renew_once()
    assert lost == [] and holder.lost is None
    clock.sleep(3.0)
    holder.renew_once()
    assert lost == [] and read_lease(store, OWNER_LEASE)[0].renewals == 2  # type: ignore[index]


def test_renewals_on_the_holders_thread(store: ObjectStore) -> None:
    done = threading.Event()
    taken = take_lease(store, OWNER_LEASE, _me("a", ttl=2.0, renew=0.1), pid_alive=lambda _p: True)
    holder = LeaseHolder(store, OWNER_LEASE, taken, lambda _r: done.set()).start()
    try:
        first = read_lease(store, OWNER_LEASE)
        threading.Event().wait(0.5)
        later = read_lease(store, OWNER_LEASE)
        assert first is not None and later is not None and later[0].renewals > first[0].renewals
        assert not done.is_set()
    finally:
        holder.release()


SLOTS = [member_lease(k) for k in range(3)]


def test_front_ends_take_member_slots_in_order_and_a_released_one_before_a_free_one(store: ObjectStore) -> None:
    """Three slots: two front ends get 0 and 1; when 0 is released a third takes 0 over (its
    partition lives on, epoch 2) rather than creating 2; with every slot renewed a fourth is
    refused, naming the first member."""
    clock = Clock()
    slot_a, a = take_slot(store, SLOTS, _me("a"), pid_alive=lambda _p: True, clock=clock, sleep=clock.sleep)
    slot_b, b = take_slot(store, SLOTS, _me("b"), pid_alive=lambda _p: True, clock=clock, sleep=clock.sleep)
    assert (slot_a, a[0].epoch, slot_b, b[0].epoch) == (0, 1, 1, 1)
    LeaseHolder(store, SLOTS[0], a, lambda _r: None, clock=clock).release()
    slot_c, c = take_slot(store, SLOTS, _me("c"), pid_alive=lambda _p: True, clock=clock, sleep=clock.sleep)
    assert (slot_c, c[0].epoch) == (0, 2) and clock.now == 1000.0
    slot_d, d = take_slot(store, SLOTS, _me("d"), pid_alive=lambda _p: True, clock=clock, sleep=clock.sleep)
    assert (slot_d, d[0].epoch) == (2, 1)
    holders = [LeaseHolder(store, key, taken, lambda _r: None, clock=clock) for key, taken in zip(SLOTS, (c, b, d), strict=True)]

    def sleep_while_renewing(seconds: float) -> None:
        clock.sleep(seconds)
        for holder in holders:
            holder.renew_once()

    with pytest.raises(DataDirInUse, match=r"in use by process 100 on host-a serving amqp://c:5672"):
        take_slot(store, SLOTS, _me("e", host="host-b"), pid_alive=lambda _p: True, clock=clock, sleep=sleep_while_renewing)


def test_a_holder_paused_past_its_renewal_deadline_says_its_lease_lapsed_before_any_request(store: ObjectStore) -> None:
    clock = Clock()
    taken = take_lease(store, OWNER_LEASE, _me("a"), pid_alive=lambda _p: True, clock=clock, sleep=clock.sleep)
    holder = LeaseHolder(store, OWNER_LEASE, taken, lambda _r: None, clock=clock)
    assert holder.lapsed() is None
    clock.sleep(11.9)  # ttl 15 - renew 3 = 12 s after the last renewal was sent
    assert holder.lapsed() is None
    clock.sleep(0.2)
    assert holder.lapsed() == "the lease could not be renewed for 12 s (ttl 15 s)"
    holder.renew_once()  # (not lost yet: nobody took it) renewed again, it is held again
    assert holder.lapsed() is None and holder.lost is None
