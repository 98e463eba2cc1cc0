"""The committer thread on the in-memory store (sharedsub.storage.commits.memory_store): group commits,
numbering, and the storage-fault rules of sharedsub.core.publish.write_faults, with faults set exactly
where and when a test wants them. The same rules on real Delta tables and a real full disk:
tests/storage/test_disk_faults.py; the two stores agree: tests/storage/test_commit_store_contract.py.
"""

from __future__ import annotations

import dataclasses
import errno
import time
from collections.abc import Callable, Iterator
from typing import Any

import proton
import pytest

from sharedsub.core import layout
from sharedsub.core.errors import StorageUnavailable
from sharedsub.core.publish.commit_pace import FULL_GROUP, Company
from sharedsub.runtime import committer as committer_module
from sharedsub.runtime.commit_requests import Ack, Barrier, Publish
from sharedsub.runtime.committer import Committer
from sharedsub.runtime.payloads import PayloadCache
from sharedsub.storage.commits.memory_store import MemoryStore
from tests.builders import Collector, publish_request

ACKS = "subscriptions/k/g1-acks"


@pytest.fixture
def store() -> MemoryStore:
    made = MemoryStore()
    made.create_topic("t")
    return made



def _publish(topic: str, body: str, token: int) -> Publish:
    return publish_request(topic, proton.Message(body=body, subject="s"), token)

def _start(
    store: MemoryStore, done: Collector, *, timeout: float = 30.0, min_interval: float = 0.0, company: Company | None = None
) -> Committer:
    committer = Committer(
        store,
        cache=PayloadCache(1 << 20),
        on_done=done,
        full_disk_timeout=timeout,
        min_commit_interval=min_interval,
        company=company,
    )
    committer.start()
    return committer


@pytest.fixture
def running(store: MemoryStore) -> Iterator[Callable[..., tuple[Committer, Collector]]]:
    started: list[Committer] = []

    def start(**kwargs: Any) -> tuple[Committer, Collector]:
        done = Collector()
        committer = _start(store, done, **kwargs)
        started.append(committer)
        return committer, done

    yield start
    for committer in started:
        committer.stop()


