"""The floor of a python-qpid-proton broker: an in-memory queue broker with no work per message.

sharedsub's front end is python-qpid-proton's engine on an event loop of its own (one Python
thread: connectors/amqp/wire/engine_loop.py). This broker is the least any broker on that loop can do
per message, run the same way (a plain handler on an ``EngineLoop`` with a ``Listener``, like
connectors/amqp/server.py; ``--container`` runs it on proton's own ``Container`` reactor
instead, as sharedsub's front end ran before issue 13): a published transfer's bytes are read,
queued in memory and accepted at once (no decode, no storage, no fsync); a consumer link is sent
the queued bytes as its credit allows, round-robin over an address's links, and an accepted
delivery is dropped. Released, modified and unsettled-at-detach deliveries go back to the queue.

bench/run.py measures it beside the real brokers (``--brokers proton-floor``) with the same
client, so a run shows how much of sharedsub's cost per message is the reactor's own: what is
left for sharedsub's work, and which targets no design on this reactor can reach on the machine.

Run as a script it is the broker (``--port``, ``--status``: a JSON file of ready messages per
address, rewritten at most 4 times a second when it changed); :class:`ProtonFloorPeer` starts and
stops it for bench/run.py.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import procstat
from artemis_peer import free_port
from rabbitmq_peer import PeerError, Route

READY_PREFIX = "proton-floor ready "
STATUS_EVERY_S = 0.25
PUBLISH_CREDIT = 1000  # credit kept open on each publisher link


# ---------------------------------------------------------------------------------------- broker


def _broker_handler(status_path: str) -> Any:
    """Return the Handler of the floor broker (proton is imported only where the broker runs)."""
    from proton import Delivery, Endpoint, Handler

    class FloorHandler(Handler):
        def __init__(self) -> None:
            super().__init__()
            self.queues: dict[str, collections.deque[bytes]] = collections.defaultdict(collections.deque)
            self.consumers: dict[str, list[Any]] = collections.defaultdict(list)
            self.turn: dict[str, int] = collections.defaultdict(int)
            self.unsettled: dict[Any, dict[str, bytes]] = {}  # consumer link -> tag -> message
            self.address_of: dict[Any, str] = {}
            self.next_tag = 0
            self.written: dict[str, int] | None = None

        # -- endpoints: open whatever the peer opens

        def on_reactor_init(self, event: Any) -> None:
            event.container.schedule(STATUS_EVERY_S, self)

        def on_timer_task(self, event: Any) -> None:
            counts = {a: len(q) for a, q in self.queues.items()}
            if counts != self.written:
                tmp = status_path + ".tmp"
                with open(tmp, "w", encoding="utf-8") as fh:
                    json.dump(counts, fh)
                os.replace(tmp, status_path)
                self.written = counts
            event.container.schedule(STATUS_EVERY_S, self)

        def on_connection_remote_open(self, event: Any) -> None:
            if event.connection.state & Endpoint.LOCAL_UNINIT:
                event.connection.open()

        def on_session_remote_open(self, event: Any) -> None:
            if event.session.state & Endpoint.LOCAL_UNINIT:
                event.session.open()

        def on_link_remote_open(self, event: Any) -> None:
            link = event.link
            if not link.state & Endpoint.LOCAL_UNINIT:
                return
            if link.is_receiver:
                link.target.address = link.remote_target.address
                link.source.address = link.remote_source.address
                link.open()
                link.flow(PUBLISH_CREDIT)
                return
            address = link.remote_source.address or ""
            link.source.address = address
            link.target.address = link.remote_target.address
            link.open()
            self.address_of[link] = address
            self.unsettled[link] = {}
            self.consumers[address].append(link)

        def _gone(self, link: Any) -> None:
            address = self.address_of.pop(link, None)
            if address is None:
                return
            self.consumers[address].remove(link)
            back = self.unsettled.pop(link, {})
            self.queues[address].extendleft(reversed(list(back.values())))
            self.dispatch(address)

        def on_link_remote_close(self, event: Any) -> None:
            self._gone(event.link)
            event.link.close()

        def on_link_remote_detach(self, event: Any) -> None:
            self._gone(event.link)
            event.link.detach()

        def on_connection_remote_close(self, event: Any) -> None:
            self._drop_connection(event.connection)
            event.connection.close()

        def on_transport_closed(self, event: Any) -> None:
            if event.connection is not None:
                self._drop_connection(event.connection)

        def _drop_connection(self, conn: Any) -> None:
            for link in [lk for lk in self.address_of if lk.connection == conn]:
                self._gone(link)

        # -- messages

        def on_delivery(self, event: Any) -> None:
            link = event.link
            if link.is_receiver:
                q = self.queues[link.target.address or ""]
                taken = 0
                current = link.current
                while current is not None and current.readable and not current.partial:
                    q.append(link.recv(current.pending))
                    link.advance()
                    current.update(Delivery.ACCEPTED)
                    current.settle()
                    taken += 1
                    current = link.current
                if taken:
                    link.flow(taken)
                    self.dispatch(link.target.address or "")
                return
            dlv = event.delivery
            if not (dlv.remote_state or dlv.settled):
                return
            held = self.unsettled.get(link)
            message = held.pop(dlv.tag, None) if held is not None else None
            if message is not None and dlv.remote_state in (Delivery.RELEASED, Delivery.MODIFIED):
                address = self.address_of[link]
                self.queues[address].appendleft(message)
                self.dispatch(address)
            dlv.settle()

        def on_link_flow(self, event: Any) -> None:
            link = event.link
            if link.is_sender and link in self.address_of:
                self.dispatch(self.address_of[link])
                if link.drain_mode and link.credit > 0:
                    link.drained()

        def dispatch(self, address: str) -> None:
            """Share queued messages round-robin over the address's links that have credit, then
            send each link's share in one run: proton queues a transport event per switch from
            one connection to another, so sending in round-robin order would cost one output
            pass per message with several consumers (connectors/amqp/dispatcher.py's Dispatcher does the same)."""
            q = self.queues[address]
            links = self.consumers.get(address)
            if not q or not links:
                return
            n = len(links)
            credit = [link.credit for link in links]
            share: list[list[bytes]] = [[] for _ in links]
            idle = 0
            i = self.turn[address]
            while q and idle < n:
                k = i % n
                i += 1
                if credit[k] <= 0:
                    idle += 1
                    continue
                idle = 0
                credit[k] -= 1
                share[k].append(q.popleft())
            self.turn[address] = i % n
            for link, messages in zip(links, share, strict=True):
                held = self.unsettled[link]
                for message in messages:
                    self.next_tag += 1
                    tag = str(self.next_tag)  # proton 0.40 hands tags back decoded as UTF-8
                    link.delivery(tag)
                    link.send(message)
                    link.advance()
                    held[tag] = message

    return FloorHandler()


def serve(port: int, status_path: str, *, container: bool = False) -> None:
    """Listen on 127.0.0.1:``port`` until SIGTERM/SIGINT; print the ready line first.
    ``container``: on proton's Container reactor instead of sharedsub's engine loop."""
    if container:
        from proton.reactor import Container

        reactor = Container(_broker_handler(status_path))
        reactor.listen(f"127.0.0.1:{port}")

        def stop(signum: int, frame: object) -> None:
            reactor.stop()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        print(f"{READY_PREFIX}amqp://127.0.0.1:{port}", flush=True)
        reactor.run()
        return

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from connectors.amqp.wire.engine_loop import EngineLoop
    from connectors.amqp.wire.listener import Listener
    from sharedsub.core.security.authenticated import Identities

    handler = _broker_handler(status_path)
    loop = EngineLoop(handler)
    Listener(loop, "127.0.0.1", port, identities=Identities())
    loop.schedule(STATUS_EVERY_S, handler)  # its on_timer_task writes the status and reschedules

    def stop_loop(signum: int, frame: object) -> None:
        loop.injector.call(loop.stop)  # wakes the loop

    signal.signal(signal.SIGTERM, stop_loop)
    signal.signal(signal.SIGINT, stop_loop)
    print(f"{READY_PREFIX}amqp://127.0.0.1:{port}", flush=True)
    loop.run()


# ------------------------------------------------------------------------------------ the peer


class ProtonFloorPeer(procstat.BrokerMetrics):
    """The floor broker as bench/run.py's peer: start, route, ready counts, CPU, stop."""

    name = "proton-floor"

    def __init__(self, *, log: Callable[[str], None], log_path: str) -> None:
        self._log = log
        self._log_path = log_path
        self._dir = tempfile.mkdtemp(prefix="sharedsub-bench-floor-")
        self._status = os.path.join(self._dir, "status.json")
        self._proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.version = ""

    def start(self) -> float:
        """Start the broker on a free port and wait for its ready line; return the seconds taken."""
        import proton

        self.version = f"python-qpid-proton {'.'.join(map(str, proton.VERSION))} on sharedsub's engine loop, in memory"
        t0 = time.perf_counter()
        err = open(self._log_path, "w", encoding="utf-8")  # noqa: SIM115 - kept open for the child
        self._proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--port", str(free_port()), "--status", self._status],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True,
        )
        err.close()
        lines: queue.Queue[str | None] = queue.Queue()

        def read() -> None:  # drains stdout for the life of the process
            assert self._proc is not None and self._proc.stdout is not None
            for line in self._proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        try:
            line = lines.get(timeout=30)
        except queue.Empty:
            line = None
        if not line or not line.startswith(READY_PREFIX):
            msg = f"proton floor broker did not start (see {self._log_path})"
            raise PeerError(msg)
        self.url = line[len(READY_PREFIX):].strip()
        return time.perf_counter() - t0

    def stop(self) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after 10 s)."""
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=10)
        self._proc = None

    def __enter__(self) -> ProtonFloorPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)

    def broker_pid(self) -> int | None:
        """Return the broker's pid."""
        return self._proc.pid if self._proc else None

    def route(self, label: str, *, subscribe: bool) -> Route:
        """One in-memory queue per label: published to and consumed from at the same address."""
        address = f"floor.{label}"
        return Route(publish_address=address, subscribe_address=address if subscribe else None, queue=address)

    def ready_messages(self, route: Route) -> int:
        """Messages queued at ``route`` and not delivered, as of the broker's last status write."""
        time.sleep(STATUS_EVERY_S * 2)  # let a write after the caller's last action land
        try:
            with open(self._status, encoding="utf-8") as fh:
                counts = json.load(fh)
        except FileNotFoundError:
            return 0
        return int(counts.get(route.queue, 0))

    def release(self, route: Route) -> None:
        """Nothing to clean: each run has its own address."""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--status", required=True, help="JSON file of ready messages per address")
    p.add_argument("--container", action="store_true", help="run on proton's Container reactor instead of the engine loop")
    args = p.parse_args(argv)
    serve(args.port, args.status, container=args.container)
    return 0


if __name__ == "__main__":
    sys.exit(main())
