"""Apache ActiveMQ Artemis (binary distribution) as the benchmark's second peer broker.

Artemis implements JMS 2.0 shared durable subscriptions over AMQP 1.0 and JMS selectors on
them, which RabbitMQ's AMQP 1.0 plugin cannot, so it is the peer for the consume and fan-out
measurements as well as for publish and latency.

Distribution: ``org.apache.activemq:apache-artemis:<version>:tar.gz:bin`` from Maven Central,
fetched once with ``mvn dependency:copy`` (the ordinary Maven client) and unpacked under the
cache dir (``$SHAREDSUB_BENCH_CACHE``, default ``~/.cache/sharedsub-bench``; nothing of it is
committed). Each :class:`ArtemisPeer` creates a fresh broker instance in a temporary folder with
``artemis create`` and runs it with ``artemis run``; ``artemis stop`` (then SIGTERM, then SIGKILL
of its process group) ends it, and the folder is deleted unless kept.

Instance settings (``artemis create`` defaults unless said here):

* anonymous connections allowed (mapped to the created user and its role, which may also
  ``manage``); no web console; no core/STOMP/MQTT/HornetQ acceptors: a single AMQP acceptor on
  a free loopback port (the acceptor parameters ``artemis create`` writes for AMQP);
* persistence on, **NIO journal** chosen explicitly (ASYNCIO needs libaio, which is not
  installed here; naming it keeps runs on machines with libaio comparable), ``journal-datasync``
  true (each journal sync is an fdatasync) and the default synchronous durable sends: a durable
  message is accepted only after the journal write holding it was synced. Several sends share
  one sync within ``journal-buffer-timeout``, which ``artemis create`` auto-tunes from a disk
  sync test (recorded in :attr:`ArtemisPeer.version`). This matches RabbitMQ's durable classic
  queue (publisher confirm after the write) and sharedsub's fsync'd group commits;
* JVM: the profile's defaults (G1, ``-Xms512M -Xmx2G``), JDK from ``$JAVA_HOME`` or the PATH.

Addresses: every route is a multicast address ``bench.<label>`` with one JMS 2.0 global shared
durable subscription on it, made as Qpid JMS makes it (link ``<label>|global``, source
capabilities topic/shared/global, durable unsettled-state, expiry never; attach, then detach
without closing), so Artemis names its queue ``<label>:global``. Publishers send durable
messages to the address, so every message is journalled into that durable queue, which keeps
its backlog when nobody consumes (as the RabbitMQ publish runs, whose durable queue has no
consumer). Plain subscribers (latency, priming) consume that queue by its fully qualified name
``bench.<label>::<label>:global``; the consume measurement joins the shared subscription with
the JMS link name and source, as against sharedsub. A plain receiver on the address itself
would get a non-durable subscription queue, into which Artemis does not journal durable
messages at all. Queue depth and deletion go through Artemis's management address over AMQP
(``activemq.management``, request/reply with a dynamic reply queue).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from typing import Any

import procstat
import workloads
from rabbitmq_peer import PeerError, Route

ARTEMIS_VERSION = "2.40.0"  # newest bin tar.gz Maven Central serves here (2.33+ needs Java 17)
USER = PASSWORD = "bench"
MANAGEMENT_ADDRESS = "activemq.management"
READY_LOG = "AMQ221007"  # "Server is now active"


def cache_dir() -> str:
    """Return the folder the distribution is downloaded to and unpacked in (not committed)."""
    return os.environ.get("SHAREDSUB_BENCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                   "sharedsub-bench")


def ensure_distribution(log: Callable[[str], None], version: str = ARTEMIS_VERSION,
                        cache: str | None = None) -> str:
    """Return ARTEMIS_HOME of ``version``, downloading (Maven) and unpacking it on first use."""
    cache = cache or cache_dir()
    home = os.path.join(cache, f"apache-artemis-{version}")
    if os.path.isfile(os.path.join(home, "bin", "artemis")):
        return home
    os.makedirs(cache, exist_ok=True)
    tgz = os.path.join(cache, f"apache-artemis-{version}-bin.tar.gz")
    if not os.path.isfile(tgz):
        mvn = shutil.which("mvn")
        if mvn is None:
            msg = "mvn (Apache Maven) is needed to download Artemis: apt-get install maven"
            raise PeerError(msg)
        artifact = f"org.apache.activemq:apache-artemis:{version}:tar.gz:bin"
        log(f"downloading {artifact} with mvn into {cache}")
        proc = subprocess.run(
            [mvn, "-B", "-q", "dependency:copy", f"-Dartifact={artifact}", f"-DoutputDirectory={cache}"],
            capture_output=True, text=True, timeout=900, cwd=cache,
        )
        if proc.returncode != 0 or not os.path.isfile(tgz):
            msg = f"mvn dependency:copy {artifact} failed (rc {proc.returncode}): {(proc.stdout + proc.stderr)[-2000:]}"
            raise PeerError(msg)
    staging = tempfile.mkdtemp(prefix=".unpack-", dir=cache)
    try:
        with tarfile.open(tgz) as tar:
            tar.extractall(staging, filter="data")
        unpacked = os.path.join(staging, f"apache-artemis-{version}")
        if not os.path.isfile(os.path.join(unpacked, "bin", "artemis")):
            msg = f"{tgz} has no apache-artemis-{version}/bin/artemis"
            raise PeerError(msg)
        os.chmod(os.path.join(unpacked, "bin", "artemis"), 0o755)
        os.replace(unpacked, home)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return home


def topic_address(label: str) -> str:
    """The multicast address of measurement ``label`` (``bench.<label>``)."""
    return f"bench.{label}"


def free_port() -> int:
    """Return a loopback TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def amqp_acceptor(port: int) -> str:
    """The ``<acceptors>`` element of the instance: AMQP only, on 127.0.0.1:``port``, with the
    parameters ``artemis create`` gives its own AMQP acceptor."""
    params = ("tcpSendBufferSize=1048576;tcpReceiveBufferSize=1048576;protocols=AMQP;useEpoll=true;"
              "amqpCredits=1000;amqpLowCredits=300;amqpMinLargeMessageSize=102400;amqpDuplicateDetection=true")
    return f'<acceptors>\n         <acceptor name="amqp">tcp://127.0.0.1:{port}?{params}</acceptor>\n      </acceptors>'


