"""Retention rules as tables: the topic cut, subscription holds, catalog trim, fan-out progress."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pytest

from sharedsub.core.ops.retention import (
    FanoutProgress,
    Revision,
    TopicFile,
    catalog_revisions_to_drop,
    first_unsettled,
    lowest_by_partition,
    parked_hold,
    parse_offset_file,
    subscription_hold,
    topic_cut,
    topic_hold,
)

OLD, NEW = 1_000, 9_000  # newest published_at of a file, ms; the cut takes files published before 5_000
BEFORE = 5_000


def f(first: int | None, last: int | None, *, routed: bool = True, published: int | None = OLD) -> TopicFile:
    return TopicFile(first, last, published, routed)


# (files, hold, cut)
CUTS = [
    ([], None, None),
    ([f(0, 9)], None, None),  # the newest file always stays
    ([f(0, 9), f(10, 19), f(20, 29)], None, 19),
    ([f(20, 29), f(0, 9), f(10, 19)], None, 19),  # file order does not matter
    ([f(0, 9), f(10, 19), f(20, 29)], 15, 9),  # a hold inside a file keeps that file
    ([f(0, 9), f(10, 19), f(20, 29)], 10, 9),  # ...and from its first seq
    ([f(0, 9), f(10, 19), f(20, 29)], 0, None),
    ([f(0, 9), f(10, 19, routed=False), f(20, 29)], None, 9),  # not routed: stops there
    ([f(0, 9, routed=False), f(10, 19), f(20, 29)], None, None),
    ([f(0, 9), f(10, 19, published=NEW), f(20, 29)], None, 9),  # too young: stops there
    ([f(0, 9), f(10, 19, published=None), f(20, 29)], None, 9),  # no publish time: stays
    ([f(0, 9), f(10, 19, published=BEFORE), f(20, 29)], None, 9),  # published at the bound: stays
    ([f(0, 9), f(None, None), f(20, 29)], None, None),  # a file without statistics: no cut
    # Compaction left overlapping ranges: the cut only falls where no file reaches over it.
    ([f(0, 30), f(10, 19), f(31, 40), f(41, 50)], None, 40),
    ([f(0, 30), f(10, 19), f(31, 40), f(41, 50)], 35, 30),
    ([f(0, 30), f(10, 19), f(31, 40), f(41, 50)], 20, None),  # 10..19 is held, 0..30 spans it
    ([f(0, 9), f(5, 50), f(20, 29)], None, None),  # the newest file (to 50) overlaps them all
    ([f(0, 9), f(10, 40), f(20, 29), f(41, 50)], None, 40),
]


@pytest.mark.parametrize(("files", "hold", "cut"), CUTS)
def test_topic_cut(files: list[TopicFile], hold: int | None, cut: int | None) -> None:
    assert topic_cut(files, hold=hold, published_before_ms=BEFORE) == cut


P1 = 1 << 40  # partition 1's first seq (sharedsub.core.layout)

# (routed, settled, first unsettled per partition)
OPEN = [
    ([], [], {}),
    ([3, 4, 5], [3, 4, 5], {}),
    ([3, 4, 5], [3, 5], {0: 4}),
    ([5, 3, 4], [], {0: 3}),
    ([3, 4], [1, 2, 3, 9], {0: 4}),  # settled seqs never routed are ignored
    ([3, 4, P1, P1 + 1], [3, P1], {0: 4, 1: P1 + 1}),  # each partition its own
    ([3, P1 + 7, P1 + 5], [3], {1: P1 + 5}),  # partition 0 settled: holds nothing there
]


@pytest.mark.parametrize(("routed", "settled", "expected"), OPEN)
def test_first_unsettled(routed: list[int], settled: list[int], expected: dict[int, int]) -> None:
    assert first_unsettled(np.array(routed, np.int64), np.array(settled, np.int64)) == expected


def test_lowest_by_partition() -> None:
    assert lowest_by_partition(np.array([], np.int64)) == {}
    assert lowest_by_partition(np.array([2 * P1 + 3, 9, P1 + 4, 7, P1 + 2], np.int64)) == {0: 7, 1: P1 + 2, 2: 2 * P1 + 3}


# (durable, first open, lowest retained, hold)
HOLDS = [
    (False, {}, {}, {}),  # non-durable, everything settled: holds nothing
    (False, {0: 7}, {0: 2}, {0: 7}),  # non-durable: the retained files do not matter (no replay)
    (True, {0: 7}, {0: 2}, {0: 2}),  # durable: replays inside the retention read the retained files
    (True, {}, {0: 2}, {0: 2}),  # ...even when everything is settled
    (True, {}, {}, {}),  # nothing routed, nothing retained
    (True, {0: 7}, {}, {0: 7}),
    (True, {1: P1 + 9}, {0: 2, 1: P1 + 4}, {0: 2, 1: P1 + 4}),  # per partition
    (False, {0: 7, 1: P1}, {}, {0: 7, 1: P1}),
]


@pytest.mark.parametrize(("durable", "first_open", "retained", "expected"), HOLDS)
def test_subscription_hold(
    durable: bool, first_open: dict[int, int], retained: dict[int, int], expected: dict[int, int]
) -> None:
    assert subscription_hold(durable=durable, first_open=first_open, lowest_retained=retained) == expected


def test_topic_hold_is_the_lowest_per_partition() -> None:
    assert topic_hold([]) == {} and topic_hold([{}, {}]) == {}
    assert topic_hold([{}, {0: 9}, {0: 4, 1: P1 + 8}, {1: P1 + 3}]) == {0: 4, 1: P1 + 3}


# (first seqs of parked files, the topic's partitions, hold)
PARKED = [
    ([], [0, 1], {}),
    ([12], [0], {0: 12}),
    ([12, 5], [0, 1, 2], {0: 5, 1: P1, 2: 2 * P1}),  # later partitions may be in the files: whole
    ([P1 + 6], [0, 1, 2], {1: P1 + 6, 2: 2 * P1}),  # nothing of partition 0 can be there
]


@pytest.mark.parametrize(("firsts", "partitions", "expected"), PARKED)
def test_parked_rows_hold_their_partition_from_their_first_seq_and_later_ones_whole(
    firsts: list[int], partitions: list[int], expected: dict[int, int]
) -> None:
    assert parked_hold(firsts, partitions) == expected


NOW = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
WEEK = dt.timedelta(days=7)
OLD_T, RECENT_T = NOW - dt.timedelta(days=8), NOW - dt.timedelta(days=1)


def rev(key: str, revision: int, when: dt.datetime, *, deleted: bool = False, plain: bool = False) -> Revision:
    return Revision(key, revision, deleted, plain, when)


# (rows, keys with tables, revisions dropped)
TRIMS = [
    ([], [], []),
    # A superseded revision goes once the revision after it is older than the retention.
    ([rev("a", 1, OLD_T), rev("a", 2, OLD_T), rev("b", 3, RECENT_T)], ["a", "b"], [1]),
    ([rev("a", 1, OLD_T), rev("a", 2, RECENT_T), rev("b", 3, RECENT_T)], ["a", "b"], []),
    ([rev("a", 1, OLD_T), rev("a", 2, OLD_T), rev("a", 4, OLD_T), rev("b", 5, RECENT_T)], ["a"], [1, 2]),
    # The newest revision stays, deleted or not (generations are numbered after it)...
    ([rev("a", 1, OLD_T), rev("a", 2, OLD_T, deleted=True), rev("b", 3, RECENT_T)], [], [1]),
    # ...but a deleted plain consumer's goes once its tables are gone and the retention passed.
    ([rev("p", 1, OLD_T, plain=True), rev("p", 2, OLD_T, deleted=True, plain=True), rev("b", 3, RECENT_T)], [], [1, 2]),
    ([rev("p", 1, OLD_T, plain=True), rev("p", 2, OLD_T, deleted=True, plain=True), rev("b", 3, RECENT_T)], ["p"], [1]),
    ([rev("p", 1, OLD_T, plain=True), rev("p", 2, RECENT_T, deleted=True, plain=True), rev("b", 3, RECENT_T)], [], []),
    ([rev("p", 1, OLD_T, plain=True), rev("b", 3, RECENT_T)], [], []),  # an active plain one stays
    # The catalog's highest revision always stays: new revisions are numbered after it.
    ([rev("b", 1, OLD_T), rev("p", 2, OLD_T, deleted=True, plain=True)], [], []),
]


@pytest.mark.parametrize(("rows", "with_tables", "expected"), TRIMS)
def test_catalog_revisions_to_drop(rows: list[Revision], with_tables: list[str], expected: list[int]) -> None:
    assert catalog_revisions_to_drop(rows, keys_with_tables=with_tables, now=NOW, retention=WEEK) == expected


def offset_file(offset: object) -> str:
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {}}
    return "v1\n" + json.dumps(meta) + "\n" + (offset if isinstance(offset, str) else json.dumps(offset))


def test_parse_offset_file() -> None:
    offset = {"topics": {"t": 3}, "ids": {"t": "id-t"}}
    assert parse_offset_file(offset_file(offset)) == offset
    assert parse_offset_file(offset_file(json.dumps(json.dumps(offset)))) == offset  # as a JSON string
    assert parse_offset_file(offset_file("-")) is None
    assert parse_offset_file("v1\n{}") is None


# (progress, topic, table id, routed version)
ROUTED = [
    (FanoutProgress(), "t", "id", -1),
    (FanoutProgress({"t": 3}, {"t": "id"}, found=True), "t", "id", 3),
    (FanoutProgress({"t": 3}, {"t": "id"}, found=True), "t", "other", -1),  # dropped and created again
    (FanoutProgress({"t": 3}, {"t": "id"}, found=True), "t", None, -1),  # no table
    (FanoutProgress({"t": 3}, {}, found=True), "t", "id", -1),  # an offset without ids: unknown table
    (FanoutProgress({"t": 3}, {"t": "id"}, found=True), "u", "id", -1),
]


@pytest.mark.parametrize(("progress", "topic", "table_id", "expected"), ROUTED)
def test_routed_version(progress: FanoutProgress, topic: str, table_id: str | None, expected: int) -> None:
    assert progress.routed_version(topic, table_id) == expected


# (progress, catalog written at, writes follow it)
FOLLOW = [
    (FanoutProgress(), 100, False),  # no checkpoint: the fan-out may run with one elsewhere
    (FanoutProgress(found=True), 100, True),  # nothing in flight
    (FanoutProgress(planned_ms=150, found=True), 100, True),  # planned after the catalog commit
    (FanoutProgress(planned_ms=100, found=True), 100, False),
    (FanoutProgress(planned_ms=50, found=True), 100, False),  # may have read the catalog before it
]


@pytest.mark.parametrize(("progress", "written", "expected"), FOLLOW)
def test_writes_follow(progress: FanoutProgress, written: int, expected: bool) -> None:
    assert progress.writes_follow(written) is expected
