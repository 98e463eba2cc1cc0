"""The sharedsub_topics stream reader: offsets, caps, AvailableNow target, files, batches.

The reader's driver side is plain Python, so most of it is tested by calling it directly; the
streaming path through Spark is covered by test_fanout.py.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import Row, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxFiles
from pyspark.sql.types import StructType

from jobs.sources.deltars_topics import (
    ARROW_SCHEMA,
    SOURCE_NAME,
    SPARK_SCHEMA,
    TOPIC_ONLY,
    TopicFiles,
    TopicsStreamReader,
    make_offset,
    offset_ids,
    offset_versions,
)
from sharedsub.core.fanout import idle_hold
from sharedsub.runtime.commit_wake import CommitSignal
from sharedsub.storage import schemas
from tests import builders as b

pytestmark = pytest.mark.spark


def reader(root: str, **options: str) -> TopicsStreamReader:
    # Holding unsubscribed topics back is off unless a test sets it: these topics have no
    # subscriptions, and most tests here are about offsets and caps.
    return TopicsStreamReader({"data_dir": root, "unsubscribed_topic_interval": "0", **options})


def test_initial_offset_is_every_topic_at_minus_one(root: str) -> None:
    b.topic(root, "a")
    b.publish(root, "b", ["k"])
    assert reader(root).initialOffset() == make_offset({"a": -1, "b": -1})


def test_first_batch_is_capped_then_max_commits_per_topic(root: str) -> None:
    for _ in range(5):
        b.publish(root, "t", ["k"])  # versions 0 (create) .. 5
    r = reader(root, max_commits_per_batch="2")
    start = r.initialOffset()
    first = r.latestOffset(start, r.getDefaultReadLimit())
    assert offset_versions(first) == {"t": 0}  # first_batch_max_commits = 1: only the creation commit
    second = r.latestOffset(first, r.getDefaultReadLimit())
    assert offset_versions(second) == {"t": 2}
    assert offset_versions(r.latestOffset(second, ReadAllAvailable())) == {"t": 5}
    assert offset_versions(r.latestOffset(second, ReadMaxFiles(1))) == {"t": 3}


def test_new_topic_is_picked_up_at_minus_one(root: str) -> None:
    b.publish(root, "a", ["k"])
    r = reader(root, topic_list_interval="0", first_batch_max_commits="100")
    end = r.latestOffset(r.initialOffset(), ReadAllAvailable())
    assert offset_versions(end) == {"a": 1}
    b.publish(root, "late", ["k", "k"])
    assert offset_versions(r.latestOffset(end, ReadAllAvailable())) == {"a": 1, "late": 1}


def test_available_now_stops_at_the_target(root: str) -> None:
    b.publish(root, "t", ["k"])
    r = reader(root, max_commits_per_batch="1", first_batch_max_commits="1")
    r.prepareForTriggerAvailableNow()
    b.publish(root, "t", ["k"])  # after the target: not read
    b.publish(root, "other", ["k"])  # a topic created after the target: not read
    offset = r.initialOffset()
    seen = []
    for _ in range(10):
        nxt = r.latestOffset(offset, r.getDefaultReadLimit())
        if nxt == offset:
            break
        seen.append(nxt)
        offset = nxt
    # "other" may appear (initialOffset lists it), but never past -1: nothing of it is read.
    assert [o["topics"]["t"] for o in seen] == [0, 1]
    assert all(o["topics"].get("other", -1) == -1 for o in seen)


def test_partitions_and_read_give_routing_columns_in_the_declared_schema(root: str) -> None:
    b.publish(root, "t", ["a.b", None], properties={"n": 7, "s": "x"})
    b.publish(root, "t", ["c"])
    b.publish(root, "u", ["d"])
    r = reader(root, files_per_partition="1")
    parts = r.partitions(make_offset({"t": 0}), make_offset({"t": 2, "u": 1}))
    assert [(p.topic, len(p.files)) for p in parts] == [("t", 1), ("t", 1), ("u", 1)]
    assert all(isinstance(p, TopicFiles) for p in parts)
    assert r.partitions(make_offset({"t": 2}), make_offset({"t": 2})) == []
    batches = [batch for p in parts for batch in r.read(p)]
    table = pa.Table.from_batches(batches)
    assert "message" not in table.column_names
    assert table.column_names == ["topic", *schemas.ROUTING_COLUMNS] == SPARK_SCHEMA.fieldNames()
    # Spark checks each batch's schema for exact equality with the declared one.
    assert all(batch.schema.equals(to_arrow_schema(SPARK_SCHEMA, timezone="UTC")) for batch in batches)
    assert [f.type for f in table.schema][:3] == [f.type for f in ARROW_SCHEMA][:3]
    rows = table.to_pylist()
    assert [(row["topic"], row["seq"], row["routing_key"]) for row in rows] == [
        ("t", 0, "a.b"),
        ("t", 1, None),
        ("t", 2, "c"),
        ("u", 0, "d"),
    ]
    props = dict(rows[0]["application_properties"])
    assert props["n"]["long"] == 7 and props["s"]["string"] == "x"


def _read_all(spark: SparkSession, root: str, checkpoint: Path, schema: StructType | str | None) -> list[Row]:
    """Every row the source has now, read through Spark with ``schema`` given (None: none)."""
    rows: list[Row] = []
    stream = spark.readStream.format(SOURCE_NAME)
    if schema is not None:
        stream = stream.schema(schema)
    df = stream.option("data_dir", root).option("unsubscribed_topic_interval", "0").load()
    writer = df.writeStream.foreachBatch(lambda batch, _: rows.extend(batch.collect()))
    query = writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    query.awaitTermination(120)
    return rows


def test_a_query_given_some_of_the_columns_as_its_schema_reads_those_only(
    spark: SparkSession, root: str, tmp_path: Path
) -> None:
    b.publish(root, "t", ["a.b", "c"])
    b.publish(root, "u", ["d"])
    rows = _read_all(spark, root, tmp_path / "topic", TOPIC_ONLY)
    assert sorted(tuple(row) for row in rows) == [("t",), ("t",), ("u",)]
    picked = _read_all(spark, root, tmp_path / "two", "routing_key STRING, topic STRING")
    assert sorted((row.topic, row.routing_key) for row in picked) == [("t", "a.b"), ("t", "c"), ("u", "d")]
    assert picked[0].__fields__ == ["routing_key", "topic"]


def test_a_query_given_a_column_the_source_lacks_fails_naming_it(spark: SparkSession, root: str, tmp_path: Path) -> None:
    b.publish(root, "t", ["k"])
    with pytest.raises(StreamingQueryException, match=r"no columns \['colour', 'seq'\]"):
        _read_all(spark, root, tmp_path / "cp", "topic STRING, colour STRING, seq STRING")


def test_partitions_fail_clearly_when_the_log_was_cleaned(root: str) -> None:
    import os

    from sharedsub.core import layout
    from sharedsub.storage.delta.tables import log_file

    b.publish(root, "t", ["k"])
    b.publish(root, "t", ["k"])
    os.remove(log_file(layout.topic_table(root, "t"), 1))
    with pytest.raises(RuntimeError, match="log retention"):
        reader(root).partitions(make_offset({"t": 0}), make_offset({"t": 2}))


def test_a_topic_whose_early_log_was_cleaned_is_read_from_its_snapshot(root: str) -> None:
    import os

    from deltalake import DeltaTable

    from sharedsub.core import layout
    from sharedsub.storage.delta.tables import log_file

    for _ in range(3):
        b.publish(root, "t", ["k", "k"])  # versions 1..3
    path = layout.topic_table(root, "t")
    DeltaTable(path).create_checkpoint()  # at version 3: log cleanup may then drop 0..2.json
    for version in range(3):
        os.remove(log_file(path, version))
    b.publish(root, "t", ["k"])  # version 4
    r = reader(root, max_commits_per_batch="1")
    start = r.initialOffset()
    end = r.latestOffset(start, r.getDefaultReadLimit())
    assert offset_versions(end) == {"t": 4}  # no commit-by-commit cap without the commits
    table = pa.Table.from_batches([batch for p in r.partitions(start, end) for batch in r.read(p)])
    assert sorted(table.column("seq").to_pylist()) == [0, 1, 2, 3, 4, 5, 6]


def read_seqs(r: TopicsStreamReader, start: dict, end: dict) -> dict[str, list[int]]:
    """``{topic: seqs}`` the reader delivers for the batch ``(start, end]``, in read order."""
    out: dict[str, list[int]] = {}
    for part in r.partitions(start, end):
        for batch in r.read(part):
            out.setdefault(part.topic, []).extend(batch.column("seq").to_pylist())
    return out


def drain(r: TopicsStreamReader, offset: dict) -> tuple[dict, dict[str, list[int]]]:
    """Run batches until nothing is new; return the last offset and every seq read per topic."""
    seen: dict[str, list[int]] = {}
    for _ in range(20):
        nxt = r.latestOffset(offset, ReadAllAvailable())
        if nxt == offset:
            return offset, seen
        for topic, seqs in read_seqs(r, offset, nxt).items():
            seen.setdefault(topic, []).extend(seqs)
        offset = nxt
    raise AssertionError("the reader never caught up")


def test_a_topic_dropped_and_created_again_is_read_from_its_beginning(root: str) -> None:
    from sharedsub.core import layout
    from sharedsub.runtime.offline_admin import drop_topic
    from sharedsub.storage.delta.commit_log import table_id

    for _ in range(4):
        b.publish(root, "t", ["k", "k"])  # versions 1..4, seqs 0..7
    b.publish(root, "other", ["k"])
    r = reader(root, topic_list_interval="0", first_batch_max_commits="100")
    routed, seen = drain(r, r.initialOffset())
    assert seen == {"t": list(range(8)), "other": [0]}
    old_id = offset_ids(routed)["t"]
    assert old_id == table_id(layout.topic_table(root, "t"))

    # Dropped, not created again: the source does not fail and keeps the entry as it was.
    drop_topic(root, "t", force=True)
    again, seen = drain(r, routed)
    assert again == routed and seen == {}

    # Created again under the same name: fewer commits than the offset's version 4.
    b.publish(root, "t", ["a", "b"])  # create (version 0) + version 1: seqs 0, 1
    b.publish(root, "t", ["c"])  # version 2: seq 2
    after, seen = drain(r, routed)
    assert seen == {"t": [0, 1, 2]}
    assert offset_versions(after) == {"t": 2, "other": 1}
    assert offset_ids(after)["t"] == table_id(layout.topic_table(root, "t")) != old_id

    # A restarted reader (the same checkpoint, a fresh process) continues the new table.
    b.publish(root, "t", ["d"])
    fresh = reader(root, first_batch_max_commits="100")
    assert drain(fresh, after)[1] == {"t": [3]}


def test_an_offset_without_ids_is_the_same_table_unless_the_table_is_older(root: str) -> None:
    from sharedsub.core import layout
    from sharedsub.storage.delta.tables import remove_table

    for _ in range(3):
        b.publish(root, "t", ["k"])  # versions 1..3
    r = reader(root, first_batch_max_commits="100")
    # Written before ids existed: versions only. Same table: continue after version 2.
    assert drain(r, {"topics": {"t": 2}})[1] == {"t": [2]}
    # A table created again with fewer versions than such an offset: read from its beginning.
    remove_table(layout.topic_table(root, "t"))
    b.publish(root, "t", ["x", "y"])  # versions 0, 1
    end, seen = drain(reader(root, first_batch_max_commits="100"), {"topics": {"t": 3}})
    assert seen == {"t": [0, 1]} and offset_versions(end) == {"t": 1}


def test_partitions_read_a_different_table_from_its_beginning_and_skip_a_dropped_one(root: str) -> None:
    from sharedsub.core import layout
    from sharedsub.storage.delta.commit_log import table_id
    from sharedsub.storage.delta.tables import remove_table

    path = layout.topic_table(root, "t")
    b.publish(root, "t", ["k"] * 3)
    old_id = table_id(path)
    assert old_id is not None
    r = reader(root)
    # A batch planned on the old table, whose table is dropped before it is read: nothing.
    remove_table(path)
    assert r.partitions(make_offset({"t": -1}), make_offset({"t": 1}, {"t": old_id})) == []
    b.publish(root, "t", ["a", "b"])
    b.publish(root, "t", ["c"])
    new_id = table_id(path)
    # ``end`` names the new table, ``start`` the old one at a higher version: read from -1.
    start, end = make_offset({"t": 5}, {"t": old_id}), make_offset({"t": 2}, {"t": new_id})
    assert read_seqs(r, start, end) == {"t": [0, 1, 2]}
    # Same ids: the usual (start, end].
    assert read_seqs(r, make_offset({"t": 1}, {"t": new_id}), end) == {"t": [2]}


def test_a_topic_without_subscriptions_is_taken_at_most_every_interval(root: str) -> None:
    b.publish(root, "quiet", ["k"])  # versions 0, 1
    b.publish(root, "busy", ["k"])
    b.register(root, b.subscription("busy", name="s"))
    r = reader(root, unsubscribed_topic_interval="0.5", first_batch_max_commits="100", topic_list_interval="0")
    first = r.latestOffset(r.initialOffset(), r.getDefaultReadLimit())
    assert offset_versions(first) == {"busy": 1, "quiet": 1}  # never taken before: at once
    b.publish(root, "quiet", ["k"])  # version 2
    b.publish(root, "busy", ["k"])
    second = r.latestOffset(first, r.getDefaultReadLimit())
    assert offset_versions(second) == {"busy": 2, "quiet": 1}  # quiet is held, busy is not
    assert r.latestOffset(second, r.getDefaultReadLimit()) == second  # quiet's commit alone: no batch
    time.sleep(0.6)
    assert offset_versions(r.latestOffset(second, r.getDefaultReadLimit())) == {"busy": 2, "quiet": 2}


def test_a_held_topic_is_taken_as_soon_as_it_gets_a_subscription(root: str) -> None:
    b.publish(root, "t", ["k"])
    r = reader(root, unsubscribed_topic_interval="3600", first_batch_max_commits="100")
    first = r.latestOffset(r.initialOffset(), r.getDefaultReadLimit())
    b.publish(root, "t", ["k"])
    assert r.latestOffset(first, r.getDefaultReadLimit()) == first  # held for an hour
    b.register(root, b.subscription("t", name="late"))
    assert offset_versions(r.latestOffset(first, r.getDefaultReadLimit())) == {"t": 2}


def test_a_deleted_subscription_does_not_keep_its_topic_taken(root: str) -> None:
    b.publish(root, "t", ["k"])
    (sub,) = b.register(root, b.subscription("t", name="gone"))
    r = reader(root, unsubscribed_topic_interval="3600", first_batch_max_commits="100")
    first = r.latestOffset(r.initialOffset(), r.getDefaultReadLimit())
    b.publish(root, "t", ["k"])
    second = r.latestOffset(first, r.getDefaultReadLimit())
    assert offset_versions(second) == {"t": 2}
    b.delete(root, sub)
    b.publish(root, "t", ["k"])
    third = r.latestOffset(second, r.getDefaultReadLimit())
    assert offset_versions(third) == {"t": 3}  # first time unsubscribed: taken, then held
    b.publish(root, "t", ["k"])
    assert r.latestOffset(third, r.getDefaultReadLimit()) == third


def test_available_now_holds_nothing_back(root: str) -> None:
    b.publish(root, "t", ["k"])
    r = reader(root, unsubscribed_topic_interval="3600", first_batch_max_commits="100")
    first = r.latestOffset(r.initialOffset(), r.getDefaultReadLimit())
    b.publish(root, "t", ["k"])
    r.prepareForTriggerAvailableNow()
    assert offset_versions(r.latestOffset(first, r.getDefaultReadLimit())) == {"t": 2}


def test_under_light_traffic_a_batch_waits_for_company_until_the_oldest_commit_waited(root: str) -> None:
    b.publish(root, "t", ["k"])
    r = reader(root, batch_max_wait="0.4", batch_min_rows="5", first_batch_max_commits="100")
    first = r.latestOffset(r.initialOffset(), r.getDefaultReadLimit())
    assert offset_versions(first) == {"t": 1}  # a reader's first batch never waits
    b.publish(root, "t", ["k", "k"])  # version 2: two rows, fewer than 5
    assert r.latestOffset(first, r.getDefaultReadLimit()) == first  # waits for company
    b.publish(root, "t", ["k"])  # version 3: three rows in all
    assert r.latestOffset(first, r.getDefaultReadLimit()) == first
    time.sleep(0.45)  # version 2 has now waited batch_max_wait
    assert offset_versions(r.latestOffset(first, r.getDefaultReadLimit())) == {"t": 3}


def _held_reader(root: str, **options: str) -> tuple[TopicsStreamReader, dict]:
    """A reader holding its latestOffset calls, past its first batch (which is never held)."""
    b.publish(root, "t", ["k"])
    r = reader(root, first_batch_max_commits="100", topic_list_interval="0", **options)
    first = r.latestOffset(r.initialOffset(), r.getDefaultReadLimit())
    assert offset_versions(first) == {"t": 1}
    return r, first


def _publish_then_signal(root: str, delay: float, *, signal: bool = True) -> threading.Thread:
    """After ``delay`` seconds a commit to topic t, then (``signal``) the front end's signal."""

    def later() -> None:
        time.sleep(delay)
        b.publish(root, "t", ["k"] * 5)
        if signal:
            sender = CommitSignal(root)
            sender.send()
            sender.close()

    thread = threading.Thread(target=later)
    thread.start()
    return thread


