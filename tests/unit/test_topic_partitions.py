"""Topic partitions in the layout: table names and seq numbering (sharedsub.core.layout)."""

from __future__ import annotations

import pytest

from sharedsub.core import layout

# (directory name under topics/, (topic, partition) or None)
DIRS = [
    ("orders", ("orders", 0)),
    ("orders~p1", ("orders", 1)),
    ("orders~p12", ("orders", 12)),
    ("a.b-c_d~p3", ("a.b-c_d", 3)),
    ("orders~p0", None),  # partition 0 is the topic's own name
    ("orders~p01", None),
    ("orders~p", None),
    ("orders~px", None),
    ("~p1", None),
    ("or~ders", None),
    ("_delta_log", None),
    (".hidden", None),
]


@pytest.mark.parametrize(("name", "parsed"), DIRS)
def test_a_topic_directory_parses_to_its_topic_and_partition(name: str, parsed: tuple[str, int] | None) -> None:
    assert layout.parse_topic_dir(name) == parsed
    if parsed is not None:
        assert layout.topic_partition_dir(*parsed) == name


def test_partition_tables_are_siblings_and_partition_0_is_the_topic_table() -> None:
    assert layout.topic_partition_table("s3://b/d", "t", 0) == layout.topic_table("s3://b/d", "t") == "s3://b/d/topics/t"
    assert layout.topic_partition_table("/data", "t", 2) == "/data/topics/t~p2"


@pytest.mark.parametrize("partition", [0, 1, 7, (1 << 23) - 1])
def test_each_partition_numbers_its_seqs_apart(partition: int) -> None:
    base = layout.partition_seq_base(partition)
    assert layout.partition_of_seq(base) == partition
    assert layout.partition_of_seq(base + (1 << 40) - 1) == partition
    assert layout.partition_of_seq(base + (1 << 40)) == partition + 1
    assert base + (1 << 40) - 1 < 2**63  # an int64 key
