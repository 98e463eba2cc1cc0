"""A full or read-only data dir under a real ``sharedsub serve``: the data dir is a small tmpfs
(tests/tmpfs.py; needs root, or ``unshare -rm``), filled with a file or remounted read-only.

While it takes no writes, publishers are held (nothing accepted, nothing refused), /health says
why with 503 and /metrics has sharedsub_storage_writable 0; the service and its threads live on.
When space returns (or the file system is read-write again) the held publishes are accepted and
a durable subscription gets every accepted message exactly once; acknowledgements given
meanwhile are written. Past ``[storage] full_disk_timeout`` the pending publishes are rejected
with amqp:resource-limit-exceeded naming the data dir and the error, and never delivered. A
serve started on such a data dir exits with code 6 and one line saying why.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import Message

from sharedsub.core import layout
from sharedsub.core.model import SubscriptionRecord
from sharedsub.storage.catalog import load_catalog
from sharedsub.storage.delta.table_reads import iter_rows, read_table
from sharedsub.storage.topics import create_topic
from tests.amqp_peer import Subscriber, jms_shared_durable, publish, start_publish, uid, wait_for
from tests.http_probe import health, scrape
from tests.prometheus_text import value
from tests.service import ROOT, ServeProcess
from tests.tmpfs import Tmpfs

pytestmark = pytest.mark.e2e

WAIT = 300.0  # generous: two shared cores; a fan-out job that died on the full disk restarts (JVM)
ENV = {"SHAREDSUB_MAINTENANCE_INTERVAL": "0"}  # only the front end and the fan-out write


def _serve(tmp: Path, timeout: str) -> Iterator[tuple[ServeProcess, Tmpfs]]:
    with Tmpfs(tmp / "mnt", size="64m") as disk:
        data = disk.path / "data"
        data.mkdir()
        svc = ServeProcess(data, env=ENV | {"SHAREDSUB_STORAGE_FULL_DISK_TIMEOUT": timeout})
        svc.start()
        try:
            yield svc, disk
        finally:
            disk.release()
            disk.read_write()
            code = svc.stop()
            assert code == 0, f"serve exited with {code}:\n{svc.log()[-4000:]}"


@pytest.fixture(scope="module")
def holding(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, Tmpfs]]:
    """A serve that holds publishes for an hour on a full or read-only data dir."""
    yield from _serve(tmp_path_factory.mktemp("holding"), "3600")


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, Tmpfs]]:
    """A serve that refuses publishes after 1 s of a full or read-only data dir."""
    yield from _serve(tmp_path_factory.mktemp("refusing"), "1")




def storage(svc: ServeProcess) -> dict:
    return health(svc)[1]["storage"]


def messages(prefix: str, n: int) -> list[Message]:
    return [Message(body=f"{prefix}{i}", durable=True) for i in range(n)]


def bodies(sub: Subscriber) -> list[object]:
    return [r.message.body for r in sub.received]


def log_lines(svc: ServeProcess, text: str) -> int:
    return sum(1 for line in list(svc.stderr_lines) if "sharedsub.runtime.committer" in line and text in line)


def subscription(root: Path, topic: str) -> SubscriptionRecord:
    found = [r for r in load_catalog(str(root)).values() if r.topic == topic and r.active]
    assert len(found) == 1, found
    return found[0]


def routed(root: Path, rec: SubscriptionRecord) -> int:
    """Rows the fan-out routed to ``rec``'s table so far."""
    data = read_table(layout.join(str(root), rec.table), ["seq"])
    return 0 if data is None else data.num_rows


def acked(root: Path, rec: SubscriptionRecord) -> list[int]:
    """Seqs ``rec``'s ack log has as accepted."""
    data = read_table(layout.join(str(root), layout.ack_table_rel(rec.key, rec.generation)), ["seq", "outcome"])
    return sorted(r["seq"] for r in iter_rows(data) if r["outcome"] == "accepted")


def deliver_all_once(svc: ServeProcess, sub: Subscriber, topic: str, expected: list[str]) -> None:
    """After a marker published last has arrived (a topic is delivered in seq order), the
    subscriber holds exactly ``expected`` and the marker: each accepted message once."""
    assert [o.state for o in publish(svc.url, topic, [Message(body="end", durable=True)], timeout=WAIT)] == ["accepted"]
    wait_for(lambda: "end" in bodies(sub), WAIT, "the end marker")
    assert bodies(sub) == [*expected, "end"]