def _ended_by_the_signal(root: str, r: TopicsStreamReader, first: dict) -> None:
    """A commit and its signal come 0.3 s into ``r``'s 60-second hold: the held call returns
    with the commit, long before the hold's end."""
    thread = _publish_then_signal(root, 0.3)
    began = time.monotonic()
    end = r.latestOffset(first, r.getDefaultReadLimit())
    thread.join()
    assert offset_versions(end) == {"t": 2}
    assert time.monotonic() - began < 30  # the signal ended the 60-second hold


def test_a_held_call_starts_the_batch_at_the_commit_signal_not_at_the_end_of_the_hold(root: str) -> None:
    r, first = _held_reader(root, hold="60", batch_interval="0.05", batch_max_wait="0.15", batch_min_rows="5")
    _ended_by_the_signal(root, r, first)


def test_without_a_signal_a_held_call_gives_up_after_the_hold_and_the_next_one_finds_the_commit(root: str) -> None:
    r, first = _held_reader(root, hold="0.3", batch_interval="0.05")
    assert r.latestOffset(first, r.getDefaultReadLimit()) == first  # nothing came: no batch
    thread = _publish_then_signal(root, 0.0, signal=False)  # a writer that sends no signal
    thread.join()
    assert offset_versions(r.latestOffset(first, r.getDefaultReadLimit())) == {"t": 2}


