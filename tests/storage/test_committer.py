"""The group-commit writer on real Delta tables in a tmp dir."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import proton
import pytest

from sharedsub.core import layout
from sharedsub.core.errors import SubscriptionMoved
from sharedsub.core.model import ExpiryPolicy, SubscriptionKey, SubscriptionRecord, SubscriptionState
from sharedsub.runtime.commit_requests import Barrier, CommitTransaction, DropTopic, Publish, Result, SaveSubscription
from sharedsub.runtime.commit_wake import CommitListener, CommitSignal
from sharedsub.runtime.committer import Committer
from sharedsub.runtime.payloads import PayloadCache
from sharedsub.storage.catalog import load_catalog
from sharedsub.storage.commits.commit_store import DeltaStore
from sharedsub.storage.delta.commit_log import latest_version, read_commit
from sharedsub.storage.delta.table_reads import read_table
from sharedsub.storage.delta.tables import log_file
from sharedsub.storage.payload_index import TopicIndex, read_messages
from sharedsub.storage.topics import create_topic, list_topic_partitions, list_topics
from tests.builders import Collector, publish_request


def _publish(topic: str, body: str, token: object, **props: object) -> Publish:
    return publish_request(topic, proton.Message(body=body, properties=props or None, subject="s"), token)  # type: ignore[arg-type]


def _record(topic: str) -> SubscriptionRecord:
    now = dt.datetime.now(dt.UTC)
    return SubscriptionRecord(
        identity=SubscriptionKey("c1", "s1", False, False),
        generation=1,
        state=SubscriptionState.ACTIVE,
        topic=topic,
        binding="#",
        selector=None,
        no_local=False,
        expiry_policy=ExpiryPolicy.LINK_DETACH,
        start_seq=0,
        source="{}",
        created_at=now,
        updated_at=now,
    )


@pytest.fixture
def root(tmp_path: Path) -> str:
    create_topic(str(tmp_path), "t")
    return str(tmp_path)


def test_group_commit_assigns_gap_free_seqs_and_caches(root: str) -> None:
    done = Collector()
    cache = PayloadCache(1 << 20)
    c = Committer(DeltaStore(root), cache=cache, on_done=done)
    for i in range(500):
        c.submit(_publish("t", f"m{i}", i, n=i))
    c.start()
    c.stop()
    results = done.wait(500)
    assert [r.value for r in results] == list(range(500))
    assert all(r.error is None for r in results)
    assert c.commits < 500  # grouped
    data = read_table(layout.topic_table(root, "t"))
    assert data is not None
    assert sorted(data.column("seq").to_pylist()) == list(range(500))
    assert cache.get("t", 499) is not None


def test_a_group_that_commits_a_topic_sends_the_commit_signal_and_one_without_does_not(root: str) -> None:
    listener = CommitListener(root)  # the fan-out's source, held ([fanout] start_on_commit)
    done = Collector()
    c = Committer(DeltaStore(root), cache=PayloadCache(1 << 20), on_done=done, commit_signal=CommitSignal(root))
    c.start()
    try:
        assert listener.listening
        c.submit(Barrier(token="b"))  # a group without a topic commit: no signal
        done.wait(1)
        assert listener.wait(0.3) is False
        c.submit(_publish("t", "m", 1))
        (result,) = done.wait(2)[1:]
        assert result.error is None
        assert listener.wait(10.0) is True  # the topic commit's signal
    finally:
        c.stop()
        listener.close()


def test_seq_continues_after_restart_and_subscription_starts_after_existing(root: str) -> None:
    done = Collector()
    c = Committer(DeltaStore(root), cache=PayloadCache(1 << 20), on_done=done)
    c.start()
    for i in range(3):
        c.submit(_publish("t", f"m{i}", i))
    c.stop()
    done.wait(3)
    done2 = Collector()
    c2 = Committer(DeltaStore(root), cache=PayloadCache(1 << 20), on_done=done2)
    c2.start()
    c2.submit(SaveSubscription(_record("t"), assign_start=True, token=None))
    c2.submit(_publish("t", "m3", 3))
    c2.stop()
    results = done2.wait(2)
    saved = next(r.value for r in results if isinstance(r.request, SaveSubscription))
    assert saved.start_seq == 3
    assert next(r.value for r in results if isinstance(r.request, Publish)) == 3
    catalog = load_catalog(root)
    assert catalog[saved.key].start_seq == 3
    deleted = dataclasses.replace(saved, state=SubscriptionState.DELETED)
    done3 = Collector()
    c3 = Committer(DeltaStore(root), cache=PayloadCache(1 << 20), on_done=done3)
    c3.start()
    c3.submit(SaveSubscription(deleted, assign_start=False, token=None))
    c3.stop()
    done3.wait(1)
    assert not load_catalog(root)[saved.key].active
    assert load_catalog(root)[saved.key].revision > saved.revision


def test_typed_columns_are_stored(root: str) -> None:
    done = Collector()
    c = Committer(DeltaStore(root), cache=PayloadCache(1 << 20), on_done=done)
    c.start()
    c.submit(_publish("t", "x", 0, color="red", n=proton.int32(5), big=2**40, f=1.5, ok=True))
    c.stop()
    done.wait(1)
    data = read_table(layout.topic_table(root, "t"))
    assert data is not None
    row = data.to_pylist()[0]
    props = dict(row["application_properties"])
    assert props["color"]["type"] == "string" and props["color"]["string"] == "red"
    assert props["n"]["type"] == "int" and props["n"]["long"] == 5
    assert props["big"]["type"] == "long" and props["big"]["long"] == 2**40
    assert props["f"]["type"] == "double" and props["f"]["double"] == 1.5
    assert props["ok"]["type"] == "boolean" and props["ok"]["bool"] is True
    assert row["subject"] == "s" and row["priority"] == 4 and row["publisher"] == "c1"
    assert proton.Message().decode(row["message"]) is None  # the stored bytes decode


@pytest.mark.parametrize(
    ("value", "type_", "field", "expected"),
    [
        (proton.byte(-3), "byte", "long", -3),
        (proton.short(300), "short", "long", 300),
        (proton.int32(70000), "int", "long", 70000),
        (proton.ubyte(250), "ubyte", "long", 250),
        (proton.ulong(2**64 - 1), "ulong", "double", float(2**64 - 1)),
        (proton.float32(0.5), "float", "double", 0.5),
        (proton.symbol("sym"), "symbol", "string", "sym"),
        (proton.char("c"), "char", "string", "c"),
        (b"\x01\x02", "binary", "string", "0102"),
        (None, "null", "string", None),
        (False, "boolean", "bool", False),
    ],
)
def test_property_value_types(value: object, type_: str, field: str, expected: object) -> None:
    """The stored struct of an application property's value, by its AMQP type."""
    columns = _publish("t", "m", None, p=value).columns
    (name, out), = columns["application_properties"]  # type: ignore[misc]
    assert name == "p"
    assert out["type"] == type_
    assert out[field] == expected


