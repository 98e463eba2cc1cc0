"""The committer on a bucket whose S3 server goes away (issue 28 item 5): real versitygw, SIGKILLed
and started again on its port and directory, real Delta tables, commits in the append child.

A store that does not answer is a write fault as a full disk is (sharedsub.core.publish.write_faults):
publishes are held and stored once when it returns, refused with StorageUnavailable
(``amqp:resource-limit-exceeded``) once the fault outlasted ``full_disk_timeout``, and
acknowledgements are parked meanwhile, then written.
"""

from __future__ import annotations

from collections.abc import Iterator

import proton
import pytest

from sharedsub.core import layout
from sharedsub.core.errors import StorageUnavailable
from sharedsub.runtime.commit_requests import Ack, Publish
from sharedsub.runtime.committer import Committer
from sharedsub.runtime.payloads import PayloadCache
from sharedsub.storage.commits.append_process import AppendProcess
from sharedsub.storage.commits.commit_store import DeltaStore
from sharedsub.storage.delta.table_reads import read_table
from sharedsub.storage.topics import create_topic
from tests.amqp_peer import wait_for
from tests.builders import Collector, publish_request
from tests.s3_server import S3Server

ACKS = "subscriptions/k/acks-g1"


def _publish(i: int) -> Publish:
    return publish_request("t", proton.Message(body=f"m{i}"), i)


@pytest.fixture
def server(s3_server: S3Server, s3_env: dict[str, str]) -> Iterator[S3Server]:
    """The session's S3 server, up again after the test whatever it did to it."""
    yield s3_server
    if s3_server.proc is None or s3_server.proc.poll() is not None:
        s3_server.start()


def _committer(root: str, done: Collector, timeout: float) -> Committer:
    create_topic(root, "t")
    c = Committer(DeltaStore(root, appends=AppendProcess()), cache=PayloadCache(1 << 20), on_done=done, full_disk_timeout=timeout)
    c.start()
    return c


def test_publishes_are_held_while_the_store_is_away_and_stored_once_when_it_returns(server: S3Server) -> None:
    root, done = server.url("held"), Collector()
    c = _committer(root, done, timeout=3600)
    try:
        c.submit(_publish(0))
        assert done.wait(1)[0].value == 0
        server.kill()
        for i in range(1, 51):
            c.submit(_publish(i))
        wait_for(lambda: c.fault is not None, 60, "the committer to see the store away")
        status = c.storage_status()
        assert (status["writable"], status["errno"], status["refusing"]) == (False, "ECONNREFUSED", False)
        assert len(done.results) == 1  # held: none refused, none accepted
        server.start()
        results = done.wait(51)
    finally:
        c.stop()
    assert [r.error for r in results] == [None] * 51
    assert sorted(r.value for r in results) == list(range(51))
    data = read_table(layout.topic_table(root, "t"), ["seq"])
    assert data is not None and sorted(data.column("seq").to_pylist()) == list(range(51))  # each once
    assert c.fault is None


def test_past_the_timeout_publishes_are_refused_and_acks_parked_until_the_store_returns(server: S3Server) -> None:
    root, done = server.url("refused"), Collector()
    c = _committer(root, done, timeout=1.0)
    try:
        c.submit(_publish(0))
        done.wait(1)
        server.kill()
        c.submit(Ack(ACKS, [0], "accepted", "c1", token="ack"))
        c.submit(_publish(1))
        refused = done.wait(2)[1]
        assert refused.request.token == 1 and isinstance(refused.error, StorageUnavailable)
        assert str(refused.error.condition) == "amqp:resource-limit-exceeded"
        assert refused.error.description.startswith(f"data dir {root} cannot take writes: Connection refused (ECONNREFUSED)")
        assert c.storage_status()["parked"] == 1  # the ack waits in memory
        server.start()
        c.submit(_publish(2))
        results = done.wait(4)
    finally:
        c.stop()
    by_token = {r.request.token: r for r in results}
    assert by_token["ack"].error is None and by_token[2].error is None
    assert by_token[2].value == 1  # seq 1 was never used by the refused publish
    acks = read_table(layout.join(root, ACKS), ["seq", "outcome"])
    assert acks is not None and acks.to_pylist() == [{"seq": 0, "outcome": "accepted"}]
