"""sharedsub.core.fanout.routing_place as tables: where a batch is routed, what a commit takes."""

from __future__ import annotations

import pytest

from sharedsub.core.fanout.routing_place import FilePlan, Placement, batch_work, commits_in_tasks, placement, plan_files

D, E = Placement.DRIVER, Placement.EXECUTORS


@pytest.mark.parametrize(
    ("mode", "executors", "work", "expected"),
    [
        ("driver", 0, None, D),
        ("driver", 8, 10**9, D),
        ("executors", 0, 1, E),
        ("executors", 2, None, E),
        ("auto", 0, 10**9, D),  # a local master: tasks share the driver's cores
        ("auto", 0, None, D),
        ("auto", 1, None, E),  # the driver did not read the batch: executors read and route it
        ("auto", 2, 999, D),
        ("auto", 2, 1000, E),
        ("auto", 2, 0, D),
    ],
)
def test_placement(mode: str, executors: int, work: int | None, expected: Placement) -> None:
    assert placement(mode, executors=executors, work=work, executor_min_work=1000) is expected


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="driver, executors, auto"):
        placement("cluster", executors=1, work=1, executor_min_work=1)


@pytest.mark.parametrize(
    ("ranges", "done", "expected"),
    [
        ([], None, FilePlan((), (), ())),
        ([(0, 9), (10, 19)], None, FilePlan((0, 1), (), ())),
        ([(0, 9), (10, 19)], -1, FilePlan((0, 1), (), ())),
        ([(0, 9), (10, 19)], 9, FilePlan((1,), (), (0,))),  # a crash after an earlier commit of 0-9
        ([(0, 9), (10, 19)], 19, FilePlan((), (), (0, 1))),  # a replayed batch: nothing new
        ([(0, 9), (10, 19)], 25, FilePlan((), (), (0, 1))),
        ([(0, 9), (10, 19)], 14, FilePlan((), (1,), (0,))),  # a lost checkpoint: a file straddles done
        ([(5, 5)], 4, FilePlan((0,), (), ())),
        ([(5, 5)], 5, FilePlan((), (), (0,))),
    ],
)
def test_plan_files(ranges: list[tuple[int, int]], done: int | None, expected: FilePlan) -> None:
    assert plan_files(ranges, done) == expected


@pytest.mark.parametrize(
    ("tables", "min_tables", "expected"),
    [(0, 0, False), (10_000, 0, False), (199, 200, False), (200, 200, True), (1, 1, True), (0, 1, False)],
)
def test_commits_in_tasks(tables: int, min_tables: int, expected: bool) -> None:
    assert commits_in_tasks(tables, min_tables=min_tables) is expected


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (None, None),  # the driver did not plan the batch
        ([], 0),
        ([("a", 10)], 20),
        ([("a", 10), ("b", 5), ("a", 1)], 20 + 15 + 2),
        ([("a", 10), ("c", 1000)], 20),  # no route reads c
        ([("a", 10), ("b", None)], None),  # a part's rows unknown
        ([("a", 0)], 0),
    ],
)
def test_batch_work(parts: list[tuple[str, int | None]] | None, expected: int | None) -> None:
    assert batch_work(parts, {"a": 2, "b": 3}) == expected
