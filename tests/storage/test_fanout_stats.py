"""The fan-out statistics file as the front end reads it: an unreadable file is logged once, not on
every read; the lag of a topic is the age of its first commit past the routed version; counters
are written at most every write interval, the last change always, a failing table at once."""

from __future__ import annotations

import datetime
import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from sharedsub.core import layout
from sharedsub.core.model import SubscriptionRecord
from sharedsub.storage.delta.tables import log_file
from sharedsub.storage.fanout_stats import SourceSummary, StatsRecorder, read_stats, topic_lag
from tests import builders as b

_T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
_S = datetime.timedelta(seconds=1)


def test_an_unreadable_stats_file_is_logged_when_it_starts_and_when_it_clears(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = str(tmp_path)
    caplog.set_level(logging.INFO, logger="sharedsub.storage.fanout_stats")
    assert read_stats(root) is None  # not written yet: nothing to say
    path = layout.fanout_stats_file(root)
    os.makedirs(os.path.dirname(path))
    Path(path).write_text('{"batches": ')  # as a damaged disk could leave it
    for _ in range(100):  # a scrape every few seconds for minutes
        assert read_stats(root) is None
    Path(path).write_text(json.dumps({"batches": 3}))
    assert read_stats(root) == {"batches": 3}
    assert read_stats(root) == {"batches": 3}
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert lines == [
        ("WARNING", f"cannot read the fan-out statistics {path}"),
        ("INFO", f"the fan-out statistics {path} are readable again (after 0 s; 99 repeats not logged)"),
    ]


def test_topic_lag_is_the_age_of_the_first_commit_not_routed(tmp_path: Path) -> None:
    root = str(tmp_path)
    b.publish(root, "t", ["k"])  # versions 0 (creation) and 1
    b.publish(root, "t", ["k"])  # version 2
    table = layout.topic_table(root, "t")
    made = os.stat(log_file(table, 2)).st_mtime
    assert topic_lag(root, "t", 2, time.time()) == 0.0  # everything routed
    assert topic_lag(root, "t", 1, made + 30.0) == pytest.approx(30.0)  # version 2 waits
    assert topic_lag(root, "t", 1, made - 1.0) == 0.0  # never negative (clock steps)
    assert topic_lag(root, "gone", -1, time.time()) == 0.0  # no such topic: nothing waits


def test_routed_rows_are_counted_per_subscription_reading_the_plan_only_for_new_tables(tmp_path: Path) -> None:
    """A batch's rows per table go to the subscription of that table; the plan's records are
    read when a table was not seen before, not at every batch; a table of no record is not counted."""
    root = str(tmp_path)
    first, second = b.subscription("t"), b.subscription("u")
    stats = StatsRecorder(root)

    def table(record: SubscriptionRecord) -> str:
        return layout.join(root, record.table)

    def unread() -> Iterator[SubscriptionRecord]:
        raise AssertionError("the records were read for tables already seen")
        yield first  # (a generator)

    stats.count({table(first): 3}, [first, second])
    stats.count({table(first): 2}, unread())
    stats.count({table(first): 1, table(second): 4, layout.join(root, "subscriptions/gone/g1"): 9}, [first, second])
    stats.write()
    document = read_stats(root)
    assert document is not None
    assert document["routed"] == {first.key: {"topic": "t", "rows": 6}, second.key: {"topic": "u", "rows": 4}}


def _batches(root: str) -> object:
    document = read_stats(root)
    return None if document is None else document["batches"]


def test_counters_are_written_at_most_every_interval_and_the_last_change_always(tmp_path: Path) -> None:
    """The first batch is written at once; the next ones within the interval wait for the trailing
    write, which writes the newest counters one interval after the last write, with no further
    call; flush writes what waits at once."""
    root = str(tmp_path)
    stats = StatsRecorder(root, write_interval=0.5)
    stats.batches = 1
    stats.write_soon()
    assert _batches(root) == 1
    written = time.monotonic()
    stats.batches = 2
    stats.write_soon()
    stats.batches = 3
    stats.write_soon()
    if time.monotonic() - written < 0.4:  # (a stalled machine could have passed the interval)
        assert _batches(root) == 1
    deadline = time.monotonic() + 10
    while _batches(root) != 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _batches(root) == 3
    assert time.monotonic() - written >= 0.5
    stats.batches = 4
    stats.write_soon()  # an interval after the trailing write? not yet: it waits
    stats.flush()
    assert _batches(root) == 4


def test_a_change_of_the_failing_tables_is_written_at_once(tmp_path: Path) -> None:
    root = str(tmp_path)
    stats = StatsRecorder(root, write_interval=60.0)
    stats.write_soon()
    stats.failing = {"k": {"topic": "t", "error": "boom"}}
    stats.batches = 7
    stats.write_soon()
    document = read_stats(root)
    assert document is not None and document["failing"] == {"k": {"topic": "t", "error": "boom"}}
    assert document["batches"] == 7
    stats.batches = 8
    stats.write_soon()  # the same failing tables: it waits (an hour here)
    assert _batches(root) == 7
    stats.failing = {}
    stats.write_soon()
    document = read_stats(root)
    assert document is not None and (document["failing"], document["batches"]) == ({}, 8)


def _source(rows: list[tuple[str, datetime.datetime | None]]) -> pa.Table:
    return pa.table(
        {
            "topic": pa.array([topic for topic, _ in rows], pa.string()),
            "published_at": pa.array([when for _, when in rows], pa.timestamp("us", "UTC")),
        }
    )


@pytest.mark.parametrize(
    ("rows", "newest", "oldest"),
    [
        ([], {}, None),
        ([("a", _T0), ("a", _T0 + _S)], {"a": 1.0}, 0.0),
        ([("a", _T0 + 2 * _S), ("b", _T0), ("a", _T0 + _S), ("b", _T0 + 3 * _S)], {"a": 2.0, "b": 3.0}, 0.0),
        ([("a", None), ("b", _T0 + _S)], {"b": 1.0}, 1.0),
        ([("a", None)], {}, None),
    ],
    ids=["empty", "one topic", "two topics interleaved", "a topic without times", "no times"],
)
def test_a_batch_summary_holds_the_newest_publish_time_per_topic(
    rows: list[tuple[str, datetime.datetime | None]], newest: dict[str, float], oldest: float | None
) -> None:
    summary = SourceSummary.of(_source(rows))
    assert summary.messages == len(rows)
    assert {topic: when - _T0.timestamp() for topic, when in summary.newest.items()} == newest
    assert (None if summary.oldest is None else summary.oldest - _T0.timestamp()) == oldest