def configure_broker_xml(text: str, port: int) -> str:
    """Return ``broker.xml`` with its acceptors replaced by :func:`amqp_acceptor`."""
    new, n = re.subn(r"<acceptors>.*?</acceptors>", lambda _m: amqp_acceptor(port), text, count=1, flags=re.S)
    if n != 1:
        msg = "broker.xml has no <acceptors> element"
        raise PeerError(msg)
    return new


def journal_settings(text: str) -> dict[str, str]:
    """Return the journal elements of ``broker.xml`` that decide durability and sync batching."""
    out = {}
    for key in ("persistence-enabled", "journal-type", "journal-datasync", "journal-buffer-timeout",
                "journal-sync-transactional", "journal-sync-non-transactional"):
        m = re.search(rf"^\s*<{key}>([^<]*)</{key}>", text, flags=re.M)
        out[key] = m.group(1).strip() if m else "default"
    return out


class Management:
    """Artemis management over AMQP: one request/reply exchange per call, on its own connection
    (a connection kept idle through a long measurement would miss the broker's idle timeout)."""

    def __init__(self, url: str, timeout_s: float = 20.0) -> None:
        self.url, self.timeout_s = url, timeout_s

    def _request(self, properties: dict[str, Any], body: str) -> Any:
        from proton import Message
        from proton.utils import BlockingConnection

        conn = BlockingConnection(self.url, timeout=self.timeout_s)
        try:
            rcv = conn.create_receiver(None, dynamic=True, credit=1)
            snd = conn.create_sender(MANAGEMENT_ADDRESS)
            snd.send(Message(reply_to=rcv.remote_source.address, body=body, properties=properties))
            reply = rcv.receive(timeout=self.timeout_s)
            rcv.accept()
        finally:
            conn.close()
        if not (reply.properties or {}).get("_AMQ_OperationSucceeded"):
            msg = f"Artemis management {properties} failed: {reply.body!r}"
            raise PeerError(msg)
        if reply.body is None:
            return None
        value = json.loads(reply.body)
        return value[0] if isinstance(value, list) and len(value) == 1 else value

    def attribute(self, resource: str, name: str) -> Any:
        """Read attribute ``name`` of ``resource`` (``broker``, ``queue.<q>``, ``address.<a>``)."""
        return self._request({"_AMQ_ResourceName": resource, "_AMQ_Attribute": name}, "[]")

    def call(self, resource: str, operation: str, *params: Any) -> Any:
        """Invoke ``operation`` of ``resource`` with ``params``."""
        return self._request({"_AMQ_ResourceName": resource, "_AMQ_OperationName": operation},
                             json.dumps(list(params)))


