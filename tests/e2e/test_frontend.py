"""``sharedsub frontend`` alone (no Spark): topic creation on first use, clean stops, refusals."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from proton import Message

from sharedsub.core import layout
from sharedsub.storage.table_reads import read_table
from sharedsub.storage.topics import create_topic, topic_exists
from tests.amqp_peer import Subscriber, publish
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e


def test_auto_create_topics_on_first_use(tmp_path: Path) -> None:
    cfg = tmp_path / "auto.toml"
    cfg.write_text("[server]\nauto_create_topics = true\n")
    fe = ServeProcess(tmp_path / "data", command="frontend", extra_args=["--config", str(cfg)]).start()
    try:
        outcomes = publish(fe.url, "fresh.topic", [Message(body="first")])
        assert outcomes[0].state == "accepted"
        assert topic_exists(str(tmp_path / "data"), "fresh.topic")
        # anonymous relay creates too
        outcomes = publish(fe.url, None, [Message(address="other/k", body="x")])
        assert outcomes[0].state == "accepted"
        with Subscriber(fe.url, "third") as sub:
            sub.wait_attached()
        assert topic_exists(str(tmp_path / "data"), "third")
    finally:
        assert fe.stop() == 0, fe.log()[-2000:]
    data = read_table(layout.topic_table(str(tmp_path / "data"), "other"), ["routing_key"])
    assert data is not None and data.column("routing_key").to_pylist() == ["k"]


def test_sigint_stops_cleanly_and_keeps_every_accepted_message(tmp_path: Path) -> None:
    create_topic(str(tmp_path), "t")
    fe = ServeProcess(tmp_path, command="frontend").start()
    outcomes = publish(fe.url, "t", [Message(body=i) for i in range(300)])
    assert fe.proc is not None
    fe.proc.send_signal(signal.SIGINT)
    assert fe.proc.wait(60) == 0
    data = read_table(layout.topic_table(str(tmp_path), "t"), ["seq"])
    accepted = sum(o.state == "accepted" for o in outcomes)
    assert accepted == 300
    assert data is not None and sorted(data.column("seq").to_pylist()) == list(range(300))


def test_invalid_address_refused(tmp_path: Path) -> None:
    fe = ServeProcess(tmp_path, command="frontend").start()
    try:
        with pytest.raises(AssertionError, match="amqp:invalid-field"):
            publish(fe.url, "bad name", [Message(body="x")], timeout=30)
        outcomes = publish(fe.url, None, [Message(body="no to")])
        assert outcomes[0].state == "rejected"
        assert outcomes[0].condition == "amqp:invalid-field"
    finally:
        assert fe.stop() == 0
