"""The payload index over a topic table: overlapping seq ranges (compaction bins files that were not
neighbours) and files that vanished since the index was loaded (compaction or retention, then vacuum)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from sharedsub.storage import delta, layout, schemas
from tests import builders as b


def _append(path: str, seqs: list[int]) -> None:
    rows = [{"seq": s, "published_at": b.T0, "message": f"m{s}".encode()} for s in seqs]
    delta.TableAppender(path, schemas.TOPIC).append(pa.Table.from_pylist(rows, schema=schemas.TOPIC))


def test_a_seq_in_overlapping_ranges_is_read_from_the_file_that_holds_it(tmp_path: Path) -> None:
    root = str(tmp_path)
    path = b.topic(root, "t")
    _append(path, [0, 1, 2, 3, 4, 10, 11, 12, 13, 14])  # range 0..14
    _append(path, [5, 6, 7, 8, 9])  # range 5..9, inside it
    _append(path, [15, 16])
    index = delta.TopicIndex(path)
    candidates = index.files_for(range(17))
    assert sorted(len(seqs) for seqs in candidates.values()) == [2, 5, 15]  # 5..9 may be in either file
    assert delta.read_messages(index, range(17)) == {s: f"m{s}".encode() for s in range(17)}
    assert delta.read_messages(index, [99]) == {}


def test_files_that_vanished_since_the_index_loaded_are_looked_up_again(tmp_path: Path) -> None:
    root = str(tmp_path)
    for _ in range(4):
        b.publish(root, "t", ["k"] * 5)
    path = layout.topic_table(root, "t")
    index = delta.TopicIndex(path)
    index.refresh()
    assert delta.compact(path) == 4
    delta.vacuum(path, 0)  # the four files the index names are deleted
    assert delta.read_messages(index, range(20)) == {s: f"m{s}".encode() for s in range(20)}
