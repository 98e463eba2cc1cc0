"""RabbitMQ 3.10 (Debian package) with its AMQP 1.0 plugin, run as the benchmark's peer broker.

Follows docs/benchmark-peers.md: the package's own scripts from /usr/lib/rabbitmq/bin
run as root (the sbin wrappers `su` to user rabbitmq), all state lives in a temporary folder,
everything listens on loopback (AMQP 0-9-1 and 1.0 on 127.0.0.1:5682, distribution on 25682,
epmd on 4369). Queues are durable classic queues declared over AMQP 0-9-1 with pika and bound
to amq.topic, because the 1.0 plugin cannot bind a named queue itself; the AMQP 1.0 clients
publish to ``/exchange/amq.topic/<key>`` and consume from ``/amq/queue/<q>``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import procstat

RMQ_BIN = "/usr/lib/rabbitmq/bin"
PORT = 5682
DIST_PORT = 25682
NODE = "sharedsubbench@localhost"


class PeerError(RuntimeError):
    """The peer broker could not be installed, started or driven."""


def _port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def ensure_installed(log: Callable[[str], None]) -> None:
    """Install Debian's rabbitmq-server with apt-get when its scripts are missing."""
    if os.path.exists(os.path.join(RMQ_BIN, "rabbitmq-server")):
        return
    log("rabbitmq-server not installed: running apt-get update + apt-get install -y rabbitmq-server")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "rabbitmq-server"]):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            msg = f"{' '.join(cmd)} failed (rc {proc.returncode}): {proc.stderr[-2000:]}"
            raise PeerError(msg)
    if not os.path.exists(os.path.join(RMQ_BIN, "rabbitmq-server")):
        msg = f"apt-get installed rabbitmq-server but {RMQ_BIN}/rabbitmq-server is missing"
        raise PeerError(msg)


@dataclass(frozen=True, slots=True)
class Route:
    """Where a workload publishes and, if it subscribes, where it consumes."""

    publish_address: str
    subscribe_address: str | None
    queue: str | None = None
    # The JMS link name a consumer joins the route's shared durable subscription with (Artemis).
    link_name: str | None = None


