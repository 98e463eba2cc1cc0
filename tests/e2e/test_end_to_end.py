"""The whole path against a real ``sharedsub serve``: publish → topic table → Spark fan-out →
subscription table → consumer link, driven by python-qpid-proton clients."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pyspark
import pytest
from proton import Data, Described, Message, symbol, ubyte, ulong
from proton.utils import BlockingConnection

from jobs import jvm_archive
from jobs.fanout import DRIVER_CONF, DRIVER_JAVA_OPTIONS
from jobs.session import spark_conf
from sharedsub.core import layout
from sharedsub.core.config import load_settings
from sharedsub.storage.delta.table_reads import read_table
from tests.amqp_peer import Subscriber, publish, wait_for
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e


def _bodies(received: list) -> list:
    return [r.message.body for r in received]


def test_connection_offers_capabilities(service: ServeProcess) -> None:
    conn = BlockingConnection(service.url, timeout=30)
    try:
        offered = {str(c) for c in conn.conn.remote_offered_capabilities or []}
    finally:
        conn.close()
    assert {"SHARED-SUBS", "ANONYMOUS-RELAY", "sole-connection-for-container"} <= offered


def test_subscriber_gets_messages_committed_after_attach_in_order(service: ServeProcess, topic: str) -> None:
    publish(service.url, topic, [Message(body="before")])
    with Subscriber(service.url, topic) as sub:
        sub.wait_attached()
        assert "topic" in sub.remote_source["capabilities"]
        outcomes = publish(service.url, topic, [Message(body=f"m{i}", durable=True) for i in range(50)])
        assert [o.state for o in outcomes] == ["accepted"] * 50
        got = sub.wait_count(50)
        assert _bodies(got) == [f"m{i}" for i in range(50)]
        assert "before" not in _bodies(got)


def test_message_stored_before_accept(service: ServeProcess, topic: str) -> None:
    # accepted means committed: the topic table holds the message once accept arrived.
    outcomes = publish(service.url, topic, [Message(body="durable-1", properties={"k": 7})])
    assert outcomes[0].state == "accepted"
    data = read_table(layout.topic_table(str(service.data_dir), topic), ["seq", "size"])
    assert data is not None and data.num_rows == 1
    assert data.column("seq").to_pylist() == [0]


def test_binding_patterns(service: ServeProcess, topic: str) -> None:
    subs = {
        "all": Subscriber(service.url, topic),
        "star": Subscriber(service.url, f"{topic}/news.*"),
        "hash": Subscriber(service.url, f"{topic}/news.#"),
        "tail": Subscriber(service.url, f"{topic}/#.eu"),
    }
    for s in subs.values():
        s.start()
    try:
        for s in subs.values():
            s.wait_attached()
        # key from the target address, from the routing-key property, and from the subject
        publish(service.url, f"{topic}/news.eu", [Message(body="k1")])
        publish(service.url, topic, [Message(body="k2", properties={"routing-key": "news.us.east"})])
        publish(service.url, topic, [Message(body="k3", subject="sport.eu")])
        publish(service.url, f"{topic}/news", [Message(body="k4")])
        expected = {"all": {"k1", "k2", "k3", "k4"}, "star": {"k1"}, "hash": {"k1", "k2", "k4"}, "tail": {"k1", "k3"}}
        for name, want in expected.items():
            subs[name].wait_count(len(want))
        # a final marker to every subscriber proves nothing else is still in flight
        publish(service.url, f"{topic}/news.eu.x", [Message(body="end")])
        for name in ("all", "hash"):
            wait_for(lambda n=name: "end" in _bodies(subs[n].received), 60, f"end marker on {name}")
        subs["tail"].wait_count(2)
        for name, want in expected.items():
            got = set(_bodies(subs[name].received)) - {"end"}
            assert got == want, name
    finally:
        for s in subs.values():
            s.stop()


def test_anonymous_relay(service: ServeProcess, topic: str) -> None:
    with Subscriber(service.url, f"{topic}/a.*") as sub:
        sub.wait_attached()
        outcomes = publish(
            service.url,
            None,
            [
                Message(address=f"{topic}/a.b", body="r1"),
                Message(address=f"{topic}/x.y", body="r2"),
                Message(address=f"missing-{uuid.uuid4().hex[:6]}", body="r3"),
                Message(address=topic, subject="a.c", body="r4"),
            ],
        )
        assert [o.state for o in outcomes] == ["accepted", "accepted", "rejected", "accepted"]
        assert outcomes[2].condition == "amqp:not-found"
        got = sub.wait_count(2)
        assert sorted(_bodies(got)) == ["r1", "r4"]


def test_unknown_topic_refused(service: ServeProcess) -> None:
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    with pytest.raises(AssertionError, match="amqp:not-found"):
        publish(service.url, missing, [Message(body="x")], timeout=30)
    with Subscriber(service.url, missing) as sub:
        cond, description = sub.wait_refused()
        assert cond == "amqp:not-found"
        assert missing in description
        assert sub.remote_source.get("is_null", True)


def test_credit_is_respected(service: ServeProcess, topic: str) -> None:
    with Subscriber(service.url, topic, credit=3) as sub:
        sub.wait_attached()
        publish(service.url, topic, [Message(body=i) for i in range(10)])
        sub.wait_count(3)
        with Subscriber(service.url, topic) as witness:
            # a second subscriber attached later proves the fan-out has moved on past our messages
            witness.wait_attached()
            publish(service.url, topic, [Message(body="later")])
            witness.wait_count(1)
        sub.wait_count(3)
        assert len(sub.received) == 3
        sub.flow(100)
        got = sub.wait_count(11)
        assert _bodies(got) == [*range(10), "later"]


def _encode_sections(*sections: Described) -> bytes:
    out = b""
    for s in sections:
        d = Data()
        d.put_object(s)
        out += d.encode()
    return out


def test_round_trip_is_byte_faithful(service: ServeProcess, topic: str) -> None:
    header = Described(ulong(0x70), [True, ubyte(7)])  # durable, priority 7
    msg_annotations = Described(ulong(0x72), {symbol("x-opt-jms-msg-type"): 5, symbol("x-opt-jms-dest"): 1})
    properties = Described(
        ulong(0x73), ["id-1", b"user", f"{topic}", "subj", "reply", "corr", symbol("text/plain")]
    )
    app_props = Described(ulong(0x74), {"color": "red", "n": 42, "f": 1.5, "b": True})
    footer = Described(ulong(0x78), {symbol("x-opt-checksum"): "abc"})
    variants = {
        "amqp-value": _encode_sections(
            header, msg_annotations, properties, app_props, Described(ulong(0x77), {"k": [1, 2]}), footer
        ),
        "data": _encode_sections(properties, Described(ulong(0x75), b"\x00\x01binary"), Described(ulong(0x75), b"two"), footer),
        "amqp-sequence": _encode_sections(header, Described(ulong(0x76), [1, "two", 3.0]), Described(ulong(0x76), [None])),
        "empty-value": _encode_sections(Described(ulong(0x77), None)),
    }
    with Subscriber(service.url, topic) as sub:
        sub.wait_attached()
        outcomes = publish(service.url, topic, list(variants.values()))
        assert {o.state for o in outcomes} == {"accepted"}
        got = sub.wait_count(len(variants))
        assert [r.raw for r in got] == list(variants.values())
        assert got[0].message.properties == {"color": "red", "n": 42, "f": 1.5, "b": True}


def test_publish_order_per_publisher_with_concurrent_publishers(service: ServeProcess, topic: str) -> None:
    import threading

    with Subscriber(service.url, topic, credit=1000) as sub:
        sub.wait_attached()
        threads = [
            threading.Thread(target=publish, args=(service.url, topic, [Message(body=f"{p}:{i}") for i in range(200)]))
            for p in range(3)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        got = _bodies(sub.wait_count(600))
        for p in range(3):
            mine = [int(b.split(":")[1]) for b in got if b.startswith(f"{p}:")]
            assert mine == list(range(200))


def test_subscriber_leaving_removes_plain_subscription(service: ServeProcess, topic: str) -> None:
    from sharedsub.storage.catalog import load_catalog

    with Subscriber(service.url, topic) as sub:
        sub.wait_attached()
    root = str(service.data_dir)

    def deleted() -> bool:
        recs = [r for r in load_catalog(root).values() if r.topic == topic]
        return bool(recs) and all(not r.active for r in recs)

    wait_for(deleted, 30, "the plain subscription to be deleted from the catalog")


def _driver_jvm(service: ServeProcess) -> tuple[int, list[str]]:
    """The fan-out's driver JVM: its pid and argv. pyspark runs spark-submit, whose java process
    is a child of the job's Python driver."""
    driver = service.fanout_pid()
    assert driver is not None
    jvms = [
        (int(child), argv)
        for task in Path(f"/proc/{driver}/task").glob("*")
        for child in (task / "children").read_text().split()
        for argv in [Path(f"/proc/{child}/cmdline").read_bytes().decode().split("\0")]
        if argv[0].endswith("java")
    ]
    assert len(jvms) == 1, jvms
    return jvms[0]


