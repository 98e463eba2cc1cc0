"""Fan-out faults against a real ``sharedsub serve``: one subscription table that cannot be written
(its next Delta log entry is a directory, so every commit to it fails) does not stop routing for
the other subscription of its topic nor for another topic; /health and /metrics name it; once it
is repaired it gets every message it missed exactly once, in order, with or without a restart of
the service in between; its fault is logged once, not on every poll. A fan-out job that stops
making progress shows its topics as stalled in /health until it routes again.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from proton import Message

from sharedsub.core import layout
from sharedsub.core.model import SubscriptionRecord
from sharedsub.storage.delta.commit_log import latest_version
from sharedsub.storage.delta.tables import log_file
from sharedsub.storage.topics import create_topic
from tests.amqp_peer import Subscriber, jms_durable, publish, uid, wait_for
from tests.e2e.test_outcomes import record
from tests.http_probe import health, scrape
from tests.prometheus_text import value
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e

ENV = {
    "SHAREDSUB_FANOUT_TABLE_RETRY_INTERVAL": "1",  # retry a failing table every second
    "SHAREDSUB_FANOUT_STALLED_AFTER": "5",
    "SHAREDSUB_MAINTENANCE_INTERVAL": "0",  # nothing else writes the tables
}
WAIT = 240.0  # generous: two shared cores, a JVM




def break_table(data_dir: Path, rec: SubscriptionRecord) -> str:
    """Make every commit to ``rec``'s table fail: its next log entry's path is a directory (reading
    the table fails too). Return that path; removing it repairs the table."""
    table = layout.join(str(data_dir), rec.table)
    blocker = log_file(table, latest_version(table) + 1)
    os.mkdir(blocker)
    return blocker


def failing_entry(svc: ServeProcess, key: str) -> dict | None:
    code, doc = health(svc)
    entries = [f for f in doc.get("failing_subscriptions", []) if f["subscription"] == key]
    return entries[0] if entries and code == 200 else None


def bodies(sub: Subscriber) -> list[object]:
    return [r.message.body for r in sub.received]


def messages(prefix: str, n: int) -> list[Message]:
    return [Message(body=f"{prefix}{i}") for i in range(n)]


def test_a_table_that_cannot_be_written_stops_nobody_else_and_catches_up_once_repaired(tmp_path: Path) -> None:
    a, b = uid("fa"), uid("fb")
    create_topic(str(tmp_path), a)
    create_topic(str(tmp_path), b)
    svc = ServeProcess(tmp_path, env=ENV).start()
    try:
        healthy = Subscriber(svc.url, a, container_id="ff-healthy", **jms_durable("healthy"))
        broken = Subscriber(svc.url, a, container_id="ff-broken", **jms_durable("broken"))
        other = Subscriber(svc.url, b, container_id="ff-other", **jms_durable("other"))
        with healthy, broken, other:
            for s in (healthy, broken, other):
                s.wait_attached()
            publish(svc.url, a, messages("a", 3))
            publish(svc.url, b, messages("b", 3))
            for s in (healthy, broken, other):
                s.wait_count(3, WAIT)
            rec = record(tmp_path, "broken")
            blocker = break_table(tmp_path, rec)

            # Broken: the other subscription of the topic and the other topic get every message.
            publish(svc.url, a, messages("a", 8)[3:])
            publish(svc.url, b, messages("b", 8)[3:])
            healthy.wait_count(8, WAIT)
            other.wait_count(8, WAIT)
            wait_for(lambda: (failing_entry(svc, rec.key) or {}).get("parked_rows") == 5, WAIT, "5 rows parked")
            code, doc = health(svc)
            assert (code, doc["ok"], doc["status"]) == (200, False, "degraded"), doc
            (entry,) = doc["failing_subscriptions"]
            assert (entry["topic"], entry["table"]) == (a, rec.table)
            assert entry["since"] > 0 and entry["failures"] >= 1 and entry["error"]
            samples = scrape(svc)
            assert value(samples, "sharedsub_fanout_failing_subscriptions") == 1.0
            assert value(samples, "sharedsub_fanout_parked_rows", topic=a, subscription=rec.key) == 5.0
            assert bodies(broken) == ["a0", "a1", "a2"]

            # Repaired: the parked rows arrive without another publish (retried between batches),
            # then new messages follow them.
            os.rmdir(blocker)
            broken.wait_count(8, WAIT)
            publish(svc.url, a, messages("a", 10)[8:])
            for s in (healthy, broken):
                s.wait_count(10, WAIT)
            # A marker after everything: once it is in, nothing else can still be on its way.
            publish(svc.url, a, [Message(body="end")])
            healthy.wait_count(11, WAIT)
            broken.wait_count(11, WAIT)
            expected = [f"a{i}" for i in range(10)] + ["end"]
            assert bodies(broken) == expected and bodies(healthy) == expected
            assert bodies(other) == [f"b{i}" for i in range(8)]
            assert all(r.delivery_count == 0 for r in broken.received)
            wait_for(lambda: health(svc)[1]["status"] == "ok", WAIT, "/health ok again")
            assert value(scrape(svc), "sharedsub_fanout_failing_subscriptions") == 0.0
    finally:
        assert svc.stop() == 0, svc.log()[-4000:]

    # One line when the fault started and one when it cleared, from the fan-out (which retried
    # it every second), and at most one of each from the tailer (it reads a table when the
    # fan-out announces a commit to it, so it may never meet the broken one).
    log = svc.log().splitlines()
    tailer_failed = sum("reading subscription table" in line and "failed" in line for line in log)
    assert tailer_failed <= 1, svc.log()[-4000:]
    assert sum("reading subscription table" in line and "works again" in line for line in log) == tailer_failed
    assert sum(f"subscription {rec.key}: commit to" in line for line in log) == 1, svc.log()[-4000:]
    assert sum(f"subscription {rec.key}: {rec.table} takes commits again" in line for line in log) == 1


def test_rows_parked_before_a_restart_are_delivered_after_it(tmp_path: Path) -> None:
    topic = uid("fr")
    create_topic(str(tmp_path), topic)
    svc = ServeProcess(tmp_path, env=ENV).start()
    try:
        with Subscriber(svc.url, topic, container_id="fr-client", **jms_durable("restarted")) as sub:
            sub.wait_attached()
            publish(svc.url, topic, messages("m", 2))
            sub.wait_count(2, WAIT)
            assert sub.detach() == (None, None)  # a durable consumer closes; the subscription stays
        rec = record(tmp_path, "restarted")
        blocker = break_table(tmp_path, rec)
        publish(svc.url, topic, messages("m", 6)[2:])
        wait_for(lambda: (failing_entry(svc, rec.key) or {}).get("parked_rows") == 4, WAIT, "4 rows parked")
    finally:
        assert svc.stop() == 0, svc.log()[-4000:]

    svc = ServeProcess(tmp_path, env=ENV).start()
    try:
        # The new job finds the parked rows on disk; the table is still broken, so it still fails.
        wait_for(lambda: (failing_entry(svc, rec.key) or {}).get("failures", 0) >= 1, WAIT, "the parked rows retried")
        assert failing_entry(svc, rec.key)["parked_rows"] == 4  # type: ignore[index]
        os.rmdir(blocker)
        with Subscriber(svc.url, topic, container_id="fr-client", **jms_durable("restarted")) as sub:
            sub.wait_attached()
            sub.wait_count(4, WAIT)
            publish(svc.url, topic, [Message(body="end")])
            sub.wait_count(5, WAIT)
            assert bodies(sub) == ["m2", "m3", "m4", "m5", "end"]
        wait_for(lambda: failing_entry(svc, rec.key) is None and health(svc)[0] == 200, WAIT, "no failing table")
        assert not os.path.exists(os.path.join(layout.fanout_pending(str(tmp_path)), *rec.table.split("/")))
    finally:
        assert svc.stop() == 0, svc.log()[-4000:]


def test_a_fanout_job_that_makes_no_progress_shows_its_topics_as_stalled(tmp_path: Path) -> None:
    topic = uid("fs")
    create_topic(str(tmp_path), topic)
    svc = ServeProcess(tmp_path, env=ENV).start()
    job: int | None = None
    try:
        with Subscriber(svc.url, topic, container_id="fs-client", **jms_durable("stalled")) as sub:
            sub.wait_attached()
            publish(svc.url, topic, messages("s", 1))
            sub.wait_count(1, WAIT)
            # Freeze the job's Python driver (its JVM goes on, and waits for it): it routes nothing.
            job = svc.fanout_pid()
            assert job is not None
            os.kill(job, signal.SIGSTOP)
            publish(svc.url, topic, messages("s", 2)[1:])
            wait_for(lambda: [t["topic"] for t in health(svc)[1]["stalled_topics"]] == [topic], WAIT, "a stalled topic")
            code, doc = health(svc)
            assert (code, doc["status"], doc["fanout"]["state"]) == (200, "degraded", "running"), doc
            assert doc["stalled_topics"][0]["lag_seconds"] > 5
            assert (value(scrape(svc), "sharedsub_fanout_lag_seconds", topic=topic) or 0) > 5
            os.kill(job, signal.SIGCONT)
            job = None
            sub.wait_count(2, WAIT)
            wait_for(lambda: health(svc)[1]["stalled_topics"] == [], WAIT, "no stalled topic")
            wait_for(lambda: value(scrape(svc), "sharedsub_fanout_lag_seconds", topic=topic) == 0.0, WAIT, "lag 0")
    finally:
        if job is not None:
            os.kill(job, signal.SIGCONT)
        assert svc.stop() == 0, svc.log()[-4000:]
