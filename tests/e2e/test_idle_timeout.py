"""Idle timeout against a real ``sharedsub frontend``: a connection that goes silent (its client
process stopped, so not even empty frames arrive) is dropped, and what it held is free again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from sharedsub.storage.topics import create_topic
from tests.amqp_peer import Subscriber, jms_durable, uid, wait_for
from tests.service import ROOT, ServeProcess

pytestmark = pytest.mark.e2e

# A Qpid-JMS-shaped unshared durable subscriber in a process of its own, so it can be stopped.
_CLIENT = textwrap.dedent(
    """
    import sys
    from proton import Terminus
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    url, address, container_id, name = sys.argv[1:5]

    class Client(MessagingHandler):
        def on_start(self, event):
            conn = event.container.connect(url, reconnect=False)
            rcv = event.container.create_receiver(conn, address, name=name)
            rcv.source.durability = Terminus.DELIVERIES
            rcv.source.expiry_policy = Terminus.EXPIRE_NEVER

        def on_link_opened(self, event):
            print("attached", event.connection.transport.remote_idle_timeout, flush=True)

    container = Container(Client())
    container.container_id = container_id
    container.run()
    """
)


def _attach_once(url: str, container_id: str, name: str) -> tuple[str, str] | None:
    """Attach the durable consumer; None when it attached, else the refusal."""
    with Subscriber(url, "idle-topic", container_id=container_id, **jms_durable(name)) as sub:
        wait_for(lambda: sub.attached.is_set() or sub.error is not None, 30, "attach answer")
        return sub.error


def test_a_silent_connection_is_dropped_and_its_durable_subscription_is_free_again(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    data = tmp_path_factory.mktemp("idle")
    create_topic(str(data), "idle-topic")
    server = ServeProcess(data, command="frontend", env={"SHAREDSUB_SERVER_IDLE_TIMEOUT": "2"}).start()
    container_id, name = uid("silent"), uid("dur")
    client = subprocess.Popen(
        [sys.executable, "-c", _CLIENT, server.url, "idle-topic", container_id, name],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert client.stdout is not None
        line = client.stdout.readline().split()
        assert line[:1] == ["attached"], line
        assert float(line[1]) > 0  # the server's open advertised an idle-time-out
        # While the client lives, its unshared durable subscription has its one consumer.
        refusal = _attach_once(server.url, container_id, name)
        assert refusal is not None and refusal[0] == "amqp:resource-locked", refusal
        os.kill(client.pid, signal.SIGSTOP)  # half-open: the socket stays, nothing is sent
        deadline = time.monotonic() + 30
        while (refusal := _attach_once(server.url, container_id, name)) is not None:
            assert refusal[0] == "amqp:resource-locked", refusal
            assert time.monotonic() < deadline, "the silent connection was never dropped"
            time.sleep(0.5)
    finally:
        os.kill(client.pid, signal.SIGKILL)
        client.wait(30)
        assert server.stop() == 0
