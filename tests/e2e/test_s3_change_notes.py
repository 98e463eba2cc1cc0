"""``sharedsub serve`` on a bucket whose S3 server (versitygw) logs every request: once traffic
stops, neither the topic tables nor the consumed subscription tables are probed (the fan-out reads
the committer's change note, the tailer waits for the fan-out's announcements), and the first
message after the quiet spell is still delivered (sharedsub.core.fanout.change_notes; issue 42
item 4)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from proton import Message

from sharedsub.core.fanout.change_notes import ACTIVE_FOR
from sharedsub.storage.topics import create_topic
from tests.amqp_peer import Subscriber, jms_shared_durable, publish, uid, wait_for
from tests.s3_server import S3Server
from tests.service import ServeProcess

TOPICS = 4


@pytest.fixture(scope="module")
def served(counted: S3Server) -> Iterator[ServeProcess]:
    """One ``serve`` on a bucket of the module's counted S3 server."""
    proc = ServeProcess(counted.url("svc"), env=counted.env()).start()
    try:
        yield proc
    finally:
        code = proc.stop()
        assert code == 0, f"serve exited with {code}:\n" + "\n".join(proc.stderr_lines[-40:])


def _per_table(requests: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The requests on topic and subscription tables (what grows with their number)."""
    # keys are "<prefix>/topics/..." and "<prefix>/subscriptions/..." (not the catalog's table)
    return [(op, key) for op, key in requests if key.split("/")[1:2] in (["topics"], ["subscriptions"])]


def test_quiet_topics_and_consumed_subscriptions_cost_no_request_and_the_next_message_arrives(
    served: ServeProcess, counted: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in counted.env().items():
        monkeypatch.setenv(name, value)
    topics = [uid("quiet") for _ in range(TOPICS)]
    for t in topics:
        create_topic(str(served.data_dir), t)  # (offline: its first commit by serve is noted)
    with ExitStack() as stack:
        subs = [stack.enter_context(Subscriber(served.url, t, **jms_shared_durable(uid("s")))) for t in topics]
        for sub in subs:
            assert sub.attached.wait(60), sub.error
        for t in topics:
            assert [o.state for o in publish(served.url, t, [Message(body=f"{t}-1")])] == ["accepted"]
        wait_for(lambda: all(len(s.received) == 1 for s in subs), 60, "the first message of each topic")

        time.sleep(ACTIVE_FOR + 3)  # the fan-out's probes of those topics stop Q after their news
        start = counted.access_mark()
        time.sleep(8)
        quiet = counted.requests_since(start)
        assert quiet, "the S3 server logged no request at all: the count proves nothing"
        assert _per_table(quiet) == [], _per_table(quiet)
        assert any("/_changes/topics-0.json" in key for _, key in quiet), quiet  # the fan-out reads the note

        for t in topics:
            assert [o.state for o in publish(served.url, t, [Message(body=f"{t}-2")])] == ["accepted"]
        wait_for(lambda: all(len(s.received) == 2 for s in subs), 60, "the message after the quiet spell")
    for t, sub in zip(topics, subs, strict=True):
        assert [r.message.body for r in sub.received] == [f"{t}-1", f"{t}-2"]
