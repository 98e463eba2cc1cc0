"""What the front end keeps about links and connections goes with them (connectors/amqp/endpoint_state.py).

Against a real ``sharedsub frontend``: while clients are attached, ``sharedsub_endpoint_state_entries``
counts their links and connections; once they leave (closing cleanly, or killed with their
socket dropped mid-session) every table is back to 0.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from proton import Message

from sharedsub.storage.topics import create_topic
from tests.amqp_peer import Subscriber, publish, wait_for
from tests.http_probe import scrape
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]

# A client in its own process: one consumer and one publisher link on one connection, then it
# waits to be killed (its socket then closes without any AMQP close).
CLIENT = textwrap.dedent(
    """
    import sys, time
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    class Client(MessagingHandler):
        def __init__(self):
            super().__init__(prefetch=0)
            self.opened = 0
        def on_start(self, event):
            conn = event.container.connect(sys.argv[1], reconnect=False)
            event.container.create_receiver(conn, sys.argv[2], name="sub|global")
            event.container.create_sender(conn, sys.argv[2])
        def on_link_opened(self, event):
            self.opened += 1
            if self.opened == 2:
                print("attached", flush=True)

    Container(Client()).run()
    """
)


def entries(proc: ServeProcess) -> dict[str, float]:
    return {dict(labels)["table"]: v for (name, labels), v in scrape(proc).items() if name == "sharedsub_endpoint_state_entries"}


def test_link_and_connection_state_goes_with_them(tmp_path: Path) -> None:
    create_topic(str(tmp_path), "t")
    proc = ServeProcess(tmp_path, command="frontend").start()
    killed = subprocess.Popen([sys.executable, "-c", CLIENT, proc.url, "t"], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert killed.stdout is not None and killed.stdout.readline().strip() == "attached"
        with Subscriber(proc.url, "t") as sub:
            sub.wait_attached()
            assert [o.state for o in publish(proc.url, "t", [Message(body="x")])] == ["accepted"]
            held = entries(proc)
            # the subscriber's consumer link and the killed client's two links, on two connections
            assert held["links"] == 3 and held["connections"] == 2, held
        killed.kill()
        killed.wait(30)
        wait_for(lambda: entries(proc) == {"links": 0, "connections": 0, "oversized": 0}, 30, "endpoint state emptied")
    finally:
        if killed.poll() is None:
            killed.kill()
        proc.stop()