def test_a_held_call_waits_for_company_until_the_oldest_commit_waited_then_starts_unsignalled(root: str) -> None:
    r, first = _held_reader(root, hold="60", batch_interval="0", batch_max_wait="0.4", batch_min_rows="50")
    b.publish(root, "t", ["k"])  # one row, far fewer than 50: it waits batch_max_wait
    began = time.monotonic()
    end = r.latestOffset(first, r.getDefaultReadLimit())
    assert offset_versions(end) == {"t": 2}
    assert 0.3 <= time.monotonic() - began < 30  # it waited for company, then started by itself


def test_batches_start_at_most_once_per_interval_on_average_under_load(root: str) -> None:
    r, first = _held_reader(root, hold="60", batch_interval="0.5")
    b.publish(root, "t", ["k"])
    second = r.latestOffset(first, r.getDefaultReadLimit())  # the first held batch: at once
    assert offset_versions(second) == {"t": 2}
    began = time.monotonic()
    b.publish(root, "t", ["k"])
    third = r.latestOffset(second, r.getDefaultReadLimit())
    assert offset_versions(third) == {"t": 3}
    assert time.monotonic() - began >= 0.2  # up to half an interval early (batch_hold.Pace) ...
    began = time.monotonic()
    b.publish(root, "t", ["k"])
    fourth = r.latestOffset(third, r.getDefaultReadLimit())
    assert offset_versions(fourth) == {"t": 4}
    assert time.monotonic() - began >= 0.4  # ... but not again: one batch per interval on average


