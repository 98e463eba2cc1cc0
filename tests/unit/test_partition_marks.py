"""sharedsub.core.fanout.partition_marks as tables: what a commit of routed rows writes, and the marks it moves."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sharedsub.core.fanout.partition_marks import above_marks, rows_to_commit

P = 1 << 40  # the first seq of topic partition 1 (sharedsub.core.layout)


def seqs(*values: int) -> pa.Table:
    return pa.table({"seq": pa.array(values, pa.int64())})


@pytest.mark.parametrize(
    ("rows", "done", "written", "marks"),
    [
        (seqs(1, 2, 3, 4, 5), {}, [1, 2, 3, 4, 5], [("app", 5)]),
        (seqs(1, 2, 3, 4, 5), {"app": 3}, [4, 5], [("app", 5)]),
        (seqs(1, 2, 3, 4, 5), {"app": 5}, None, []),  # a replayed batch: nothing
        (seqs(1, 2, 3, 4, 5), {"app": 9}, None, []),
        (seqs(1, 2, P + 1), {"app": 2}, [P + 1], [("app-p1", P + 1)]),
        (seqs(1, 2, P + 1, P + 2), {"app-p1": P + 1}, [1, 2, P + 2], [("app", 2), ("app-p1", P + 2)]),
        (seqs(P + 1, P + 2), {"app": 100}, [P + 1, P + 2], [("app-p1", P + 2)]),  # partition 0's mark is not p1's
        (seqs(), {}, None, []),
    ],
)
def test_rows_to_commit(rows: pa.Table, done: dict[str, int], written: list[int] | None, marks: list[tuple[str, int]]) -> None:
    asked: list[str] = []

    def version(app_id: str) -> int | None:
        asked.append(app_id)
        return done.get(app_id)

    data, moved = rows_to_commit(rows, "app", version)
    assert (None if data is None else data.column("seq").to_pylist()) == written
    assert moved == marks
    assert len(asked) == len(set(asked))  # each partition's mark asked once


@pytest.mark.parametrize(
    ("marks", "kept"),
    [
        ({}, [1, 2, P + 1]),
        ({0: 1}, [2, P + 1]),
        ({0: 2, 1: P + 1}, []),
        ({1: P}, [1, 2, P + 1]),
    ],
)
def test_above_marks(marks: dict[int, int], kept: list[int]) -> None:
    assert above_marks(seqs(1, 2, P + 1), marks).column("seq").to_pylist() == kept