def test_a_transaction_is_stored_in_one_commit_per_topic_with_one_result(root: str) -> None:
    create_topic(root, "tx-a")
    create_topic(root, "tx-b")
    done = Collector()
    committer = Committer(DeltaStore(root), cache=PayloadCache(1 << 20), on_done=done, max_batch_messages=2)
    committer.start()
    try:
        items = [_publish("tx-a", f"a{i}", None) for i in range(5)] + [_publish("tx-b", "b0", None)]
        committer.submit(CommitTransaction(items, token="txn"))
        committer.submit(Barrier(token="after"))
        results = done.wait(2)
    finally:
        committer.stop()
    # Only the transaction's and the barrier's results are reported, never its own publishes.
    assert [r.request.token for r in results] == ["txn", "after"]
    assert results[0].error is None and results[0].value == [0, 1, 2, 3, 4, 0]
    # Five messages with max_batch_messages=2: still one commit (version 1 after the create).
    table = layout.topic_table(root, "tx-a")
    assert latest_version(table) == 1
    assert sorted(read_table(table).column("seq").to_pylist()) == [0, 1, 2, 3, 4]


def test_a_transaction_whose_commit_fails_reports_the_error(root: str) -> None:
    done = Collector()
    committer = Committer(DeltaStore(root), cache=PayloadCache(1 << 20), on_done=done)
    committer.start()
    try:
        committer.submit(CommitTransaction([_publish("never-created", "x", None)], token="txn"))
        (result,) = done.wait(1)
    finally:
        committer.stop()
    assert result.request.token == "txn" and result.error is not None and result.value is None


