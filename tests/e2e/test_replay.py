"""Replay of durable subscriptions from Delta history, end to end: a real ``sharedsub serve``,
python-qpid-proton consumers, and the ``sharedsub replay`` command line calling the service."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from proton import Message

from sharedsub.core import layout
from sharedsub.runtime import inspection, maintenance
from sharedsub.storage.delta.table_history import HistoryEntry, history
from sharedsub.storage.delta.table_reads import read_seqs
from sharedsub.storage.topics import create_topic
from tests.amqp_peer import Subscriber, jms_durable, jms_shared_durable, jms_shared_volatile, publish, uid, wait_for
from tests.builders import maintenance_policy
from tests.e2e.test_outcomes import ack_log, record
from tests.service import ROOT, ServeProcess

pytestmark = pytest.mark.e2e

NO_MAINTENANCE = {"SHAREDSUB_MAINTENANCE_INTERVAL": "0"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """A service whose tables keep every row (maintenance off)."""
    proc = ServeProcess(tmp_path_factory.mktemp("replay-data"), env=NO_MAINTENANCE).start()
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.log()[-4000:]


def replay_cli(data_dir: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    """Run ``sharedsub replay ... --json``: (exit code, JSON document, stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "sharedsub", "replay", *args, "--data-dir", str(data_dir), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    document = json.loads(done.stdout.splitlines()[-1]) if done.stdout.strip() else {}
    return done.returncode, document, done.stderr


def table_versions(data_dir: Path, name: str) -> list[HistoryEntry]:
    return history(layout.join(str(data_dir), record(data_dir, name).table))


def backlog(data_dir: Path, name: str) -> int:
    return inspection.subscription_status(str(data_dir), record(data_dir, name).key).messages


def test_replay_redelivers_acknowledged_messages_to_attached_consumers(served: ServeProcess) -> None:
    data, topic = served.data_dir, uid("rt")
    create_topic(str(data), topic)
    name, other, app = uid("replayed"), uid("untouched"), uid("app")
    with (  # two links of one shared subscription (same ClientID), and another subscription
        Subscriber(served.url, topic, container_id=app, **jms_shared_durable(name)) as first,
        Subscriber(served.url, topic, container_id=app, **jms_shared_durable(name, ordinal=2)) as second,
        Subscriber(served.url, topic, container_id=uid("c"), **jms_durable(other)) as bystander,
    ):
        for s in (first, second, bystander):
            s.wait_attached()
        publish(served.url, topic, [Message(body=i, id=f"m-{i}") for i in range(6)])
        wait_for(lambda: len(first.received) + len(second.received) == 6, 60, "six deliveries")
        bystander.wait_count(6)
        wait_for(lambda: backlog(data, name) == 0 and backlog(data, other) == 0, 60, "every message acknowledged")
        # The table's first version holds the first routed rows: replay all six from it.
        start = table_versions(data, name)[0].version

        code, reply, err = replay_cli(data, name, "--version", str(start))
        assert code == 0, err
        assert reply["ok"] and reply["replay"]["messages"] == 6 and reply["replay"]["reopened"] == 6
        assert reply["replay"]["consumers"] == 2 and reply["replay"]["version"] == start

        wait_for(lambda: len(first.received) + len(second.received) == 12, 60, "six redeliveries")
        again = sorted((r for r in first.received + second.received if r.delivery_count > 0), key=lambda r: r.message.body)
        assert [r.message.body for r in again] == list(range(6))
        assert all(r.message.first_acquirer is False for r in again)
        # The ack log holds the replay and the re-acknowledgements; the backlog is empty again.
        log = ack_log(data, name)
        assert sorted(s for s, o in log if o == "replayed") == list(range(6))
        wait_for(lambda: sum(o == "accepted" for _, o in ack_log(data, name)) == 12, 60, "re-acknowledgements")
        assert backlog(data, name) == 0

        # The other subscription on the topic got nothing again; new messages flow as before.
        publish(served.url, topic, [Message(body="after")])
        bystander.wait_count(7)
        wait_for(lambda: len(first.received) + len(second.received) == 13, 60, "the message after")
        assert [r.message.body for r in bystander.received] == [*range(6), "after"]
        assert all(r.delivery_count == 0 for r in bystander.received)


def test_replay_by_timestamp_keeps_what_was_open_and_redelivers_what_came_after(served: ServeProcess) -> None:
    data, topic, name = served.data_dir, uid("rt"), uid("stamp")
    create_topic(str(data), topic)
    # Messages 0..3 stay unsettled on the link; 4..7 are accepted.
    settle = {"settle": lambda got: "none" if got.message.body < 4 else "accept"}
    with Subscriber(served.url, topic, container_id=uid("c"), **settle, **jms_durable(name)) as sub:
        sub.wait_attached()
        publish(served.url, topic, [Message(body=i) for i in range(4)])
        sub.wait_count(4)
        wait_for(lambda: len(table_versions(data, name)) >= 1, 60, "the first routed commit")
        between = dt.datetime.now(dt.UTC)
        wait_for(lambda: dt.datetime.now(dt.UTC) > between, 5, "the clock to move")
        publish(served.url, topic, [Message(body=i) for i in range(4, 8)])
        sub.wait_count(8)
        wait_for(lambda: sum(o == "accepted" for _, o in ack_log(data, name)) == 4, 60, "4..7 acknowledged")

        code, reply, err = replay_cli(data, name, "--timestamp", between.isoformat())
        assert code == 0, err
        # At that time the table held 0..3 (all still outstanding: not sent twice); 4..7 came after.
        assert reply["replay"]["messages"] == 8 and reply["replay"]["reopened"] == 4
        sub.wait_count(12)
        again = sub.received[8:]
        assert sorted(r.message.body for r in again) == [4, 5, 6, 7]
        assert [r.message.body for r in again] == [4, 5, 6, 7]  # in seq order
        assert all(r.delivery_count >= 1 and r.message.first_acquirer is False for r in again)
        # 0..3, still outstanding, once the acknowledgements of 4..7 again are stored (the
        # committer writes acks after the outcomes: reading at once raced it, 8 then).
        wait_for(lambda: backlog(data, name) == 4, 30, "4..7 acknowledged again")


def test_replay_refusals(served: ServeProcess) -> None:
    data, topic = served.data_dir, uid("rt")
    create_topic(str(data), topic)
    durable, volatile = uid("dur"), uid("vol")
    with (
        Subscriber(served.url, topic, container_id=uid("c"), **jms_durable(durable)) as sub,
        Subscriber(served.url, topic, container_id=uid("c"), **jms_shared_volatile(volatile)) as vol,
    ):
        sub.wait_attached()
        vol.wait_attached()
        publish(served.url, topic, [Message(body=1)])
        sub.wait_count(1)
        wait_for(lambda: len(table_versions(data, durable)) >= 1, 60, "a routed commit")
        latest = table_versions(data, durable)[-1].version

        code, reply, err = replay_cli(data, volatile, "--version", "0")
        assert code == 2 and "not durable" in err and reply["error"] == "usage"
        code, reply, err = replay_cli(data, durable, "--version", str(latest + 5))
        assert code == 2 and f"latest version is {latest}" in err
        code, _, err = replay_cli(data, uid("nobody"), "--version", "0")
        assert code == 3 and "no subscription" in err
        code, _, err = replay_cli(data, durable, "--timestamp", "yesterday")
        assert code == 2 and "ISO-8601" in err
        assert len(sub.received) == 1


def test_replay_restores_deleted_rows_and_refuses_history_beyond_retention(tmp_path: Path) -> None:
    fast = {
        "SHAREDSUB_MAINTENANCE_INTERVAL": "0.5",
        "SHAREDSUB_MAINTENANCE_MIN_ACKED_ROWS": "1",
        "SHAREDSUB_MAINTENANCE_COMPACT_MIN_FILES": "1000",
    }
    service = ServeProcess(tmp_path, env=fast).start()
    name = "kept"
    try:
        create_topic(str(tmp_path), "restore")
        with Subscriber(service.url, "restore", container_id="restore-client", **jms_durable(name)) as sub:
            sub.wait_attached()
            publish(service.url, "restore", [Message(body=i) for i in range(5)])
            sub.wait_count(5)
            table = layout.join(str(tmp_path), record(tmp_path, name).table)
            wait_for(lambda: read_seqs(table).to_pylist() == [], 120, "acknowledged rows deleted by maintenance")
            start = table_versions(tmp_path, name)[0].version

            code, reply, err = replay_cli(tmp_path, name, "--version", str(start))
            assert code == 0, err
            assert reply["replay"]["messages"] == 5 and reply["replay"]["restored"] == 5
            sub.wait_count(10)
            assert [r.message.body for r in sub.received[5:]] == list(range(5))
            assert all(r.delivery_count >= 1 for r in sub.received[5:])

            # History older than the retention goes: with 0 hours, vacuum and log cleanup leave
            # only the newest versions, and the replay names what is left and the setting.
            wait_for(lambda: read_seqs(table).to_pylist() == [], 120, "re-acknowledged rows deleted")
            policy = maintenance_policy(interval=1.0, history_retention_hours=0, compact_min_files=1000, min_acked_rows=1)
            maintenance.run_once(str(tmp_path), policy)
            code, reply, err = replay_cli(tmp_path, name, "--version", str(start))
            assert code == 3, err
            assert reply["error"] == "not-found"
            assert "oldest version still available is" in err
            assert "[maintenance] history_retention_hours" in err
            assert len(sub.received) == 10
    finally:
        assert service.stop() == 0, service.log()[-4000:]


def test_replay_without_a_running_service_is_refused(tmp_path: Path) -> None:
    # `frontend` (no fan-out job, so no Spark to start) makes the durable subscription as `serve`
    # does; the refusal only asks whether a service runs on the data dir.
    service = ServeProcess(tmp_path, command="frontend", env=NO_MAINTENANCE).start()
    try:
        create_topic(str(tmp_path), "quiet")
        with Subscriber(service.url, "quiet", container_id="quiet-client", **jms_durable("q")) as sub:
            sub.wait_attached()
    finally:
        assert service.stop() == 0, service.log()[-4000:]
    code, _, err = replay_cli(tmp_path, "q", "--version", "0")
    assert code == 1 and "no service runs" in err and "consumers" in err
