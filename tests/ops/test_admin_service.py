"""Operating a real ``sharedsub serve``: its discovery file, /health, /metrics after real clients
published and consumed, ``unsubscribe`` and ``topics drop`` through the running service (refused
while in use, with exit code 5) and offline once it stopped, and its JSON log lines.

One service (``--log-format json``) for the module; the offline test stops it and runs last.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import Message

from sharedsub.core import layout
from sharedsub.runtime.discovery import ServiceInfo, read_service_file
from sharedsub.storage.topics import create_topic, topic_exists
from tests.amqp_peer import Received, Subscriber, jms_shared_durable, publish, uid, wait_for
from tests.http_probe import health, scrape
from tests.prometheus_text import value
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e

PROJECT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sharedsub", *args], cwd=PROJECT, capture_output=True, text=True, timeout=180
    )


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    data = tmp_path_factory.mktemp("admin-data")
    proc = ServeProcess(data, extra_args=["--log-format", "json"]).start()
    try:
        yield proc
    finally:
        code = proc.stop()
        assert code == 0, f"serve exited with {code}:\n{proc.log()[-4000:]}"


def service_info(svc: ServeProcess) -> ServiceInfo:
    info = read_service_file(str(svc.data_dir))
    assert info is not None
    return info


def key(container: str, name: str) -> str:
    return layout.subscription_key(container, name, shared=True, durable=True)


def show(svc: ServeProcess, name: str) -> dict:
    r = run("subscriptions", "show", name, "--data-dir", str(svc.data_dir), "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_service_file_and_health(svc: ServeProcess) -> None:
    info = service_info(svc)
    assert info.pid == svc.pid
    assert f"amqp://{info.amqp_host}:{info.amqp_port}" == svc.url
    status, doc = health(svc)
    assert status == 200
    assert doc["ok"] is True and doc["pid"] == svc.pid and doc["amqp"] == svc.url
    assert doc["fanout"]["state"] == "running" and doc["fanout"]["restarts"] == 0


def test_health_and_metrics_report_a_failed_fanout_job_until_it_runs_again(svc: ServeProcess) -> None:
    # The module's service (this test started a serve of its own, ~10 s): it comes after
    # test_service_file_and_health's "no restart" and ends only once the job runs again, so the
    # later tests find the job running.
    assert health(svc)[1]["fanout"]["restarts"] == 0
    killed = svc.kill_fanout()
    # The supervisor counts the exit at once; a new job needs a backoff pause, a JVM and a
    # first micro-batch (many seconds) before it runs again.
    wait_for(lambda: health(svc)[1]["fanout"]["restarts"] == 1, 30, "the restart to be counted")
    status, doc = health(svc)
    assert status == 503 and doc["ok"] is False, doc
    assert doc["fanout"]["state"] in ("restarting", "starting")
    assert doc["fanout"]["last_exit"]["code"] is not None
    assert value(scrape(svc), "sharedsub_fanout_up") == 0.0
    wait_for(lambda: health(svc)[0] == 200, 240, "the fan-out job to run again")
    status, doc = health(svc)
    assert doc["ok"] is True and doc["fanout"]["state"] == "running"
    assert doc["fanout"]["pid"] not in (None, killed)
    samples = scrape(svc)
    assert value(samples, "sharedsub_fanout_up") == 1.0
    assert value(samples, "sharedsub_fanout_restarts_total") == 1.0


def test_metrics_count_what_clients_did(svc: ServeProcess) -> None:
    topic = uid("m")
    create_topic(str(svc.data_dir), topic)
    released: set[str] = set()

    def release_m0_once(got: Received) -> str:
        if got.message.body == "m0" and "m0" not in released:
            released.add("m0")
            return "release"
        return "accept"

    acc = Subscriber(svc.url, topic, container_id="app-acc", settle=release_m0_once, **jms_shared_durable("acc"))
    rej = Subscriber(svc.url, topic, container_id="app-rej", settle="reject", **jms_shared_durable("rej"))
    with acc, rej:
        acc.wait_attached()
        rej.wait_attached()
        messages = [Message(body=f"m{i}", id=f"m{i}") for i in range(4)]
        messages.append(Message(body="old", id="old", expiry_time=time.time() - 60))  # expired on arrival
        assert [o.state for o in publish(svc.url, topic, messages)] == ["accepted"] * 5
        acc.wait_count(5, timeout=240)  # m0 twice (released once), m1..m3; "old" never
        rej.wait_count(4, timeout=240)
        a, r = key("app-acc", "acc"), key("app-rej", "rej")
        expected = {
            ("sharedsub_published_total", (("topic", topic),)): 5,
            ("sharedsub_routed_total", (("subscription", a), ("topic", topic))): 5,
            ("sharedsub_routed_total", (("subscription", r), ("topic", topic))): 5,
            ("sharedsub_delivered_total", (("subscription", a), ("topic", topic))): 5,
            ("sharedsub_redelivered_total", (("subscription", a), ("topic", topic))): 1,
            ("sharedsub_acknowledged_total", (("subscription", a), ("topic", topic))): 4,
            ("sharedsub_expired_total", (("subscription", a), ("topic", topic))): 1,
            ("sharedsub_delivered_total", (("subscription", r), ("topic", topic))): 4,
            ("sharedsub_dead_lettered_total", (("subscription", r), ("topic", topic))): 4,
            ("sharedsub_expired_total", (("subscription", r), ("topic", topic))): 1,
            ("sharedsub_backlog_messages", (("subscription", a), ("topic", topic))): 0,
            ("sharedsub_backlog_messages", (("subscription", r), ("topic", topic))): 0,
            ("sharedsub_fanout_lag_seconds", (("topic", topic),)): 0,
        }
        last: dict = {}

        def counted() -> bool:
            nonlocal last
            last = scrape(svc)
            return all(last.get(k) == v for k, v in expected.items())

        try:
            wait_for(counted, 240, "the metrics to count what the clients did")
        except AssertionError:
            raise AssertionError({k: (last.get(k), v) for k, v in expected.items() if last.get(k) != v}) from None
        assert value(last, "sharedsub_acknowledged_total", topic=topic, subscription=r) is None  # all rejected
        assert value(last, "sharedsub_redelivered_total", topic=topic, subscription=r) is None
        assert (value(last, "sharedsub_fanout_batches_total") or 0) >= 1
        assert (value(last, "sharedsub_fanout_batch_duration_seconds") or 0) > 0
        assert (value(last, "sharedsub_fanout_last_batch_timestamp_seconds") or 0) > time.time() - 3600


def test_unsubscribe_refused_while_consumers_are_attached(svc: ServeProcess) -> None:
    topic = uid("u")
    create_topic(str(svc.data_dir), topic)
    data = str(svc.data_dir)
    with Subscriber(svc.url, topic, container_id="app-u", **jms_shared_durable("u")) as s:
        s.wait_attached()
        r = run("unsubscribe", "app-u:u", "--data-dir", data)
        assert r.returncode == 5, r.stderr
        assert "consumer" in r.stderr
        r = run("unsubscribe", "app-u:u", "--data-dir", data, "--json")
        assert r.returncode == 5
        refusal = json.loads(r.stdout)
        assert (refusal["ok"], refusal["error"], refusal["exit_code"], refusal["mode"]) == (False, "in-use", 5, "service")
        assert s.detach(closed=False) == (None, None)  # a durable consumer closes; the subscription stays
    assert show(svc, "app-u:u")["state"] == "active"
    r = run("unsubscribe", "app-u:u", "--data-dir", data, "--json")
    assert r.returncode == 0, r.stderr
    done = json.loads(r.stdout)
    assert (done["ok"], done["mode"], done["pid"]) == (True, "service", svc.pid)
    assert done["subscription"]["key"] == key("app-u", "u")
    gone = show(svc, key("app-u", "u"))
    assert (gone["state"], gone["generation"]) == ("deleted", 1)
    r = run("unsubscribe", "app-u:u", "--data-dir", data)
    assert r.returncode == 3, r.stderr  # nothing active by that name any more
    # A new attach creates the subscription again, as a new generation that starts empty.
    with Subscriber(svc.url, topic, container_id="app-u", **jms_shared_durable("u")) as s:
        s.wait_attached()
        again = show(svc, "app-u:u")
        assert (again["state"], again["generation"]) == ("active", 2)


def test_topics_drop_through_the_service(svc: ServeProcess) -> None:
    topic = uid("d")
    data = str(svc.data_dir)
    assert run("topics", "create", topic, "--data-dir", data).returncode == 0
    with Subscriber(svc.url, topic, container_id="app-d", **jms_shared_durable("d")) as s:
        s.wait_attached()
        for force in ([], ["--force"]):
            r = run("topics", "drop", topic, *force, "--data-dir", data)
            assert r.returncode == 5 and "consumers attached" in r.stderr, r.stderr
        s.detach(closed=False)
    r = run("topics", "drop", topic, "--data-dir", data)
    assert r.returncode == 5 and "--force" in r.stderr, r.stderr
    r = run("topics", "drop", topic, "--force", "--data-dir", data, "--json")
    assert r.returncode == 0, r.stderr
    done = json.loads(r.stdout)
    assert (done["ok"], done["mode"], done["topic"]) == (True, "service", topic)
    assert [d["key"] for d in done["deleted_subscriptions"]] == [key("app-d", "d")]
    listed = json.loads(run("topics", "list", "--data-dir", data, "--json").stdout)
    assert topic not in [t["name"] for t in listed]
    assert show(svc, key("app-d", "d"))["state"] == "deleted"
    # The service now refuses the topic like any unknown one.
    with Subscriber(svc.url, topic, container_id="app-d", **jms_shared_durable("d2")) as late:
        condition, _ = late.wait_refused()
        assert condition == "amqp:not-found"
    assert run("topics", "drop", topic, "--data-dir", data).returncode == 3


def test_log_lines_are_json(svc: ServeProcess) -> None:
    wait_for(lambda: any('"batch ' in line for line in svc.stderr_lines), 60, "a fan-out batch line")
    ours = []
    for line in list(svc.stderr_lines):
        if line.startswith("{"):
            ours.append(json.loads(line))
        # No sharedsub logger writes the text format.
        assert not re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ (sharedsub|connectors|jobs)", line), line
    for doc in ours:
        assert {"ts", "level", "logger", "message"} <= set(doc)
    messages = {(d["logger"], d["message"].split(" ")[0]) for d in ours}
    assert ("sharedsub", "metrics") in messages  # serve
    assert ("sharedsub.fanout", "batch") in messages  # the fan-out child
    admin = [d for d in ours if d["message"].startswith("admin: topic")]
    assert admin and "topic" in admin[0]  # a structured field


def test_offline_unsubscribe_and_drop(svc: ServeProcess) -> None:
    """Runs last: stops the service, then works on the tables directly."""
    assert svc.stop() == 0
    data = str(svc.data_dir)
    assert read_service_file(data) is None  # removed on a clean stop
    r = run("unsubscribe", "app-acc:acc", "--data-dir", data)
    assert r.returncode == 0, r.stderr
    assert "offline" in r.stdout
    assert show(svc, key("app-acc", "acc"))["state"] == "deleted"
    topic = show(svc, "app-rej:rej")["topic"]
    r = run("topics", "drop", topic, "--data-dir", data)
    assert r.returncode == 5, r.stderr  # app-rej:rej is still on it
    r = run("topics", "drop", topic, "--force", "--data-dir", data, "--json")
    assert r.returncode == 0, r.stderr
    done = json.loads(r.stdout)
    assert (done["mode"], [d["name"] for d in done["deleted_subscriptions"]]) == ("offline", ["app-rej:rej"])
    assert not topic_exists(data, topic)
    assert show(svc, key("app-rej", "rej"))["state"] == "deleted"
    assert run("unsubscribe", "app-rej:rej", "--data-dir", data).returncode == 3
