"""The sharedsub_topics stream reader: offsets, caps, AvailableNow target, files, batches.

The reader's driver side is plain Python, so most of it is tested by calling it directly; the
streaming path through Spark is covered by test_fanout.py.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxFiles

from sharedsub.storage import schemas
from sharedsub.storage.spark_source import ARROW_SCHEMA, SPARK_SCHEMA, TopicFiles, TopicsStreamReader, make_offset
from tests import builders as b

pytestmark = pytest.mark.spark


def reader(root: str, **options: str) -> TopicsStreamReader:
    return TopicsStreamReader({"data_dir": root, **options})


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
    assert first == make_offset({"t": 0})  # first_batch_max_commits = 1: only the creation commit
    second = r.latestOffset(first, r.getDefaultReadLimit())
    assert second == make_offset({"t": 2})
    assert r.latestOffset(second, ReadAllAvailable()) == make_offset({"t": 5})
    assert r.latestOffset(second, ReadMaxFiles(1)) == make_offset({"t": 3})


def test_new_topic_is_picked_up_at_minus_one(root: str) -> None:
    b.publish(root, "a", ["k"])
    r = reader(root, topic_list_interval="0", first_batch_max_commits="100")
    end = r.latestOffset(r.initialOffset(), ReadAllAvailable())
    assert end == make_offset({"a": 1})
    b.publish(root, "late", ["k", "k"])
    assert r.latestOffset(end, ReadAllAvailable()) == make_offset({"a": 1, "late": 1})


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


def test_partitions_fail_clearly_when_the_log_was_cleaned(root: str) -> None:
    import os

    from sharedsub.storage import delta, layout

    b.publish(root, "t", ["k"])
    b.publish(root, "t", ["k"])
    os.remove(delta.log_file(layout.topic_table(root, "t"), 1))
    with pytest.raises(RuntimeError, match="log retention"):
        reader(root).partitions(make_offset({"t": 0}), make_offset({"t": 2}))


def test_a_topic_whose_early_log_was_cleaned_is_read_from_its_snapshot(root: str) -> None:
    import os

    from deltalake import DeltaTable

    from sharedsub.storage import delta, layout

    for _ in range(3):
        b.publish(root, "t", ["k", "k"])  # versions 1..3
    path = layout.topic_table(root, "t")
    DeltaTable(path).create_checkpoint()  # at version 3: log cleanup may then drop 0..2.json
    for version in range(3):
        os.remove(delta.log_file(path, version))
    b.publish(root, "t", ["k"])  # version 4
    r = reader(root, max_commits_per_batch="1")
    start = r.initialOffset()
    end = r.latestOffset(start, r.getDefaultReadLimit())
    assert end == make_offset({"t": 4})  # no commit-by-commit cap without the commits
    table = pa.Table.from_batches([batch for p in r.partitions(start, end) for batch in r.read(p)])
    assert sorted(table.column("seq").to_pylist()) == [0, 1, 2, 3, 4, 5, 6]