def test_with_fsync_each_commit_forces_its_files_log_entry_and_directories(
    root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recorded around the real os.fsync (it still runs): which files and directories were
    forced before the committer reported the publish, by inode (the log entry's content is
    forced under its temporary name, before it takes its version: test_blind_append)."""
    import os

    synced: list[int] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    done = Collector()
    c = Committer(DeltaStore(root, fsync=True), cache=PayloadCache(1 << 20), on_done=done)
    c.start()
    try:
        c.submit(_publish("t", "durable", "tok"))
        (result,) = done.wait(1)
        forced = list(synced)  # what was forced before the result was reported
    finally:
        c.stop()
    assert result.error is None
    table = layout.topic_table(root, "t")
    version = latest_version(table)
    commit = read_commit(table, version)
    assert commit is not None and commit.added
    for path in (*commit.added, log_file(table, version), os.path.dirname(log_file(table, version)), table):
        assert os.stat(path).st_ino in forced, (path, forced)


P1 = 1 << 40  # partition 1's first seq (sharedsub.core.layout)


def _run(root: str, partition: int, *requests: object) -> list[object]:
    """The results of ``requests`` committed by a committer writing topic partition ``partition``."""
    done = Collector()
    c = Committer(DeltaStore(root, partition=partition), cache=PayloadCache(1 << 20), on_done=done)
    c.start()
    for request in requests:
        c.submit(request)  # type: ignore[arg-type]
    c.stop()
    results = done.wait(len(requests))
    assert all(r.error is None for r in results), [r.error for r in results]
    return [r.value for r in results]


def test_a_front_end_in_slot_1_writes_its_own_partition_of_a_topic_numbered_from_its_base(root: str) -> None:
    """Partition 1 gets its table at its first publish, beside the topic's; its seqs start at
    1 << 40 and its rows say their partition; partition 0 is untouched. A subscription saved
    there starts at partition 1's next seq and records where partition 0 was; payloads of both
    partitions are found by seq; listing shows one topic with two partitions; dropping the
    topic removes both."""
    assert _run(root, 0, _publish("t", "a", 0), _publish("t", "b", 1)) == [0, 1]
    assert _run(root, 1, _publish("t", "c", 0), _publish("t", "d", 1)) == [P1, P1 + 1]
    assert _run(root, 0, _publish("t", "e", 0)) == [2]  # continues after a restart, its own partition
    p1 = layout.topic_partition_table(root, "t", 1)
    data = read_table(p1, ["seq", "partition"])
    assert data is not None and data.to_pydict() == {"seq": [P1, P1 + 1], "partition": [1, 1]}
    data0 = read_table(layout.topic_table(root, "t"), ["seq", "partition"])
    assert data0 is not None and sorted(data0.column("partition").to_pylist()) == [0, 0, 0]

    (saved,) = _run(root, 1, SaveSubscription(_record("t"), assign_start=True, token=None))
    assert isinstance(saved, SubscriptionRecord)
    assert (saved.start_seq, saved.start_seqs) == (P1 + 2, ((0, 3),))
    assert load_catalog(root)[saved.key].start_seqs == ((0, 3),)
    assert (saved.start_in(0), saved.start_in(1), saved.start_in(2)) == (3, P1 + 2, 2 * P1)

    assert read_messages(TopicIndex(root, "t"), [1, P1 + 1, P1 + 7]).keys() == {1, P1 + 1}
    assert list_topic_partitions(root) == {"t": [0, 1]} and list_topics(root) == ["t"]
    assert _run(root, 1, DropTopic("t", None))[0] == p1
    assert list_topic_partitions(root) == {}


def _shared_results(root: str, partition: int, *requests: object) -> list[Result]:
    """The results of ``requests`` committed by a member in slot ``partition`` that shares the
    catalog with others (``shared_catalog``)."""
    done = Collector()
    c = Committer(DeltaStore(root, partition=partition), cache=PayloadCache(1 << 20), on_done=done, shared_catalog=True)
    c.start()
    for request in requests:
        c.submit(request)  # type: ignore[arg-type]
    c.stop()
    return done.wait(len(requests))


def test_a_member_s_save_of_a_generation_another_member_made_or_passed_is_refused_with_its_record(root: str) -> None:
    """Two members share the catalog: a new generation another member created first (its record
    had not reached this one) is not written again, nor is a deletion of a generation another
    member has gone past; the result carries the latest record, and the catalog keeps it."""
    (first,) = _shared_results(root, 0, SaveSubscription(_record("t"), assign_start=True, token=None))
    assert first.error is None
    (again,) = _shared_results(root, 1, SaveSubscription(_record("t"), assign_start=True, token=None))
    assert isinstance(again.error, SubscriptionMoved) and again.error.record.revision == first.record().revision
    second = dataclasses.replace(_record("t"), generation=2)
    (newer,) = _shared_results(root, 1, SaveSubscription(second, assign_start=True, token=None))
    assert newer.error is None and newer.record().generation == 2
    stale = dataclasses.replace(first.record(), state=SubscriptionState.DELETED)
    (deleted,) = _shared_results(root, 0, SaveSubscription(stale, assign_start=False, token=None))
    assert isinstance(deleted.error, SubscriptionMoved) and deleted.error.record.generation == 2
    key = first.record().key
    latest = load_catalog(root)[key]
    assert (latest.generation, latest.active) == (2, True)
    current = dataclasses.replace(newer.record(), state=SubscriptionState.DELETED)
    (ended,) = _shared_results(root, 0, SaveSubscription(current, assign_start=False, token=None))
    assert ended.error is None and not load_catalog(root)[key].active