def test_a_batch_held_for_the_interval_waits_for_the_next_commit_and_starts_with_it(root: str) -> None:
    r, first = _held_reader(root, hold="60", batch_interval="0.3", align="30")
    time.sleep(0.35)  # the interval is over: the next batch is not held for it
    b.publish(root, "t", ["k"])
    time.sleep(0.05)  # (older than batch_hold.FRESH)
    began = time.monotonic()
    second = r.latestOffset(first, r.getDefaultReadLimit())  # not held for the interval: at once
    assert offset_versions(second) == {"t": 2}
    assert time.monotonic() - began < 20  # no wait for alignment (30 s)
    b.publish(root, "t", ["k"])  # version 3, held for the interval; old by the time it is over
    thread = _publish_then_signal(root, 1.0)  # version 4 and its signal a second later
    began = time.monotonic()
    third = r.latestOffset(second, r.getDefaultReadLimit())
    thread.join()
    assert offset_versions(third) == {"t": 4}  # it waited for the next commit and took it too
    assert time.monotonic() - began < 20  # the signal, not align (30 s), ended the wait


def test_available_now_is_never_held(root: str) -> None:
    b.publish(root, "t", ["k"])
    r = reader(root, hold="60", batch_interval="60", first_batch_max_commits="100")
    r.prepareForTriggerAvailableNow()
    first = r.latestOffset(r.initialOffset(), r.getDefaultReadLimit())
    began = time.monotonic()
    assert r.latestOffset(first, r.getDefaultReadLimit()) == first  # the target reached: at once
    assert time.monotonic() - began < 30


