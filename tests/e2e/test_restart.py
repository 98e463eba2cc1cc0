"""Stop ``sharedsub serve`` with SIGTERM and start it again on the same data dir."""

from __future__ import annotations

from pathlib import Path

import pytest
from proton import Message

from sharedsub.storage import delta, layout
from tests.amqp_peer import Subscriber, publish
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e


def test_restart_on_same_data_dir(tmp_path: Path) -> None:
    delta.create_topic(str(tmp_path), "orders")
    first = ServeProcess(tmp_path).start()
    try:
        with Subscriber(first.url, "orders") as sub:
            sub.wait_attached()
            outcomes = publish(first.url, "orders", [Message(body=f"a{i}") for i in range(20)])
            assert {o.state for o in outcomes} == {"accepted"}
            sub.wait_count(20)
    finally:
        assert first.stop() == 0, first.log()[-3000:]

    second = ServeProcess(tmp_path).start()
    try:
        with Subscriber(second.url, "orders") as sub:
            sub.wait_attached()
            publish(second.url, "orders", [Message(body=f"b{i}") for i in range(20)])
            got = sub.wait_count(20)
            assert [r.message.body for r in got] == [f"b{i}" for i in range(20)]
    finally:
        assert second.stop() == 0, second.log()[-3000:]
    data = delta.read_table(layout.topic_table(str(tmp_path), "orders"), ["seq"])
    assert data is not None
    # Every accepted message is in the topic exactly once, positions gap-free across the restart.
    assert sorted(data.column("seq").to_pylist()) == list(range(40))