class ArtemisPeer(procstat.BrokerMetrics):
    """One Artemis broker instance: create, start, make and delete subscriptions, read its CPU
    time, stop. Use as a context manager; ``stop`` runs on exit whatever happened, Ctrl-C included.
    """

    name = "artemis"

    def __init__(self, *, log: Callable[[str], None], keep_state: bool = False,
                 version: str = ARTEMIS_VERSION, log_path: str | None = None) -> None:
        self._log = log
        self._keep_state = keep_state
        self._dist_version = version
        self.base = tempfile.mkdtemp(prefix="sharedsub-bench-artemis-")
        self.instance = os.path.join(self.base, "broker")
        self._console_path = log_path or os.path.join(self.base, "console.log")
        self.port = 0
        self.url = ""
        self.version = ""
        self.journal: dict[str, str] = {}
        self.created: dict[str, dict[str, Any]] = {}  # subscription create results, by label
        self._proc: subprocess.Popen[bytes] | None = None
        self._mgmt: Management | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def _create_instance(self, home: str) -> None:
        cmd = [
            os.path.join(home, "bin", "artemis"), "create", self.instance,
            "--user", USER, "--password", PASSWORD, "--allow-anonymous", "--silent",
            "--no-web", "--host", "127.0.0.1", "--nio",
            "--no-hornetq-acceptor", "--no-mqtt-acceptor", "--no-stomp-acceptor",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            msg = f"artemis create failed (rc {proc.returncode}): {(proc.stdout + proc.stderr)[-2000:]}"
            raise PeerError(msg)
        path = os.path.join(self.instance, "etc", "broker.xml")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        self.port = free_port()
        text = configure_broker_xml(text, self.port)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        self.journal = journal_settings(text)

    def start(self) -> float:
        """Create the instance, start it, wait until it accepts AMQP; return seconds from
        ``artemis run`` to ready (the download and ``artemis create`` are not counted)."""
        home = ensure_distribution(self._log, self._dist_version)
        self._create_instance(home)
        self.url = f"amqp://127.0.0.1:{self.port}"
        t0 = time.perf_counter()
        console = open(self._console_path, "wb")  # noqa: SIM115 - kept open for the child
        self._proc = subprocess.Popen(
            [os.path.join(self.instance, "bin", "artemis"), "run"],
            stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT, start_new_session=True,
        )
        console.close()
        deadline = time.monotonic() + 180
        while True:
            if self._proc.poll() is not None:
                msg = f"artemis run exited with rc {self._proc.returncode} before ready ({self._tail()})"
                raise PeerError(msg)
            if self._logged(READY_LOG) and _port_open(self.port):
                break
            if time.monotonic() > deadline:
                msg = f"Artemis not ready on port {self.port} within 180 s ({self._tail()})"
                raise PeerError(msg)
            time.sleep(0.2)
        elapsed = time.perf_counter() - t0
        self._mgmt = Management(self.url)
        v = self._mgmt.attribute("broker", "version")
        j = self.journal
        self.version = (f"{v} ({j['journal-type']} journal, journal-datasync {j['journal-datasync']}, "
                        f"journal-buffer-timeout {j['journal-buffer-timeout']} ns as auto-tuned by artemis create)")
        return elapsed

    def _logged(self, marker: str) -> bool:
        try:
            with open(self._console_path, encoding="utf-8", errors="replace") as f:
                return marker in f.read()
        except OSError:
            return False

    def _tail(self) -> str:
        try:
            with open(self._console_path, encoding="utf-8", errors="replace") as f:
                return f"console tail: {f.read()[-1500:]!r}"
        except OSError:
            return "no console log"

    def stop(self) -> None:
        """``artemis stop``; if the JVM is still there after 60 s, SIGTERM, then SIGKILL its
        process group. Then delete the instance unless kept."""
        self._mgmt = None
        if self._proc is not None:
            if self._proc.poll() is None:
                try:
                    subprocess.run([os.path.join(self.instance, "bin", "artemis"), "stop"],
                                   capture_output=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
                except (subprocess.TimeoutExpired, OSError) as exc:
                    self._log(f"artemis stop: {exc}")
                try:
                    self._proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    self._log(f"Artemis (pid {self._proc.pid}) still running after artemis stop: SIGTERM")
                    self._proc.send_signal(signal.SIGTERM)
                    try:
                        self._proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        pass
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if self._proc.poll() is None:
                self._proc.wait(timeout=10)
            self._proc = None
        if not self._keep_state:
            shutil.rmtree(self.base, ignore_errors=True)
        else:
            self._log(f"Artemis instance kept in {self.base}")

    def __enter__(self) -> ArtemisPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- measurement hooks ---------------------------------------------------------------------

    def broker_pid(self) -> int | None:
        """Return the broker JVM's pid (``artemis run`` execs java), or None."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def _management(self) -> Management:
        if self._mgmt is None:
            msg = "Artemis is not running"
            raise PeerError(msg)
        return self._mgmt

    def route(self, label: str, *, subscribe: bool) -> Route:
        """Create the global shared durable subscription ``label`` on multicast address
        ``bench.<label>`` and return where to publish and (plain receivers) consume.

        ``Route.link_name`` is the JMS link name a consumer joins the subscription with.
        """
        address = topic_address(label)
        link_name = workloads.shared_durable_link_name(label)
        self.created[label] = workloads.create_subscription(self.url, address, link_name,
                                                            workloads.shared_durable_source)
        queues = self._management().attribute(f"address.{address}", "queueNames")
        if not isinstance(queues, list) or len(queues) != 1:
            msg = f"expected one subscription queue on {address}, found {queues!r}"
            raise PeerError(msg)
        queue = str(queues[0])
        return Route(
            publish_address=address,
            subscribe_address=f"{address}::{queue}" if subscribe else None,
            queue=queue,
            link_name=link_name,
        )

    def subscription_queues(self, address: str) -> int:
        """Return how many queues (subscriptions) multicast address ``address`` has."""
        queues = self._management().attribute(f"address.{address}", "queueNames")
        return len(queues) if isinstance(queues, list) else 0

    def ready_messages(self, route: Route) -> int:
        """Return the messages in ``route``'s subscription queue (Artemis's ``messageCount``:
        unlike RabbitMQ's ready count it includes delivered, unacknowledged ones)."""
        return int(self._management().attribute(f"queue.{route.queue}", "messageCount"))

    def release(self, route: Route) -> None:
        """Delete the subscription queue (closing its consumers) and its address."""
        if route.queue:
            self._management().call("broker", "destroyQueue", route.queue, True, True)