class RabbitMQPeer(procstat.BrokerMetrics):
    """One RabbitMQ node: start, declare/delete queues, read its CPU time, stop.

    Use as a context manager; ``stop`` runs on exit whatever happened, Ctrl-C included.
    """

    name = "rabbitmq"

    def __init__(self, *, log: Callable[[str], None], keep_state: bool = False) -> None:
        self._log = log
        self._keep_state = keep_state
        self.base = tempfile.mkdtemp(prefix="sharedsub-bench-rabbitmq-")
        self.url = f"amqp://127.0.0.1:{PORT}"
        self._proc: subprocess.Popen[bytes] | None = None
        self._pika = None
        self._channel = None
        self.version = ""

    # -- lifecycle -----------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        b = self.base
        dist_args = "-kernel inet_dist_use_interface {127,0,0,1}"
        return dict(
            os.environ,
            HOME=b,
            RABBITMQ_NODENAME=NODE,
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
            RABBITMQ_NODE_PORT=str(PORT),
            RABBITMQ_DIST_PORT=str(DIST_PORT),
            RABBITMQ_CONFIG_FILE=f"{b}/etc/rabbitmq.conf",
            RABBITMQ_CONF_ENV_FILE=f"{b}/etc/rabbitmq-env.conf",
            RABBITMQ_ENABLED_PLUGINS_FILE=f"{b}/etc/enabled_plugins",
            RABBITMQ_MNESIA_BASE=f"{b}/mnesia",
            RABBITMQ_LOG_BASE=f"{b}/log",
            RABBITMQ_PID_FILE=f"{b}/rabbitmq.pid",
            ERL_EPMD_ADDRESS="127.0.0.1",
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=dist_args,
            RABBITMQ_CTL_ERL_ARGS=dist_args,
        )

    def _ctl(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [f"{RMQ_BIN}/rabbitmqctl", "-n", NODE, *args],
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start(self) -> float:
        """Start the node and wait until it accepts AMQP; return the start-up time in seconds."""
        ensure_installed(self._log)
        if _port_in_use(PORT):
            msg = f"port {PORT} is already in use: another RabbitMQ (or a leftover) is running"
            raise PeerError(msg)
        b = self.base
        for sub in ("etc", "mnesia", "log"):
            os.makedirs(f"{b}/{sub}", exist_ok=True)
        with open(f"{b}/etc/rabbitmq.conf", "w", encoding="ascii") as f:
            f.write(f"listeners.tcp.1 = 127.0.0.1:{PORT}\namqp1_0.default_user = guest\n")
        with open(f"{b}/etc/rabbitmq-env.conf", "w", encoding="ascii") as f:
            f.write("")
        with open(f"{b}/etc/enabled_plugins", "w", encoding="ascii") as f:
            f.write("[rabbitmq_amqp1_0].\n")
        t0 = time.perf_counter()
        console = open(f"{b}/log/console.log", "wb")  # noqa: SIM115 - kept open for the child
        self._proc = subprocess.Popen(
            [f"{RMQ_BIN}/rabbitmq-server"],
            env=self._env(),
            stdin=subprocess.DEVNULL,
            stdout=console,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        console.close()
        wait = self._ctl("wait", "--timeout", "120", f"{b}/rabbitmq.pid", timeout=150)
        if wait.returncode != 0:
            msg = f"rabbitmqctl wait failed (rc {wait.returncode}): {wait.stdout[-1000:]} {wait.stderr[-1000:]}"
            raise PeerError(msg)
        deadline = time.monotonic() + 30
        while not _port_in_use(PORT):
            if time.monotonic() > deadline:
                msg = f"RabbitMQ started but port {PORT} does not accept connections"
                raise PeerError(msg)
            time.sleep(0.1)
        elapsed = time.perf_counter() - t0
        status = self._ctl("version", timeout=30)
        self.version = status.stdout.strip() if status.returncode == 0 else ""
        self._connect_admin()
        return elapsed

    def stop(self) -> None:
        """Stop the node (and the epmd it started), then delete its state unless kept."""
        if self._pika is not None:
            try:
                self._pika.close()
            except Exception:  # noqa: BLE001 - best effort on the way out
                pass
            self._pika = self._channel = None
        if self._proc is not None:
            if self._proc.poll() is None:
                try:
                    self._ctl("stop", f"{self.base}/rabbitmq.pid", timeout=60)
                except subprocess.TimeoutExpired:
                    self._log("rabbitmqctl stop timed out")
                try:
                    self._proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self._log(f"RabbitMQ (pid {self._proc.pid}) still running: killing its process group")
                    os.killpg(self._proc.pid, signal.SIGKILL)
                    self._proc.wait(timeout=10)
            self._proc = None
            # The node started epmd; it refuses to exit while other nodes are registered.
            subprocess.run(["epmd", "-kill"], capture_output=True, timeout=10, check=False)
        if not self._keep_state:
            shutil.rmtree(self.base, ignore_errors=True)
        else:
            self._log(f"RabbitMQ state kept in {self.base}")

    def __enter__(self) -> RabbitMQPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- measurement hooks ---------------------------------------------------------------------

    def broker_pid(self) -> int | None:
        """Return the Erlang VM's pid (from the pid file), or None."""
        try:
            with open(f"{self.base}/rabbitmq.pid", encoding="ascii") as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return self._proc.pid if self._proc else None

    def _connect_admin(self) -> None:
        try:
            import pika  # only the RabbitMQ side needs AMQP 0-9-1, to declare and bind queues
        except ModuleNotFoundError as exc:
            msg = "pika is needed to declare RabbitMQ queues: .venv/bin/pip install pika"
            raise PeerError(msg) from exc

        params = pika.ConnectionParameters(
            host="127.0.0.1",
            port=PORT,
            credentials=pika.PlainCredentials("guest", "guest"),
            heartbeat=0,
            blocked_connection_timeout=30,
            socket_timeout=10,
        )
        self._pika = pika.BlockingConnection(params)
        self._channel = self._pika.channel()

    def route(self, label: str, *, subscribe: bool) -> Route:
        """Declare a durable classic queue bound to amq.topic with key ``label``.

        The publish figures use the queue with no consumer (its backlog grows), as the
        reference runs did; the latency figures consume it.
        """
        queue = f"bench.{label}"
        self._channel.queue_declare(queue=queue, durable=True, arguments={"x-queue-type": "classic"})
        self._channel.queue_bind(queue=queue, exchange="amq.topic", routing_key=queue)
        return Route(
            publish_address=f"/exchange/amq.topic/{queue}",
            subscribe_address=f"/amq/queue/{queue}" if subscribe else None,
            queue=queue,
        )

    def ready_messages(self, route: Route) -> int:
        """Return how many messages wait in ``route``'s queue, ready for delivery (not the
        ones delivered and still unacknowledged)."""
        ok = self._channel.queue_declare(queue=route.queue, passive=True)
        return int(ok.method.message_count)

    def release(self, route: Route) -> None:
        """Delete the queue behind ``route`` so runs do not pile up backlog."""
        if route.queue:
            self._channel.queue_delete(queue=route.queue)