def test_the_fanout_jvm_compiles_with_c1_only_and_sooner(service: ServeProcess) -> None:
    # jobs.fanout.DRIVER_CONF. C2 kept compiling Spark's planning code minutes into steady load,
    # and with C1's default thresholds much of it stayed interpreted.
    _, argv = _driver_jvm(service)
    assert set(DRIVER_JAVA_OPTIONS.split()) <= set(argv)
    assert "-XX:ReservedCodeCacheSize=240m" in argv  # C1 alone gets 48 MB, which Spark filled


def test_the_fanout_jvm_maps_the_class_archive_setup_made(service: ServeProcess) -> None:
    # jobs/jvm_archive.py: without the archive (setup did not make it, or the JVM refused it: another
    # java or class path than its key says) serve starts half again as slowly, and nothing else shows it.
    settings = load_settings(environ={**os.environ, "SHAREDSUB_STORAGE_DATA_DIR": str(service.data_dir)})
    classpath = spark_conf(settings, extra=DRIVER_CONF).get("spark.driver.extraClassPath", "")
    archive = jvm_archive.archive_path(Path(pyspark.__file__).parent, classpath, os.environ)
    assert archive is not None and archive.is_file(), f"no class archive {archive}: `python3 bootstrap.py test` makes it"
    pid, argv = _driver_jvm(service)
    if str(archive) not in Path(f"/proc/{pid}/maps").read_text():
        pytest.fail(f"the driver JVM {pid} has not mapped {archive}; the JVM says why:\n{_archive_refusal(argv, archive)}")


def _archive_refusal(argv: list[str], archive: Path) -> str:
    """What the driver's java says of ``archive`` with the driver's class path when it must use it
    (``-Xshare:on`` stops with the reason that ``-Xshare:auto`` and ``-Xlog:cds*=off`` keep quiet)."""
    classpath = argv[argv.index("-cp") + 1]
    share = ["-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-Xlog:class+path=info"]
    cmd = [argv[0], "-Xmx1g", *share, "-cp", classpath, "-version"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    return "\n".join(line[:300] for line in (done.stdout + done.stderr).strip().splitlines()[-8:])