def _wait(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def topic_seqs(store: MemoryStore) -> list[int]:
    return store.rows(layout.topic_table(store.root, "t")).column("seq").to_pylist()


def test_publishes_are_numbered_after_the_stored_rows_and_the_store_is_started_and_stopped(
    store: MemoryStore, running: Callable[..., tuple[Committer, Collector]]
) -> None:
    committer, done = running()
    assert store.started
    for i in range(5):
        committer.submit(_publish("t", f"m{i}", i))
    results = done.wait(5)
    assert sorted(r.value for r in results) == [0, 1, 2, 3, 4] and all(r.error is None for r in results)
    assert topic_seqs(store) == [0, 1, 2, 3, 4]
    committer.stop()
    assert store.stopped

    again = Collector()
    second = _start(store, again)  # a restart numbers after what the table holds
    try:
        second.submit(_publish("t", "m5", 5))
        assert [r.value for r in again.wait(1)] == [5]
    finally:
        second.stop()


def test_a_publish_is_held_during_a_fault_and_written_once_when_it_clears(
    store: MemoryStore, running: Callable[..., tuple[Committer, Collector]]
) -> None:
    store.fail(errno.ENOSPC)
    committer, done = running()
    committer.submit(_publish("t", "held", 1))
    _wait(lambda: committer.fault is not None, "the fault to be seen")
    time.sleep(0.3)
    assert done.results == [] and committer.storage_status()["writable"] is False
    store.heal()
    (result,) = done.wait(1)
    assert result.error is None and topic_seqs(store) == [0]
    assert committer.fault is None and committer.write_errors["ENOSPC"] >= 1


def test_past_the_timeout_publishes_are_refused_and_acks_parked_in_order_until_it_clears(
    store: MemoryStore, running: Callable[..., tuple[Committer, Collector]]
) -> None:
    store.fail(errno.EROFS)
    committer, done = running(timeout=0.3)
    committer.submit(_publish("t", "refused", "p"))
    (refused,) = done.wait(1)
    assert isinstance(refused.error, StorageUnavailable)
    committer.submit(Ack(ACKS, [1], "accepted", "c", token="a1"))
    committer.submit(Ack(ACKS, [2], "accepted", "c", token="a2"))
    committer.submit(Barrier(token="b"))
    time.sleep(0.5)
    assert [r.request.token for r in done.results] == ["p"]  # acks parked, the barrier waits with them
    assert committer.storage_status()["parked"] >= 2
    store.heal()
    results = done.wait(4)
    assert [r.request.token for r in results[1:]] == ["a1", "a2", "b"]
    assert store.rows(layout.join(store.root, ACKS)).column("seq").to_pylist() == [1, 2]


def test_a_commit_that_landed_but_was_not_forced_to_disk_is_held_past_the_timeout_and_never_doubled(
    store: MemoryStore, running: Callable[..., tuple[Committer, Collector]]
) -> None:
    """Its rows are visible (the fan-out may route them): refusing its publisher would have the
    message sent and stored again. It is held until the sync succeeds, however long that takes."""
    store.fail(errno.ENOSPC, landed=True)  # the fsync of a commit on a full disk
    committer, done = running(timeout=0.2)
    committer.submit(_publish("t", "landed", "p"))
    time.sleep(0.8)  # well past the timeout
    assert done.results == [] and topic_seqs(store) == [0]
    store.heal()
    (result,) = done.wait(1)
    assert result.error is None and result.value == 0
    assert topic_seqs(store) == [0]


def test_a_fault_on_one_table_parks_its_acks_while_other_tables_are_written_and_they_land_without_traffic(
    store: MemoryStore, running: Callable[..., tuple[Committer, Collector]]
) -> None:
    store.fail(errno.ENOSPC, where=lambda path: path.endswith(ACKS))
    committer, done = running(timeout=0.2)
    committer.submit(Ack(ACKS, [7], "accepted", "c", token="a"))
    _wait(lambda: committer.storage_status().get("parked", 0) >= 1, "the ack to be parked")
    committer.submit(_publish("t", "other table", "p"))  # other tables are written meanwhile
    (published,) = done.wait(1)
    assert published.request.token == "p" and published.error is None and topic_seqs(store) == [0]
    store.heal()  # nothing else is submitted: the parked ack is retried while idle
    results = done.wait(2)
    assert results[1].request.token == "a" and results[1].error is None
    assert store.rows(layout.join(store.root, ACKS)).column("seq").to_pylist() == [7]
    assert committer.storage_status() == {"writable": True, "parked": 0}


def test_what_arrives_within_the_minimum_interval_waits_for_one_commit_and_a_stop_still_stores_it(
    store: MemoryStore, running: Callable[..., tuple[Committer, Collector]]
) -> None:
    committer, done = running(min_interval=1.0)
    committer.submit(_publish("t", "m0", 0))
    done.wait(1)
    assert committer.commits == 1
    # Within the second after the first commit began: three publishes, none committed alone.
    for i in (1, 2, 3):
        committer.submit(_publish("t", f"m{i}", i))
        time.sleep(0.05)
    results = done.wait(4)
    assert committer.commits == 2 and sorted(r.value for r in results) == [0, 1, 2, 3]
    # A stop during the interval stores what is queued at once.
    committer.submit(_publish("t", "m4", 4))
    committer.stop()
    assert topic_seqs(store) == [0, 1, 2, 3, 4] and committer.commits == 3


def test_an_awaited_publish_is_committed_without_waiting_for_the_interval_with_what_waited_before_it(
    store: MemoryStore, running: Callable[..., tuple[Committer, Collector]]
) -> None:
    """A publisher that waits for each outcome (sharedsub.core.publish.commit_pace) is not held
    for the interval; what other publishers queued meanwhile goes into its commit."""
    committer, done = running(min_interval=1.0)
    committer.submit(_publish("t", "m0", 0))
    done.wait(1)
    began = time.monotonic()
    committer.submit(_publish("t", "pipelined", 1))  # not awaited: it waits for the interval...
    time.sleep(0.05)
    committer.submit(dataclasses.replace(_publish("t", "sync", 2), awaited=True))  # ...until this one comes
    results = done.wait(3)
    took = time.monotonic() - began
    assert committer.commits == 2 and sorted(r.value for r in results[1:]) == [1, 2]
    assert took < 0.9, f"the awaited publish waited for the 1 s interval ({took:.2f} s)"
    # An awaited publish on its own, right after that commit: committed at once too.
    began = time.monotonic()
    committer.submit(dataclasses.replace(_publish("t", "sync again", 3), awaited=True))
    done.wait(4)
    assert committer.commits == 3 and time.monotonic() - began < 0.9


def test_a_front_end_whose_lease_lapsed_writes_nothing_more_and_is_told_to_stop(store: MemoryStore) -> None:
    """Paused past its lease (the lease holder says so before every write): publishes and acks
    after that are not written, each fails, and the front end is told why, once per write."""
    lapsed: list[str | None] = [None]
    stopped: list[str] = []
    done = Collector()
    committer = Committer(
        store, cache=PayloadCache(1 << 20), on_done=done, on_fenced=stopped.append, lapsed=lambda: lapsed[0]
    )
    committer.start()
    try:
        committer.submit(_publish("t", "before", 1))
        assert done.wait(1)[0].value == 0
        lapsed[0] = "the lease could not be renewed for 13 s (ttl 15 s)"
        committer.submit(_publish("t", "after", 2))
        committer.submit(Ack(ACKS, [0], "accepted", "c1"))
        results = done.wait(3)
    finally:
        committer.stop()
    assert [type(r.error).__name__ for r in results[1:]] == ["LeaseLapsed", "LeaseLapsed"]
    assert stopped and set(stopped) == {"the lease could not be renewed for 13 s (ttl 15 s)"}
    assert store.rows(layout.topic_table(store.root, "t")).column("seq").to_pylist() == [0]
    assert store.version(layout.join(store.root, ACKS)) == -1


def test_acknowledgements_of_many_logs_are_spread_over_groups_and_synced_together(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No time for logs beyond the first: each group commits one log and leaves the rest, oldest
    # first, to the next groups, which start without new requests; each group's logs are forced
    # to disk with one sync.
    monkeypatch.setattr(committer_module, "ACK_SLICE", 0.0)
    done = Collector()
    committer = Committer(store, cache=PayloadCache(1 << 20), on_done=done, full_disk_timeout=30.0)
    logs = [f"subscriptions/k{i}/g1-acks" for i in range(5)]
    for i, log in enumerate(logs):
        committer.submit(Ack(log, [i, 10 + i], "accepted", "c"))
    committer.submit(_publish("t", "m", "p"))
    committer.start()
    try:
        results = done.wait(6, timeout=10)
        assert results[0].request.token == "p"  # the publish did not wait for the logs
        assert [r.request.table for r in results[1:]] == logs  # type: ignore[union-attr]
        for i, log in enumerate(logs):
            assert store.rows(layout.join(store.root, log)).column("seq").to_pylist() == [i, 10 + i]
        assert store.syncs == len(logs)
    finally:
        committer.stop()


def test_a_barrier_or_a_stop_commits_every_acknowledgement_first(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(committer_module, "ACK_SLICE", 0.0)
    done = Collector()
    committer = Committer(store, cache=PayloadCache(1 << 20), on_done=done, full_disk_timeout=30.0)
    logs = [f"subscriptions/k{i}/g1-acks" for i in range(4)]
    for i, log in enumerate(logs):
        committer.submit(Ack(log, [i], "accepted", "c"))
    committer.submit(Barrier(token="b"))
    committer.start()
    try:
        results = done.wait(5, timeout=10)
        assert results[-1].request.token == "b" and store.syncs == 1
        assert all(store.rows(layout.join(store.root, log)).num_rows == 1 for log in logs)
        for i, log in enumerate(logs):  # the last group of a stop leaves nothing either
            committer.submit(Ack(log, [100 + i], "accepted", "c"))
    finally:
        committer.stop()
    assert all(store.rows(layout.join(store.root, log)).num_rows == 2 for log in logs)


def test_one_acknowledgement_log_commits_at_most_once_per_ack_interval(store: MemoryStore) -> None:
    # [storage] object_ack_interval: a log acknowledged again within the interval waits for it
    # (its rows gathered into one commit), while publishes go on; a stop writes what waits.
    done = Collector()
    committer = Committer(store, cache=PayloadCache(1 << 20), on_done=done, full_disk_timeout=30.0, ack_interval=0.6)
    log = layout.join(store.root, "subscriptions/k/g1-acks")
    committer.start()
    try:
        committer.submit(Ack("subscriptions/k/g1-acks", [0], "accepted", "c"))
        _wait(lambda: store.version(log) == 0, "the first acknowledgement's commit")
        for seq in (1, 2, 3):
            committer.submit(Ack("subscriptions/k/g1-acks", [seq], "accepted", "c"))
            committer.submit(_publish("t", f"m{seq}", seq))
            time.sleep(0.05)
        _wait(lambda: store.rows(layout.topic_table(store.root, "t")).num_rows == 3, "the publishes")
        assert store.version(log) == 0  # the log waits for its interval; the publishes did not
        _wait(lambda: store.version(log) == 1, "the second acknowledgement commit")
        assert store.rows(log).column("seq").to_pylist() == [0, 1, 2, 3]  # one commit took the three
        committer.submit(Ack("subscriptions/k/g1-acks", [4], "accepted", "c"))
    finally:
        committer.stop()
    assert store.rows(log).column("seq").to_pylist() == [0, 1, 2, 3, 4]  # the stop wrote the last


def test_with_commit_slots_a_group_held_by_the_interval_starts_at_a_slot(store: MemoryStore) -> None:
    """``[publish] commit_lead`` (sharedsub.core.publish.commit_pace.next_slot): a group that waits
    for the interval starts at the first slot after it, ``lead`` before a multiple of ``period``
    on the wall clock (where Spark's trigger starts the fan-out's batches); one that need not
    wait starts at once."""
    period, lead = 1.0, 0.2
    done = Collector()
    committer = Committer(
        store, cache=PayloadCache(1 << 20), on_done=done, min_commit_interval=0.5, commit_slots=(period, lead)
    )
    committer.start()
    try:
        began = time.monotonic()
        committer.submit(_publish("t", "m0", 0))
        done.wait(1)
        assert time.monotonic() - began < 0.4  # nothing held it: at once
        for i in (1, 2):
            committer.submit(_publish("t", f"m{i}", i))  # held by the interval, then by the slot
            done.wait(1 + i)
            phase = (time.time() + lead) % period
            assert phase < 0.15, f"group {i} committed {phase:.3f} s after its slot"
        assert committer.commits == 3
    finally:
        committer.stop()


def test_a_group_that_fills_up_is_committed_without_waiting_for_the_interval(
    running: Callable[..., tuple[Committer, Collector]]
) -> None:
    """commit_pace.FULL_GROUP: a fast publisher's group does not wait out the interval once it
    holds that many requests (its commit's fixed cost is spread thin already, and the wait held
    a window of 1,000 to fewer commits in flight: bench/RESULTS.md, issue 43); one request fewer
    waits."""
    committer, done = running(min_interval=30.0)
    committer.submit(_publish("t", "m0", 0))
    done.wait(1)  # nothing before it: at once; the next group waits for the interval
    for i in range(1, FULL_GROUP):
        committer.submit(_publish("t", f"m{i}", i))
    time.sleep(0.5)
    assert len(done.results) == 1 and committer.commits == 1  # FULL_GROUP - 1 queued: they wait
    began = time.monotonic()
    committer.submit(_publish("t", f"m{FULL_GROUP}", FULL_GROUP))
    done.wait(FULL_GROUP + 1, timeout=10)
    assert time.monotonic() - began < 10 and committer.commits == 2  # one group, long before the interval's end


def test_under_light_traffic_a_group_waits_for_company_until_it_has_it_or_the_wait_is_over(
    store: MemoryStore, running: Callable[..., tuple[Committer, Collector]]
) -> None:
    """commit_pace.Company: after the interval a group holding fewer than the company's publishes
    waits, up to the company's wait from the previous group's start; it goes as soon as it has
    them (woken by the publish that brings them), and an awaited publish does not wait."""
    committer, done = running(min_interval=0.05, company=Company(publishes=5, wait=1.5))
    committer.submit(_publish("t", "m0", 0))
    done.wait(1)  # nothing before it: at once
    began = time.monotonic()
    committer.submit(_publish("t", "m1", 1))
    time.sleep(0.6)  # past the interval, one publish: still waiting for company
    assert committer.commits == 1
    done.wait(2, timeout=5)
    assert committer.commits == 2 and 1.3 < time.monotonic() - began < 3.0  # the wait's end, ~1.5 s after m0's group
    for i in range(2, 6):  # the fifth publish of the group ends its wait
        committer.submit(_publish("t", f"m{i}", i))
        time.sleep(0.05)
    began = time.monotonic()
    committer.submit(_publish("t", "m6", 6))
    done.wait(7, timeout=5)
    assert committer.commits == 3 and time.monotonic() - began < 0.9
    began = time.monotonic()
    committer.submit(dataclasses.replace(_publish("t", "sync", 7), awaited=True))
    done.wait(8, timeout=5)
    assert committer.commits == 4 and time.monotonic() - began < 0.9
    # A group none of whose publishes wants company (a synchronous publisher's, late to send
    # again: commit_pace.PublisherPace.wants_company) waits for the interval only.
    time.sleep(0.1)
    began = time.monotonic()
    committer.submit(dataclasses.replace(_publish("t", "late sync", 8), company=False))
    done.wait(9, timeout=5)
    assert committer.commits == 5 and time.monotonic() - began < 0.9
    assert topic_seqs(store) == list(range(9))
