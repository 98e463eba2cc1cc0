"""``sharedsub serve`` on an ``s3://`` data dir on a real S3 server (versitygw): publish, fan-out
and consume through the bucket; one owner per data dir by its lease (issue 28)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import Message

from sharedsub.core.layout import FANOUT_LEASE, member_lease
from sharedsub.runtime.users import UserStore
from sharedsub.storage.cluster.lease_objects import read_lease
from sharedsub.storage.delta.appender import EPOCH_MARK
from sharedsub.storage.delta.commit_log import latest_version, read_log_entry, table_id
from sharedsub.storage.delta.table_reads import read_table
from sharedsub.storage.delta.tables import child_names
from sharedsub.storage.fanout_progress import read_progress
from sharedsub.storage.objects import open_store
from sharedsub.storage.topics import create_topic
from tests.amqp_peer import Subscriber, jms_shared_durable, jms_shared_volatile, publish, start_publish, uid, wait_for
from tests.http_probe import scrape
from tests.s3_server import SECRET_KEY, S3Server
from tests.service import ROOT, ServeProcess


@pytest.fixture(scope="module")
def s3_service(s3_server: S3Server) -> Iterator[ServeProcess]:
    """One ``serve`` on a bucket of its own, shared by this module's tests."""
    proc = ServeProcess(s3_server.url("svc"), env=s3_server.env()).start()
    try:
        yield proc
    finally:
        code = proc.stop()
        assert code == 0, f"serve exited with {code}:\n" + "\n".join(proc.stderr_lines[-40:])


def test_published_messages_reach_a_durable_shared_subscriber_through_the_bucket(
    s3_service: ServeProcess, s3_env: dict[str, str]
) -> None:
    topic = uid("t")
    create_topic(str(s3_service.data_dir), topic)
    with Subscriber(s3_service.url, topic, **jms_shared_durable(uid("sub"))) as sub:
        assert sub.attached.wait(30)
        outcomes = publish(s3_service.url, topic, [Message(body=f"m{i}") for i in range(40)])
        assert [o.state for o in outcomes] == ["accepted"] * 40
        wait_for(lambda: len(sub.received) >= 40, 120, "40 deliveries through S3")
    assert sorted(r.message.body for r in sub.received) == sorted(f"m{i}" for i in range(40))


