"""Topic retention and compaction against the real fan-out job: what maintenance removes or rewrites
in a topic table is never routed again, on the same checkpoint or on a lost one."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from sharedsub.core import layout
from sharedsub.runtime import maintenance
from sharedsub.storage import schemas
from sharedsub.storage.delta.appender import DeltaAppender
from sharedsub.storage.delta.table_reads import read_seqs, read_table
from tests import builders as b
from tests.builders import maintenance_policy
from tests.spark.conftest import make_settings, run_available_now

pytestmark = pytest.mark.spark


def _ack_all(root: str, record: object, seqs: list[int]) -> None:
    n = len(seqs)
    data = {"seq": seqs, "outcome": ["accepted"] * n, "acked_at": [b.T0] * n, "consumer": ["c"] * n}
    table = layout.join(root, layout.ack_table_rel(record.key, record.generation))  # type: ignore[attr-defined]
    DeltaAppender(table, schemas.ACK).append(pa.table(data, schema=schemas.ACK))


def _held(root: str, record: object) -> list[int]:
    """Every row of the subscription table's snapshot (its log was cleaned: not commit by commit);
    a row routed twice shows twice."""
    return sorted(read_seqs(layout.join(root, record.table)).to_pylist())  # type: ignore[attr-defined]


def _topic_seqs(root: str) -> list[int]:
    data = read_table(layout.topic_table(root, "t"), ["seq"])
    return sorted(data.column("seq").to_pylist()) if data is not None else []


def test_trimmed_and_compacted_topic_files_are_not_routed_again(spark: SparkSession, root: str) -> None:
    (plain,) = b.register(root, b.subscription("t", name="v", durable=False))
    for _ in range(6):
        b.publish(root, "t", ["k"] * 5)  # six small files, seqs 0..29
    settings = make_settings(root)
    run_available_now(spark, settings)
    assert b.routed_seqs(root, plain) == list(range(30))

    # Nothing is settled yet (the subscription holds every row); 30..34 are published but not
    # routed yet. Maintenance compacts the routed files (only those). Once everything routed is
    # settled and the fan-out read past the compaction, the next run removes them. No history is
    # kept: vacuum deletes every file the table no longer names, and the topic's log is cleaned
    # up to the routed part.
    b.publish(root, "t", ["k"] * 5)
    policy = maintenance_policy(history_retention_hours=0, topic_retention_hours=0, compact_min_files=3, min_acked_rows=1000)
    first = maintenance.run_once(root, policy)
    assert first.errors == 0 and first.files_compacted >= 6 and first.topic_rows_deleted == 0, first
    run_available_now(spark, settings)
    _ack_all(root, plain, list(range(30)))
    second = maintenance.run_once(root, policy)
    assert second.errors == 0 and second.topic_rows_deleted == 30, second
    assert _topic_seqs(root) == list(range(30, 35))

    # The same checkpoint: new messages are routed, nothing of the old ones again.
    b.publish(root, "t", ["k"] * 5)  # 35..39
    run_available_now(spark, settings)
    assert _held(root, plain) == list(range(40))

    # A lost checkpoint reads the topics from their beginning (here: the snapshot, the early
    # commits are out of the log); the subscription table's app transaction drops what it holds.
    shutil.rmtree(layout.fanout_checkpoint(root))
    b.publish(root, "t", ["k"] * 2)  # 40..41
    run_available_now(spark, settings)
    assert _held(root, plain) == list(range(42))