def test_a_full_disk_holds_publishers_until_space_returns_then_each_message_arrives_once(
    holding: tuple[ServeProcess, Tmpfs],
) -> None:
    svc, disk = holding
    topic = uid("full")
    create_topic(str(svc.data_dir), topic)
    with Subscriber(svc.url, topic, container_id=uid("c"), credit=1000, **jms_shared_durable(uid("s"))) as sub:
        sub.wait_attached()
        assert {o.state for o in publish(svc.url, topic, messages("w", 5), timeout=WAIT)} == {"accepted"}
        sub.wait_count(5, WAIT)
        faults, clears = log_lines(svc, "cannot take writes"), log_lines(svc, "takes writes again")
        errors = value(scrape(svc), "sharedsub_storage_write_errors_total", errno="ENOSPC") or 0.0
        disk.fill()
        try:
            run = start_publish(svc.url, topic, messages("f", 100))
            wait_for(lambda: not storage(svc)["writable"], WAIT, "/health to report the full disk")
            code, doc = health(svc)
            assert (code, doc["ok"]) == (503, False)
            fault = doc["storage"]
            assert (fault["errno"], fault["error"], fault["refusing"]) == ("ENOSPC", "No space left on device", False)
            assert fault["data_dir"] == str(svc.data_dir) and fault["path"].startswith(str(svc.data_dir))
            samples = scrape(svc)
            assert value(samples, "sharedsub_storage_writable") == 0.0
            assert (value(samples, "sharedsub_storage_write_errors_total", errno="ENOSPC") or 0.0) > errors
            wait_for(lambda: run.sent == 100, WAIT, "all 100 transfers")
            assert run.settled == []  # held: nothing can be stored, and nothing is refused
            assert svc.proc is not None and svc.proc.poll() is None
        finally:
            disk.release()
        assert [o.state for o in run.wait(WAIT)] == ["accepted"] * 100
        deliver_all_once(svc, sub, topic, [f"w{i}" for i in range(5)] + [f"f{i}" for i in range(100)])
    wait_for(lambda: health(svc)[1]["ok"], WAIT, "/health ok again (the fan-out job running)")
    assert value(scrape(svc), "sharedsub_storage_writable") == 1.0
    # Logged once when it began and once when it ended, however many retries came between.
    assert (log_lines(svc, "cannot take writes"), log_lines(svc, "takes writes again")) == (faults + 1, clears + 1)


def test_acknowledgements_given_while_the_disk_is_full_are_written_when_space_returns(
    holding: tuple[ServeProcess, Tmpfs],
) -> None:
    svc, disk = holding
    topic = uid("acks")
    create_topic(str(svc.data_dir), topic)
    with Subscriber(svc.url, topic, container_id=uid("c"), credit=0, **jms_shared_durable(uid("s"))) as sub:
        sub.wait_attached()
        assert {o.state for o in publish(svc.url, topic, messages("a", 20), timeout=WAIT)} == {"accepted"}
        rec = subscription(svc.data_dir, topic)
        wait_for(lambda: routed(svc.data_dir, rec) == 20, WAIT, "20 rows routed to the subscription")
        disk.fill()
        try:
            sub.flow(20)  # delivered now, accepted now: the acknowledgements meet the full disk
            sub.wait_count(20, WAIT)
            wait_for(lambda: not storage(svc)["writable"], WAIT, "/health to report the full disk")
            assert acked(svc.data_dir, rec) == []
        finally:
            disk.release()
        wait_for(lambda: len(acked(svc.data_dir, rec)) == 20, WAIT, "the 20 acknowledgements in the ack log")
        assert acked(svc.data_dir, rec) == sorted(set(acked(svc.data_dir, rec)))
        wait_for(lambda: storage(svc)["writable"], WAIT, "/health: the data dir writable again")


def test_a_read_only_remount_holds_publishers_until_it_is_read_write_again(holding: tuple[ServeProcess, Tmpfs]) -> None:
    svc, disk = holding
    topic = uid("ro")
    create_topic(str(svc.data_dir), topic)
    with Subscriber(svc.url, topic, container_id=uid("c"), credit=1000, **jms_shared_durable(uid("s"))) as sub:
        sub.wait_attached()
        assert {o.state for o in publish(svc.url, topic, messages("w", 3), timeout=WAIT)} == {"accepted"}
        sub.wait_count(3, WAIT)
        disk.read_only()
        try:
            run = start_publish(svc.url, topic, messages("r", 50))
            wait_for(lambda: storage(svc).get("errno") == "EROFS", WAIT, "/health to report the read-only file system")
            code, doc = health(svc)
            assert code == 503 and doc["storage"]["error"] == "Read-only file system"
            wait_for(lambda: run.sent == 50, WAIT, "all 50 transfers")
            assert run.settled == []
        finally:
            disk.read_write()
        assert [o.state for o in run.wait(WAIT)] == ["accepted"] * 50
        deliver_all_once(svc, sub, topic, [f"w{i}" for i in range(3)] + [f"r{i}" for i in range(50)])
    wait_for(lambda: health(svc)[1]["ok"], WAIT, "/health ok again")


def test_past_full_disk_timeout_publishes_are_rejected_never_delivered_and_acks_kept(
    refusing: tuple[ServeProcess, Tmpfs],
) -> None:
    svc, disk = refusing
    root = svc.data_dir
    topic = uid("refuse")
    create_topic(str(root), topic)
    with Subscriber(svc.url, topic, container_id=uid("c"), credit=0, **jms_shared_durable(uid("s"))) as sub:
        sub.wait_attached()
        assert {o.state for o in publish(svc.url, topic, messages("w", 10), timeout=WAIT)} == {"accepted"}
        rec = subscription(root, topic)
        wait_for(lambda: routed(root, rec) == 10, WAIT, "10 rows routed to the subscription")
        disk.fill()
        try:
            outcomes = publish(svc.url, topic, messages("x", 20), timeout=WAIT)
            assert {(o.state, o.condition) for o in outcomes} == {("rejected", "amqp:resource-limit-exceeded")}
            description = outcomes[0].description or ""
            assert description.startswith(f"data dir {root} cannot take writes: No space left on device (ENOSPC)")
            assert "storage.full_disk_timeout is 1 s" in description
            code, doc = health(svc)
            assert code == 503 and doc["storage"]["refusing"] is True
            sub.flow(100)  # the 10 routed before are delivered and accepted: their acks are parked
            sub.wait_count(10, WAIT)
            wait_for(lambda: storage(svc)["parked"] > 0, WAIT, "the acknowledgements parked in memory")
            assert svc.proc is not None and svc.proc.poll() is None
        finally:
            disk.release()
        assert {o.state for o in publish(svc.url, topic, messages("y", 10), timeout=WAIT)} == {"accepted"}
        deliver_all_once(svc, sub, topic, [f"w{i}" for i in range(10)] + [f"y{i}" for i in range(10)])
        wait_for(lambda: set(range(10)) <= set(acked(root, rec)), WAIT, "the parked acknowledgements written")
    data = read_table(layout.topic_table(str(root), topic), ["seq"])
    assert data is not None and sorted(data.column("seq").to_pylist()) == list(range(21))  # w, y, end: no x
    wait_for(lambda: storage(svc) | {"free_bytes": 0} == {"writable": True, "parked": 0, "data_dir": str(root), "free_bytes": 0},
             WAIT, "nothing parked any more")


@pytest.mark.parametrize("command", ["serve", "frontend"])
def test_a_service_started_on_a_read_only_or_full_data_dir_exits_with_6_saying_why(tmp_path: Path, command: str) -> None:
    def start(data: Path) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        return subprocess.run(
            [sys.executable, "-m", "sharedsub", command, "--data-dir", str(data), "--port", "0"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        )

    with Tmpfs(tmp_path / "mnt", size="8m") as disk:
        data = disk.path / "data"
        data.mkdir()
        disk.read_only()
        refused = start(data)
        assert refused.returncode == 6, refused.stderr[-2000:]
        assert refused.stderr.strip().splitlines()[-1] == (
            f"error: data dir {data} cannot take writes: Read-only file system (EROFS); remount it read-write, then start again"
        )
        assert "Traceback" not in refused.stderr and "sharedsub ready" not in refused.stdout
        disk.read_write()
        disk.fill()
        refused = start(data)
        assert refused.returncode == 6, refused.stderr[-2000:]
        assert refused.stderr.strip().splitlines()[-1] == (
            f"error: data dir {data} cannot take writes: No space left on device (ENOSPC); free space on it, then start again"
        )
        assert "Traceback" not in refused.stderr
