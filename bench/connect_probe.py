"""Connection set-up time: TCP connect, TLS handshake (amqps), SASL exchange and the AMQP open.

One connection at a time on a blocking socket, in this process: TLS with Python's ``ssl``
(trusting the given CA), SASL frames with the project's codec (sharedsub.core.security.sasl_frames) and, for
SCRAM, its client side (sharedsub.core.security.scram.ScramClient, which also checks the server's signature),
then the AMQP header and open written by a proton client ``Transport`` without a SASL layer.
The time runs from ``connect()`` to the server's open frame; the connection is then closed
politely (close frame, TLS close_notify).

python-qpid-proton's client has no SCRAM (no Cyrus SASL in the wheel) and rhea none either, so
this raw client is the one place the bench can time a SCRAM-SHA-256 connect.
"""

from __future__ import annotations

import dataclasses
import socket
import ssl
import time

from proton import Connection, Endpoint, Transport

from sharedsub.core.security import sasl_frames as sf
from sharedsub.core.security.scram import ScramClient


class ConnectFailed(RuntimeError):
    """The server refused or broke the exchange."""


@dataclasses.dataclass(frozen=True)
class Target:
    """Where and how to connect."""

    host: str
    port: int
    mechanism: str  # ANONYMOUS, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    user: str = ""
    password: str = ""
    tls: ssl.SSLContext | None = None  # None: plain amqp
    server_hostname: str = "localhost"  # the name the server certificate is checked against


class _SaslReader:
    """Reads the server's SASL header and frames off a blocking socket."""

    def __init__(self, sock: socket.socket | ssl.SSLSocket) -> None:
        self.sock = sock
        self.buf = b""
        self.header_seen = False

    def _more(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectFailed("the server closed the connection during SASL")
        self.buf += chunk

    def frame(self) -> sf.Frame:
        """The next SASL frame (after the header, which must be the SASL one)."""
        if not self.header_seen:
            while len(self.buf) < 8:
                self._more()
            if self.buf[:8] != sf.SASL_HEADER:
                raise ConnectFailed(f"not a SASL header: {self.buf[:8]!r}")
            self.buf, self.header_seen = self.buf[8:], True
        while True:
            frame, used = sf.decode(self.buf)
            if frame is not None:
                self.buf = self.buf[used:]
                return frame
            self._more()


def _sasl(reader: _SaslReader, target: Target) -> None:
    """Run the SASL exchange to a successful outcome (ConnectFailed otherwise)."""
    sock = reader.sock
    sock.sendall(sf.SASL_HEADER)
    offered = sf.mechanism_list(reader.frame())
    if target.mechanism not in offered:
        raise ConnectFailed(f"{target.mechanism} not offered (server offers {offered})")
    scram: ScramClient | None = None
    if target.mechanism == "PLAIN":
        sock.sendall(sf.init("PLAIN", f"\0{target.user}\0{target.password}".encode()))
    elif target.mechanism.startswith("SCRAM-"):
        scram = ScramClient(target.mechanism, target.user, target.password)
        sock.sendall(sf.init(target.mechanism, scram.first()))
        challenge = reader.frame()
        if challenge.code != sf.CHALLENGE:
            raise ConnectFailed(f"expected a challenge, got frame {challenge.code:#x}")
        sock.sendall(sf.response(scram.final(challenge.field(0))))
    else:
        sock.sendall(sf.init(target.mechanism, b""))
    outcome = reader.frame()
    if outcome.code != sf.OUTCOME or outcome.field(0) != sf.OK:
        raise ConnectFailed(f"SASL outcome {outcome.field(0)} for {target.mechanism}")
    if scram is not None and not scram.verify(outcome.field(1) or b""):
        raise ConnectFailed("the server's SCRAM signature does not verify")


def _pump_out(transport: Transport, sock: socket.socket | ssl.SSLSocket) -> None:
    pending = transport.pending()
    if pending > 0:
        sock.sendall(transport.peek(pending))
        transport.pop(pending)


def connect_once(target: Target, timeout_s: float = 10.0) -> float:
    """Connect, authenticate, exchange AMQP opens, close; return the seconds from connect() to
    the server's open."""
    started = time.perf_counter()
    raw = socket.create_connection((target.host, target.port), timeout=timeout_s)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock: socket.socket | ssl.SSLSocket = raw
    try:
        if target.tls is not None:
            sock = target.tls.wrap_socket(raw, server_hostname=target.server_hostname)  # handshakes
        reader = _SaslReader(sock)
        _sasl(reader, target)
        transport, conn = Transport(), Connection()
        conn.container = "bench-connect-probe"
        transport.bind(conn)
        conn.open()
        _pump_out(transport, sock)
        if reader.buf:
            transport.push(reader.buf)  # AMQP bytes that came with the outcome
        while not conn.state & Endpoint.REMOTE_ACTIVE:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectFailed("the server closed the connection before its open")
            transport.push(chunk)
        elapsed = time.perf_counter() - started
        conn.close()
        _pump_out(transport, sock)
        if isinstance(sock, ssl.SSLSocket):
            try:
                sock.unwrap()
            except (OSError, ssl.SSLError):
                pass  # the server may close first
        return elapsed
    finally:
        sock.close()


def client_tls(ca_file: str) -> ssl.SSLContext:
    """A client context that trusts ``ca_file`` and checks the server's name."""
    ctx = ssl.create_default_context(cafile=ca_file)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx
