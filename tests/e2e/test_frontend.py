"""``sharedsub frontend`` alone (no Spark): topic creation on first use, clean stops, refusals."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

import pytest
from proton import Described, Message, uint, ulong
from proton.utils import BlockingConnection

from sharedsub.core import layout
from sharedsub.storage.delta.commit_log import latest_version
from sharedsub.storage.delta.table_reads import read_table
from sharedsub.storage.topics import create_topic, topic_exists
from tests.amqp_peer import Subscriber, publish
from tests.raw_amqp import BEGIN_CODE, HEADER, frame, read_until
from tests.rhea.test_rhea_tier import NODE_TIMEOUT, TIER, _check_setup, run_script
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


def test_a_transfer_before_the_attach_is_answered_closes_only_that_connection(tmp_path: Path) -> None:
    """A raw client sends its attach and, without waiting for the answer (so without credit), a
    transfer. With topics created on first use the attach is answered only once the topic's
    creation is committed, so the transfer reaches a link that is not attached yet: that
    connection is closed with amqp:not-allowed, the message is not stored, and the link's late
    answer does not touch the closed connection."""
    cfg = tmp_path / "auto.toml"
    cfg.write_text("[server]\nauto_create_topics = true\n")
    data_dir = tmp_path / "data"
    fe = ServeProcess(data_dir, command="frontend", extra_args=["--config", str(cfg)]).start()
    try:
        opening = frame(Described(ulong(0x10), ["early-client"])) + frame(  # open, begin
            Described(ulong(0x11), [None, uint(0), uint(2048), uint(2048)]))
        early = b"".join([
            frame(Described(ulong(0x12), [  # attach: we are the sender, to topic "early"
                "early-link", uint(0), False, None, None,
                Described(ulong(0x28), [None]), Described(ulong(0x29), ["early"]),
            ])),
            frame(Described(ulong(0x14), [uint(0), uint(0), b"t0", uint(0), False, False]),  # transfer
                  Message(body="too early").encode()),
        ])
        host, port = fe.url.removeprefix("amqp://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(HEADER + opening)
            # Wait for the server's begin: before it, proton itself refuses any transfer (the
            # session's incoming window is still 0) and our handler never sees it.
            received = read_until(sock, BEGIN_CODE)
            sock.sendall(early)
            received = read_until(sock, b"not attached yet", received)
        assert b"amqp:not-allowed" in received and b"transfer on a link that is not attached yet" in received
        # Everyone else is served, on the same topic too (created by the early attach or by this one).
        assert [o.state for o in publish(fe.url, "early", [Message(body="in time")])] == ["accepted"]
        assert not any("Traceback" in line for line in fe.stderr_lines)
    finally:
        assert fe.stop() == 0, fe.log()[-2000:]
    stored = read_table(layout.topic_table(str(data_dir), "early"), ["seq", "message"])
    assert stored is not None and stored.num_rows == 1
    kept = Message()
    kept.decode(stored.column("message")[0].as_py())
    assert kept.body == "in time"


@pytest.mark.timeout(NODE_TIMEOUT + 60)
def test_a_publisher_that_can_send_nothing_more_is_not_held_for_the_commit_interval_rhea(tmp_path: Path) -> None:
    """Seen from rhea (tests/rhea/commit_pace.js): with a 1 s commit interval (the most allowed) and the
    synchronous-send rule off, a group whose publisher used up its link credit, and the rounds
    of a publisher whose window (below the credit) is full, are committed at once
    (sharedsub.core.publish.commit_pace); held, each would wait about 1 s."""
    node = _check_setup()
    data = tmp_path / "data"
    report = tmp_path / "rhea-junit.xml"
    settings = {
        "SHAREDSUB_PUBLISH_MIN_COMMIT_INTERVAL": "1",
        "SHAREDSUB_PUBLISH_SYNC_SEND_GAP": "0",
        "SHAREDSUB_PUBLISH_CREDIT": "8",
    }
    fe = ServeProcess(data, command="frontend", env=settings).start()
    try:
        env = dict(os.environ, **settings, SHAREDSUB_URL=fe.url, SHAREDSUB_DATA_DIR=str(data),
                   SHAREDSUB_PYTHON=sys.executable, NODE_NO_WARNINGS="1")
        ok = run_script(node, TIER / "commit_pace.js", env, report)
    finally:
        assert fe.stop() == 0
    assert len(ok) == 2, ok


def test_a_publisher_that_waits_for_each_outcome_is_not_held_for_the_commit_interval(tmp_path: Path) -> None:
    """[publish] min_commit_interval (here 1 s) groups what arrives within it into one commit,
    but a publisher that sends one message and waits for its outcome (a synchronous send, as
    Qpid JMS sends persistent messages) is not held to one message per interval
    (sharedsub.core.publish.commit_pace): its messages are committed at once. One that keeps
    many in flight still gets them grouped."""
    data = tmp_path / "data"
    create_topic(str(data), "paced")
    fe = ServeProcess(
        data, command="frontend",
        # A generous gap: this test's client may take longer than the default 2 ms to send again.
        env={"SHAREDSUB_PUBLISH_MIN_COMMIT_INTERVAL": "1", "SHAREDSUB_PUBLISH_SYNC_SEND_GAP": "0.5"},
    ).start()
    table = layout.topic_table(str(data), "paced")
    try:
        connection = BlockingConnection(fe.url, timeout=30)
        try:
            sender = connection.create_sender("paced")
            began = time.monotonic()
            for i in range(8):
                sender.send(Message(body=f"sync-{i}", durable=True))  # returns once accepted
            took = time.monotonic() - began
        finally:
            connection.close()
        # Held for the interval, the seven after the first would take at least 7 s.
        assert took < 3.5, f"8 synchronous sends took {took:.1f} s: held for the 1 s commit interval"
        before = latest_version(table)
        outcomes = publish(fe.url, "paced", [Message(body=f"pipelined-{i}", durable=True) for i in range(200)])
        assert [o.state for o in outcomes] == ["accepted"] * 200
        commits = latest_version(table) - before
        assert 1 <= commits <= 3, f"200 messages sent without waiting made {commits} commits"
    finally:
        assert fe.stop() == 0
    stored = read_table(table, ["seq"])
    assert stored is not None and sorted(stored.column("seq").to_pylist()) == list(range(208))
