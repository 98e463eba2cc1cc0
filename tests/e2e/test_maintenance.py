"""Maintenance in a running service: acknowledged rows leave the subscription table while
consumers keep receiving every message exactly once (the rows a maintenance delete rewrites are
not taken for new ones)."""

from __future__ import annotations

from pathlib import Path

import pytest
from proton import Message

from sharedsub.storage import delta, layout
from tests.amqp_peer import Subscriber, jms_durable, publish, wait_for
from tests.e2e.test_outcomes import record
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e

FAST_MAINTENANCE = {
    "SHAREDSUB_MAINTENANCE_INTERVAL": "0.5",
    "SHAREDSUB_MAINTENANCE_MIN_ACKED_ROWS": "10",
    "SHAREDSUB_MAINTENANCE_COMPACT_MIN_FILES": "3",
}


def _rows(data_dir: Path, name: str) -> list[int]:
    rec = record(data_dir, name)
    data = delta.read_table(layout.join(str(data_dir), rec.table), ["seq"])
    return sorted(data.column("seq").to_pylist()) if data is not None else []


def test_acknowledged_rows_are_deleted_and_nothing_is_delivered_twice(tmp_path: Path) -> None:
    delta.create_topic(str(tmp_path), "maint")
    service = ServeProcess(tmp_path, env=FAST_MAINTENANCE).start()
    try:
        with Subscriber(service.url, "maint", container_id="maint-client", **jms_durable("keeper")) as sub:
            sub.wait_attached()
            for batch in range(5):  # five publishes: several small commits to compact
                publish(service.url, "maint", [Message(body=batch * 10 + i) for i in range(10)])
            sub.wait_count(50)
            # All 50 accepted: maintenance deletes them from the subscription table.
            wait_for(lambda: _rows(tmp_path, "keeper") == [], 120, "acknowledged rows deleted")

            publish(service.url, "maint", [Message(body=50 + i) for i in range(10)])
            sub.wait_count(60)
            wait_for(lambda: _rows(tmp_path, "keeper") == [], 120, "second delete")
            # A marker after the second delete: once it arrives, the tailer has read every commit
            # before it, maintenance commits included.
            publish(service.url, "maint", [Message(body="marker")])
            got = sub.wait_count(61)
            assert [r.message.body for r in got] == [*range(60), "marker"]
            assert all(r.delivery_count == 0 for r in got)
    finally:
        assert service.stop() == 0, service.log()[-3000:]


def test_rows_a_delete_rewrites_are_not_delivered_again(tmp_path: Path) -> None:
    """One commit of ten messages is one file; with 5 held unsettled, the delete of 0..4 rewrites
    that file with 5..9 re-added. Those are not new rows: 6..9 were delivered and accepted
    already, 5 is still outstanding."""
    delta.create_topic(str(tmp_path), "maint2")
    env = dict(FAST_MAINTENANCE, SHAREDSUB_MAINTENANCE_MIN_ACKED_ROWS="3")
    service = ServeProcess(tmp_path, env=env).start()
    try:
        policy = {"settle": lambda got: "none" if got.message.body == 5 else "accept"}
        with Subscriber(service.url, "maint2", container_id="maint2-client", **policy, **jms_durable("holder")) as sub:
            sub.wait_attached()
            publish(service.url, "maint2", [Message(body=i) for i in range(10)])
            sub.wait_count(10)
            try:
                wait_for(lambda: _rows(tmp_path, "holder") == list(range(5, 10)), 240, "rows 0..4 deleted, 5..9 rewritten")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; rows {_rows(tmp_path, 'holder')}; log:\n{service.log()[-4000:]}") from None
            publish(service.url, "maint2", [Message(body="marker")])
            got = sub.wait_count(11)
            assert [r.message.body for r in got] == [*range(10), "marker"]
    finally:
        assert service.stop() == 0, service.log()[-3000:]