def test_a_batch_starts_at_once_when_enough_rows_wait(root: str) -> None:
    b.publish(root, "t", ["k"])
    r = reader(root, batch_max_wait="3600", batch_min_rows="5", first_batch_max_commits="100", topic_list_interval="0")
    first = r.latestOffset(r.initialOffset(), r.getDefaultReadLimit())
    b.publish(root, "t", ["k"] * 3)
    assert r.latestOffset(first, r.getDefaultReadLimit()) == first
    b.publish(root, "t", ["k"] * 2)  # five rows wait: no more waiting, however long max_wait
    assert offset_versions(r.latestOffset(first, r.getDefaultReadLimit())) == {"t": 3}
    b.publish(root, "other", ["k"])  # a topic new to the offset starts a batch at once
    assert "other" in offset_versions(r.latestOffset(make_offset({"t": 3}, offset_ids(first)), r.getDefaultReadLimit()))


def _idle_reader(root: str, monkeypatch: pytest.MonkeyPatch, **options: str) -> tuple[TopicsStreamReader, dict]:
    """A reader on the trigger grid that holds idle asks, past its first batch, already quiet for
    longer than idle_hold.QUIET (shortened to 0.2 s here)."""
    monkeypatch.setattr(idle_hold, "QUIET", 0.2)
    r, first = _held_reader(root, **options)
    time.sleep(0.25)
    return r, first


