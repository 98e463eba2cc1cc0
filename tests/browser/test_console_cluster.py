"""The web console of a cluster (docs/console.md): two front ends on one bucket of a real S3
server, the console open on the first while the second is killed with SIGKILL. Any member's
console shows the whole cluster; after the kill it shows the member gone and its partition
dispatched by the survivor, and the messages published before are all delivered (nothing lost).
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from proton import Message

from sharedsub.core import layout
from sharedsub.runtime.discovery import running_services
from sharedsub.storage.topics import create_topic
from tests.amqp_peer import Subscriber, jms_shared_durable, publish, uid, wait_for
from tests.members import MEMBERS, wait_for_owner
from tests.s3_server import S3Server
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e

SETTLE = {"SHAREDSUB_SERVER_CONSOLE_REFRESH": "1"}


def _console(member: ServeProcess) -> str:
    (info,) = [i for i in running_services(str(member.data_dir)) if i.pid == member.pid]
    assert info.admin_url
    return f"{info.admin_url}/console#/"


def test_a_member_killed_while_the_console_is_open_shows_gone_and_its_partition_taken_over(
    s3_server: S3Server, s3_env: dict[str, str], page: Page
) -> None:
    env = {**s3_server.env(), **MEMBERS, **SETTLE}
    data = s3_server.url("console-cluster")
    first = ServeProcess(data, env=env).start()
    second = ServeProcess(data, command="frontend", env=env).start()
    topic, name = uid("t"), uid("sub")
    key = layout.subscription_key("global", name, shared=True, durable=True)
    create_topic(data, topic)
    create_topic(data, topic, 1)  # the second member's partition, as its first publish makes it
    survivor = Subscriber(first.url, topic, **jms_shared_durable(name, is_global=True))
    doomed = Subscriber(second.url, topic, settle="none", **jms_shared_durable(name, is_global=True, ordinal=2))
    try:
        for sub in (survivor, doomed):
            sub.start()
            assert sub.attached.wait(60), sub.error
        wait_for_owner(data, name, 1, 1)
        page.goto(_console(first))
        members = page.locator("#members")
        expect(members.locator('tr[data-slot="0"] td.state')).to_have_text("live", timeout=60_000)
        expect(members.locator('tr[data-slot="1"] td.state')).to_have_text("live")
        dispatch = page.locator(f'#dispatch tr[data-subscription="{key}"][data-partition="1"] td.slot')
        expect(dispatch).to_have_text("1", timeout=60_000)  # the second member dispatches its partition
        expect(page.locator(f'#subscriptions tr[data-subscription="{key}"] td.consumers')).to_have_text("2")
        # Its consumers, one on each member, each named with the member that serves it.
        page.goto(_console(first).replace("#/", f"#/subscription/{key}"))
        members_of = {f"{name}|global": "0", f"{name}|global2": "1"}
        for link, slot in members_of.items():
            expect(page.locator(f'#consumers tr[data-link="{link}"] td.member')).to_have_text(slot, timeout=30_000)
        page.goto(_console(first))

        sent = [f"m{i}" for i in range(20)]
        assert {o.state for o in publish(second.url, topic, [Message(body=b) for b in sent])} == {"accepted"}
        wait_for(lambda: len(doomed.received) >= len(sent), 120, "the second member's consumer to hold its messages")
        # Published through the second member: the first one's console counts it (its counters).
        expect(page.locator(f'#topics tr[data-topic="{topic}"] td.published')).to_have_text(str(len(sent)), timeout=30_000)
        second.kill()
        expect(members.locator('tr[data-slot="1"] td.state')).not_to_have_text("live", timeout=90_000)
        expect(dispatch).to_have_text("0", timeout=120_000)  # taken over by the survivor
        expect(members.locator('tr[data-slot="0"] td.partitions')).to_have_text("2")
        wait_for(lambda: {r.message.body for r in survivor.received} >= set(sent), 120, "every message at the survivor")
        page.screenshot(path="/tmp/console-cluster.png", full_page=True)
    finally:
        for sub in (survivor, doomed):
            sub.stop()
        second.kill()
        assert first.stop() == 0, "\n".join(first.stderr_lines[-40:])