def test_a_second_front_end_on_the_same_bucket_is_refused_with_the_owners_address(
    s3_service: ServeProcess, s3_server: S3Server, s3_env: dict[str, str]
) -> None:
    store = open_store(str(s3_service.data_dir))
    wait_for(lambda: (read_lease(store, member_lease(0)) or (None,))[0].amqp is not None, 30, "the lease to name the owner")  # type: ignore[union-attr]
    second = subprocess.run(
        [sys.executable, "-m", "sharedsub", "frontend", "--data-dir", str(s3_service.data_dir), "--port", "0"],
        env={**s3_server.env(), "PATH": "/usr/bin:/bin"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode != 0
    assert f"serving {s3_service.url}" in second.stderr and "in use by process" in second.stderr, second.stderr[-2000:]


def test_cluster_status_names_the_member_its_fan_out_and_each_topics_partitions(
    s3_service: ServeProcess, s3_server: S3Server, s3_env: dict[str, str]
) -> None:
    """``sharedsub cluster status`` read from the bucket alone: slot 0 held (live) by the
    service at its address, the fan-out's lease, a topic's partition; no secret in either form."""
    data, env = str(s3_service.data_dir), s3_server.env()
    store = open_store(data)
    wait_for(lambda: (read_lease(store, member_lease(0)) or (None,))[0].amqp is not None, 30, "the lease to name the owner")  # type: ignore[union-attr]
    topic = uid("t")
    create_topic(data, topic)
    done = _sharedsub("cluster", "status", "--json", "--data-dir", data, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    (member,) = doc["members"]
    assert s3_service.proc is not None
    assert (member["slot"], member["state"], member["amqp"], member["pid"]) == (0, "live", s3_service.url, s3_service.proc.pid)
    assert member["epoch"] >= 1 and member["http"].startswith("http://")
    assert doc["fanout"]["state"] == "live" and doc["fanout"]["slot"] is None
    assert {"topic": topic, "partitions": [0]} in doc["topics"]
    text = _sharedsub("cluster", "status", "--data-dir", data, env=env)
    assert text.returncode == 0 and s3_service.url in text.stdout and "fan-out: live" in text.stdout, text.stdout
    for out in (done.stdout, text.stdout):
        assert SECRET_KEY not in out and "token" not in out


def test_the_open_frame_advertises_the_other_members_for_failover(
    s3_service: ServeProcess, s3_server: S3Server, s3_env: dict[str, str]
) -> None:
    """Another member's slot lease (written here as a member would) appears in each open frame's
    failover-server-list (docs/wire.md §1.1) once the member view read it; the service never
    names itself there, and with no other member the property is left out."""
    from proton import symbol
    from proton.utils import BlockingConnection

    from sharedsub.core.ownership.lease import LeaseRecord
    from sharedsub.storage.cluster.lease_objects import create_lease

    def advertised() -> object:
        conn = BlockingConnection(s3_service.url, timeout=30)
        try:
            props = conn.conn.remote_properties or {}
            return props.get(symbol("failover-server-list"))
        finally:
            conn.close()

    assert advertised() is None
    store = open_store(str(s3_service.data_dir))
    other = LeaseRecord("elsewhere:7:x", 1, "elsewhere", 7, 15.0, 3.0, amqp="amqp://127.0.0.9:5999")
    create_lease(store, member_lease(5), other)
    try:
        wait_for(lambda: advertised() is not None, 60, "the open frame to name the other member")
        (entry,) = advertised()  # type: ignore[misc]
        assert {str(k): v for k, v in entry.items()} == {"network-host": "127.0.0.9", "port": 5999, "scheme": "amqp"}
    finally:
        store.delete(member_lease(5))


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("missing bucket", "bucket does not exist"),
        ("wrong secret", "refused the credentials"),
        ("no server", "did not answer"),
    ],
)
def test_serve_refuses_an_unusable_store_with_one_line_naming_the_setting(
    s3_server: S3Server, tmp_path: Path, case: str, says: str
) -> None:
    env = {**s3_server.env(), "PATH": "/usr/bin:/bin"}
    data = s3_server.url("svc")
    if case == "missing bucket":
        data = "s3://no-such-bucket/svc"
    elif case == "wrong secret":
        env["AWS_SECRET_ACCESS_KEY"] = "wrong-secret-value"
    else:
        env["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9"
    done = subprocess.run(
        [sys.executable, "-m", "sharedsub", "serve", "--data-dir", data, "--port", "0"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 6, done.stderr[-2000:]
    assert len(errors) == 1 and says in errors[0] and data in errors[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "wrong-secret-value" not in done.stderr and SECRET_KEY not in done.stderr
    assert list(tmp_path.iterdir()) == []


def _sharedsub(*args: str, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sharedsub", *args],
        env={**env, "PATH": "/usr/bin:/bin"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        input=stdin,
    )


def test_the_command_line_inspects_replays_and_unsubscribes_on_s3(s3_service: ServeProcess, s3_server: S3Server) -> None:
    """subscriptions list, backlog, replay and unsubscribe on an s3:// data dir, the last two
    through the running service (found by its _service.json in this host's state directory)."""
    data, env = str(s3_service.data_dir), s3_server.env()
    topic, name = uid("t"), uid("sub")
    assert _sharedsub("topics", "create", topic, "--data-dir", data, env=env).returncode == 0
    with Subscriber(s3_service.url, topic, container_id="app1", **jms_shared_durable(name)) as sub:
        assert sub.attached.wait(30)
        publish(s3_service.url, topic, [Message(body=f"a{i}") for i in range(20)])
        wait_for(lambda: len(sub.received) >= 20, 120, "20 deliveries")
    publish(s3_service.url, topic, [Message(body=f"b{i}") for i in range(5)])
    full = f"app1:{name}"

    def backlog() -> int:
        listed = _sharedsub("subscriptions", "list", "--data-dir", data, "--json", env=env)
        assert listed.returncode == 0, listed.stderr
        rows = [r for r in json.loads(listed.stdout) if r["name"] == full]
        return int(rows[0]["backlog"]["messages"]) if rows else -1

    wait_for(lambda: backlog() == 5, 120, "a backlog of the 5 messages published without a consumer")
    shown = _sharedsub("backlog", full, "--data-dir", data, env=env)
    assert shown.returncode == 0 and full in shown.stdout, shown.stderr
    replayed = _sharedsub("replay", full, "--version", "0", "--data-dir", data, env=env)
    assert replayed.returncode == 0 and "through the running service" in replayed.stdout, replayed.stderr
    assert "25 message(s), 20 of them acknowledged before" in replayed.stdout
    wait_for(lambda: backlog() == 25, 60, "the replayed messages in the backlog")
    gone = _sharedsub("unsubscribe", full, "--data-dir", data, env=env)
    assert gone.returncode == 0 and "through the running service" in gone.stdout, gone.stderr
    assert backlog() == -1


def test_users_live_in_the_bucket_and_a_user_store_follows_them(s3_server: S3Server, s3_env: dict[str, str]) -> None:
    data, env = s3_server.url("users"), s3_server.env()
    added = _sharedsub("users", "add", "alice", "--password-stdin", "--data-dir", data, env=env, stdin="correct horse\n")
    assert added.returncode == 0 and f"{data}/_users.json" in added.stdout, added.stderr
    listed = _sharedsub("users", "list", "--data-dir", data, env=env)
    assert listed.stdout.split()[0] == "alice"
    store = open_store(data)
    assert b"alice" in store.get("_users.json").data and b"correct horse" not in store.get("_users.json").data
    users = UserStore(f"{data}/_users.json")  # what the listener authenticates against
    assert set(users.lookup("alice")) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert _sharedsub("users", "remove", "alice", "--data-dir", data, env=env).returncode == 0
    assert users.lookup("alice") == {}  # re-read: its tag changed


def test_storage_options_from_the_config_file_alone_reach_every_process(s3_server: S3Server, tmp_path: Path) -> None:
    """Endpoint and credentials only in ``[storage] options`` (no AWS variables): the front end,
    its append child and the fan-out job all reach the bucket."""
    assert not set(s3_server.env()) & set(os.environ), "this test needs no AWS endpoint or credential variables set"
    options = ", ".join(f'{k} = "{v}"' for k, v in s3_server.env().items())
    config = tmp_path / "s3.toml"
    config.write_text(f"[storage]\noptions = {{ {options} }}\n")
    data = s3_server.url("cfg")
    topic = uid("t")
    made = _sharedsub("topics", "create", topic, "--data-dir", data, "--config", str(config), env={})
    assert made.returncode == 0, made.stderr
    proc = ServeProcess(data, extra_args=["--config", str(config)]).start()
    try:
        with Subscriber(proc.url, topic, **jms_shared_durable(uid("sub"))) as sub:
            assert sub.attached.wait(30)
            outcomes = publish(proc.url, topic, [Message(body=f"c{i}") for i in range(10)])
            assert [o.state for o in outcomes] == ["accepted"] * 10
            wait_for(lambda: len(sub.received) >= 10, 120, "10 deliveries with the options from the file")
    finally:
        code = proc.stop()
    assert code == 0, "\n".join(proc.stderr_lines[-30:])
    assert s3_server.env()["AWS_SECRET_ACCESS_KEY"] not in "\n".join(proc.stderr_lines + proc.stdout_lines)


@pytest.mark.timeout(600)
def test_a_sigstopped_owner_taken_over_writes_nothing_after_sigcont(s3_server: S3Server, s3_env: dict[str, str]) -> None:
    """Owner A is SIGSTOPped; B watches A's lease for its TTL, takes it over (epoch 2) and
    publishes to the topic A was publishing to (fencing that topic's table). A publish sent to A
    while it was stopped is taken by A on SIGCONT: its commit finds B's fence and is refused, A
    stops with a non-zero exit, and every commit of the topic and the catalog after B's takeover
    was written under epoch 2."""
    data = s3_server.url("fenced")
    topic = uid("t")
    create_topic(data, topic)
    a = ServeProcess(data, env=s3_server.env()).start()
    try:
        assert [o.state for o in publish(a.url, topic, [Message(body="a0")])] == ["accepted"]
        store = open_store(data)
        table = f"{data}/topics/{topic}"
        assert a.proc is not None
        os.kill(a.proc.pid, signal.SIGSTOP)
        b = ServeProcess(data, env=s3_server.env()).start()  # waits out A's TTL, then takes over
        try:
            record, _tag = read_lease(store, member_lease(0)) or (None, "")
            assert record is not None and record.epoch == 2
            taken_at = latest_version(table)
            assert [o.state for o in publish(b.url, topic, [Message(body="b0")])] == ["accepted"]
            late = start_publish(a.url, topic, [Message(body="a-late")])  # queued in A's socket
            os.kill(a.proc.pid, signal.SIGCONT)
            assert a.proc.wait(60) != 0, "A went on after losing its lease"
            assert all(o.state != "accepted" for o in late.settled), "A accepted a publish after it was superseded"
            for version in range(taken_at + 1, latest_version(table) + 1):
                entry = read_log_entry(table, version)
                assert entry is not None and entry.info.get(EPOCH_MARK) == "2", (version, entry.info if entry else None)
            bodies = read_table(table, ["message"])
            assert bodies is not None and not any(b"a-late" in m for m in bodies.column("message").to_pylist())
        finally:
            assert b.stop() == 0
    finally:
        a.kill()


def test_an_idle_service_on_a_bucket_makes_few_requests_and_counts_them(s3_service: ServeProcess, s3_env: dict[str, str]) -> None:
    """With one topic and one durable consumer attached and nothing published, the front end's
    own requests are the tailer's probes (backed off to one per [storage]
    object_idle_poll_interval, 1 s) and the lease's renewals (one per 3 s): /metrics counts them
    by kind and family."""
    topic = uid("t")
    create_topic(str(s3_service.data_dir), topic)
    with Subscriber(s3_service.url, topic, **jms_shared_durable(uid("idle"))) as sub:
        assert sub.attached.wait(30)
        time.sleep(2.0)  # past the attach's backlog load
        before, t0 = _requests(s3_service), time.monotonic()
        time.sleep(10.0)  # three lease renewals and about ten probes: enough to tell 1.3 a second from 3
        after, t1 = _requests(s3_service), time.monotonic()
    rates = {key: (after.get(key, 0.0) - before.get(key, 0.0)) / (t1 - t0) for key in after}
    print(f"idle request rates (per s) by (kind, family): {sorted(rates.items())}")
    assert rates.get(("put_if_match", "cluster"), 0.0) > 0  # the lease is renewed
    # Every subscription with consumers on this module's service is tailed (earlier tests left
    # theirs detached, so one feed here): backed off to one probe per [storage]
    # object_idle_poll_interval (1 s), plus the lease's 0.33/s (10/s before the back-off).
    assert sum(rates.values()) < 3.0, rates


def _requests(svc: ServeProcess) -> dict[tuple[str, str], float]:
    samples = scrape(svc)
    return {
        (dict(labels)["kind"], dict(labels)["family"]): value
        for (name, labels), value in samples.items()
        if name == "sharedsub_object_store_requests_total"
    }


def test_maintenance_on_a_bucket_trims_what_was_acknowledged_and_routed(s3_server: S3Server, s3_env: dict[str, str]) -> None:
    """Maintenance runs on a bucket (as tests/e2e/test_maintenance.py on a local dir): acknowledged
    rows leave a durable subscription's table; an ended non-durable subscription's tables go,
    once the fan-out's progress record (its Spark checkpoint is on this host, not in the bucket)
    shows no batch planned with the catalog before the end; the topic's routed rows below what
    the next subscription holds go by whole files; consumers get every message once."""
    from tests.e2e.test_maintenance import FAST_MAINTENANCE
    from tests.e2e.test_outcomes import record

    root = s3_server.url("maint")
    create_topic(root, "trim")
    create_topic(root, "kept")
    env = {
        **s3_server.env(), **FAST_MAINTENANCE,
        "SHAREDSUB_MAINTENANCE_MIN_ACKED_ROWS": "1", "SHAREDSUB_MAINTENANCE_TOPIC_RETENTION_HOURS": "0",
    }
    service = ServeProcess(root, env=env).start()
    try:
        with Subscriber(service.url, "kept", container_id="kept-app", **jms_shared_durable("keeper")) as keeper:
            with Subscriber(service.url, "trim", container_id="trim-app", **jms_shared_volatile("vol")) as vol:
                assert vol.attached.wait(30) and keeper.attached.wait(30)
                for batch in range(5):  # several group commits: several topic files
                    for topic in ("trim", "kept"):
                        publish(service.url, topic, [Message(body=batch * 10 + i) for i in range(10)])
                wait_for(lambda: len(vol.received) >= 50 and len(keeper.received) >= 50, 120, "50 deliveries each")
                kept = f"{root}/{record(root, 'keeper').table}"  # type: ignore[arg-type]
                wait_for(lambda: _seqs(kept) == [], 120, "acknowledged rows deleted from the bucket")
                vol_key = record(root, "vol").key  # type: ignore[arg-type]
            # The non-durable subscription ended with its only link.
            subscriptions = f"{root}/subscriptions"
            wait_for(lambda: vol_key not in child_names(subscriptions), 120, "the ended subscription's tables removed")
            trim = f"{root}/topics/trim"
            assert read_progress(root).routed_version("trim", table_id(trim)) >= 5
            with Subscriber(service.url, "trim", container_id="trim-app", **jms_shared_volatile("vol2")) as vol2:
                assert vol2.attached.wait(30)
                publish(service.url, "trim", [Message(body=50 + i) for i in range(10)])
                wait_for(lambda: len(vol2.received) >= 10, 60, "10 deliveries to vol2")
                # Rows of "trim" below what vol2 holds (its rows start at 50) go.
                wait_for(lambda: _seqs(trim)[:1] == [50], 120, "rows 0..49 of 'trim' removed")
                for topic in ("trim", "kept"):
                    publish(service.url, topic, [Message(body="marker")])
                wait_for(lambda: len(vol2.received) >= 11 and len(keeper.received) >= 51, 60, "the markers")
        assert [r.message.body for r in vol.received] == list(range(50))
        assert [r.message.body for r in vol2.received] == [*range(50, 60), "marker"]
        assert [r.message.body for r in keeper.received] == [*range(50), "marker"]
        assert all(r.delivery_count == 0 for r in [*vol.received, *vol2.received, *keeper.received])
    except AssertionError as exc:
        raise AssertionError(f"{exc}; log:\n{service.log()[-6000:]}") from None
    finally:
        assert service.stop() == 0, service.log()[-3000:]


def _seqs(table: str) -> list[int]:
    data = read_table(table, ["seq"])
    return sorted(data.column("seq").to_pylist()) if data is not None else []


def test_a_second_fanout_job_on_the_bucket_is_refused_naming_the_holder(
    s3_service: ServeProcess, s3_server: S3Server, s3_env: dict[str, str]
) -> None:
    """One fan-out job per data dir on object storage: the service's own job holds the fan-out
    lease (_cluster/fanout), and another one (here started by hand, as spark-submit would on
    another host) exits 5 before it starts Spark, naming the holder."""
    store = open_store(str(s3_service.data_dir))
    wait_for(lambda: read_lease(store, FANOUT_LEASE) is not None, 60, "the fan-out's lease")
    found = read_lease(store, FANOUT_LEASE)
    assert found is not None
    holder = found[0]
    done = subprocess.run(
        [sys.executable, "-m", "jobs.fanout", "--data-dir", str(s3_service.data_dir)],
        env={**os.environ, **s3_server.env()}, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 5, done.stderr[-3000:]
    assert f"another fan-out job (process {holder.pid} on {holder.host}) holds the fan-out lease" in done.stderr
    assert read_lease(store, FANOUT_LEASE) is not None and read_lease(store, FANOUT_LEASE)[0].epoch == holder.epoch  # type: ignore[index]
