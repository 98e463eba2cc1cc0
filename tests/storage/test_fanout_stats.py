"""The fan-out statistics file as the front end reads it: an unreadable file is logged once, not on
every read; the lag of a topic is the age of its first commit past the routed version."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sharedsub.core import layout
from sharedsub.core.model import SubscriptionRecord
from sharedsub.storage.delta.tables import log_file
from sharedsub.storage.fanout_stats import StatsRecorder, read_stats, topic_lag
from tests import builders as b


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