def test_an_idle_ask_is_held_until_a_commit_signal_and_finds_the_commit(root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    r, first = _idle_reader(root, monkeypatch, idle_hold="60")
    _ended_by_the_signal(root, r, first)


def test_an_idle_ask_without_a_signal_returns_nothing_new_after_the_hold_and_the_next_finds_the_commit(
    root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    r, first = _idle_reader(root, monkeypatch, idle_hold="0.3")
    began = time.monotonic()
    assert r.latestOffset(first, r.getDefaultReadLimit()) == first
    assert time.monotonic() - began >= 0.25  # held, not asked again at once
    _publish_then_signal(root, 0.0, signal=False).join()  # a writer that sends no signal
    assert offset_versions(r.latestOffset(first, r.getDefaultReadLimit())) == {"t": 2}


def test_a_signal_of_a_commit_probed_already_does_not_end_an_idle_hold(root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    r, first = _idle_reader(root, monkeypatch, idle_hold="0.5")
    assert r.latestOffset(first, r.getDefaultReadLimit()) == first  # (makes the listener)
    sender = CommitSignal(root)
    sender.send()  # nothing new behind it
    sender.close()
    began = time.monotonic()
    assert r.latestOffset(first, r.getDefaultReadLimit()) == first
    assert time.monotonic() - began >= 0.4


def test_a_held_call_once_idle_holds_for_idle_hold_and_a_signal_still_ends_it(root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches started at commits: a call that finds nothing, once nothing came for
    idle_hold.QUIET, is held for idle_hold, not for the shorter hold (an idle service costs one
    ask per idle_hold); a commit's signal still starts the batch at once."""
    r, first = _idle_reader(root, monkeypatch, hold="0.1", batch_interval="0.1", idle_hold="0.6")
    began = time.monotonic()
    assert r.latestOffset(first, r.getDefaultReadLimit()) == first
    assert time.monotonic() - began >= 0.5  # idle_hold, not hold
    r2, first2 = _idle_reader(root + "-2", monkeypatch, hold="0.1", batch_interval="0.1", idle_hold="60")
    _ended_by_the_signal(root + "-2", r2, first2)


def test_a_held_call_is_not_held_longer_while_commits_come(root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(idle_hold, "QUIET", 30.0)
    r, first = _held_reader(root, hold="0.1", batch_interval="0.1", idle_hold="60")
    began = time.monotonic()
    assert r.latestOffset(first, r.getDefaultReadLimit()) == first  # found something less than QUIET ago
    assert time.monotonic() - began < 10  # the hold (0.1 s), not idle_hold


def test_asks_are_not_held_while_commits_come(root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(idle_hold, "QUIET", 30.0)
    r, first = _held_reader(root, idle_hold="60")
    began = time.monotonic()
    assert r.latestOffset(first, r.getDefaultReadLimit()) == first  # found something less than QUIET ago
    assert time.monotonic() - began < 10


def test_available_now_is_never_held_when_idle(root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(idle_hold, "QUIET", 0.0)
    b.publish(root, "t", ["k"])
    r = reader(root, idle_hold="60", first_batch_max_commits="100")
    r.prepareForTriggerAvailableNow()
    first = r.latestOffset(r.initialOffset(), r.getDefaultReadLimit())
    began = time.monotonic()
    assert r.latestOffset(first, r.getDefaultReadLimit()) == first
    assert time.monotonic() - began < 10
