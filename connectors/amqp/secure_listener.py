"""An AMQP listener that does TLS and SASL itself, before proton sees the connection.

    acceptor = SecureAcceptor(container, "127.0.0.1", 5671, policy=SaslPolicy(...),
                              tls=tls_context(settings.security), identities=front_end.identities)

It replaces ``container.listen()`` (connectors/amqp/server.py builds one per listener). Proton's
stock acceptor creates the Transport at accept time and its SASL layer (this wheel has no Cyrus
SASL) can only do ANONYMOUS and EXTERNAL server-side. Here each accepted socket goes through

    socket -> [ssl.SSLObject over MemoryBIO: amqps only] -> sharedsub.core.sasl_rules.SaslExchange
           -> ok: proton Connection + Transport(SERVER) (no proton SASL, no proton SSL) get the
              rest of the byte stream (the client's AMQP header onwards)
           -> failed: the outcome (code 1, auth) is sent, then the socket is closed

so the application handler never sees an unauthenticated connection, and proton's idle timeout,
flow control and close handling work unchanged on what follows. Everything runs on the reactor
thread.

How it plugs into proton 0.40's pure-Python reactor (proton/_handlers.py ``IOHandler``):

* ``IOHandler.on_reactor_quiesced`` selects over every selectable and calls ``readable()``,
  ``writable()``, ``expired()`` on them. :class:`SecureSelectable` overrides those three and does
  its own socket I/O, so it never produces the SELECTABLE_READABLE/WRITABLE events IOHandler
  answers with raw recv/send into the transport.
* Once the transport exists, ``transport._selectable`` is this selectable, so IOHandler's
  ``on_transport`` / ``on_transport_closed`` keep working: ``IOHandler.update(t, s, now)`` sets
  ``s.reading``/``s.writing``/``s.deadline`` (the idle timeout through ``t.tick``). Here
  ``reading``/``writing`` are properties that add our own buffered state (TLS records not sent
  yet, the SASL phase) to what the transport wants.
* ``connection._acceptor`` is set, so ``IOHandler.on_connection_bound`` does not try to connect.

These are proton-internal names (``_selectable``, ``_acceptor``, ``IOHandler.update``,
``IO._setupsocket``); tests/e2e/test_security.py exercises them against a real service.

Limits while a connection is not authenticated yet: ``auth_timeout`` seconds for TLS and SASL
(then it is closed), and at most ``max_authenticating`` such connections (more are closed at
accept). Authenticated connections count against ``[server] max_connections`` in the handler.
"""

from __future__ import annotations

import logging
import socket
import ssl
import time
from typing import Any

from proton import Transport, Url
from proton._exceptions import ProtonException
from proton._handlers import IOHandler
from proton._io import IO
from proton._selectable import Selectable

from sharedsub.core.config import SecuritySettings
from sharedsub.core.errors import ConfigError
from sharedsub.core.identity import Identities, Identity
from sharedsub.core.sasl_rules import SaslExchange, SaslPolicy

log = logging.getLogger(__name__)

_MAX_OUT = 256 * 1024  # stop pulling from the transport while this much is not sent yet
_ACCEPTS_PER_WAKEUP = 64

_SHORT_NAMES = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "domainComponent": "DC",
}


def subject_dn(cert: dict[str, Any]) -> str:
    """The subject of ``SSLObject.getpeercert()`` as a DN, most specific first (``CN=a,O=b``)."""
    rdns = []
    for rdn in reversed(cert.get("subject", ())):
        rdns.append("+".join(f"{_SHORT_NAMES.get(k, k)}={v}" for k, v in rdn))
    return ",".join(rdns)


def subject_cn(cert: dict[str, Any]) -> str | None:
    """The subject's (last) common name, or None."""
    cn = None
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                cn = value
    return cn


def tls_context(sec: SecuritySettings) -> ssl.SSLContext:
    """The server TLS context of ``[security]``: TLS 1.2 or later, ``tls_cert``/``tls_key``; with
    ``tls_ca`` client certificates are asked for and checked (required with ``require_client_cert``).

    Raises:
        ConfigError: a file cannot be read or is not what the key says (names the key).
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(sec.tls_cert, sec.tls_key or None)
    except (OSError, ssl.SSLError) as exc:
        key = "security.tls_key" if sec.tls_key else "security.tls_cert"
        raise ConfigError(key, f"cannot load the certificate {sec.tls_cert!r} / key {sec.tls_key!r}: {exc}") from None
    if sec.tls_ca:
        try:
            ctx.load_verify_locations(sec.tls_ca)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError("security.tls_ca", f"cannot load {sec.tls_ca!r}: {exc}") from None
        ctx.verify_mode = ssl.CERT_REQUIRED if sec.require_client_cert else ssl.CERT_OPTIONAL
    return ctx


class SecureAcceptor:
    """A listening socket as a reactor selectable; each accepted socket gets a SecureSelectable."""

    def __init__(
        self,
        container: Any,
        host: str,
        port: int,
        *,
        policy: SaslPolicy,
        identities: Identities,
        tls: ssl.SSLContext | None = None,
        auth_timeout: float = 10.0,
        max_authenticating: int = 256,
        backlog: int = 128,
    ) -> None:
        """Bind and listen on ``host:port`` (0 = a free port, then in :attr:`port`).

        Raises:
            OSError: the address cannot be bound.
        """
        self.container = container
        self.policy = policy
        self.identities = identities
        self.tls = tls
        self.auth_timeout = auth_timeout
        self.max_authenticating = max_authenticating
        self.authenticating: set[SecureSelectable] = set()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, True)
            sock.setblocking(False)
            sock.bind((host, port))
            sock.listen(backlog)  # proton's IO.listen uses a backlog of 10
        except OSError:
            sock.close()
            raise
        self.port: int = sock.getsockname()[1]
        s = container.selectable(handler=self, delegate=sock)
        s.reading = True
        s._transport = None
        self._selectable = s
        container.update(s)

    def close(self) -> None:
        """Stop listening and drop the connections still authenticating (authenticated ones are
        proton connections: the application closes them)."""
        if not self._selectable.is_terminal:
            self._selectable.terminate()
            self._selectable.update()
        for s in list(self.authenticating):
            s.finish()

    def on_selectable_readable(self, event: Any) -> None:
        """Accept what is waiting (at most 64 per wake-up)."""
        lsock = self._selectable._delegate
        for _ in range(_ACCEPTS_PER_WAKEUP):
            try:
                sock, addr = lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE and friends: left in the backlog for now
                log.warning("accept failed: %s", exc)
                return
            if len(self.authenticating) >= self.max_authenticating:
                log.warning(
                    "closed a connection from %s: %d connections are authenticating, the limit "
                    "(security.max_authenticating)", addr[0], len(self.authenticating),
                )
                sock.close()
                continue
            IO._setupsocket(sock)  # TCP_NODELAY, non-blocking
            SecureSelectable(sock, self.container, self, addr)


class SecureSelectable(Selectable):
    """One accepted connection: TLS (amqps) -> SASL -> proton Transport."""

    def __init__(self, sock: socket.socket, reactor: Any, acceptor: SecureAcceptor, addr: Any) -> None:
        # These must exist before Selectable.__init__ assigns reading/writing.
        self._t_reading = False
        self._t_writing = False
        self._transport: Transport | None = None
        self._connection: Any = None
        self._closing = False  # send what is in _out, then close
        self._out = bytearray()  # bytes for the socket (TLS records on amqps)
        self._in_plain = bytearray()  # decrypted bytes the transport had no room for yet
        self._acceptor = acceptor
        self._addr = addr
        self._tls_subject: str | None = None
        self.handler = None
        self._tls: ssl.SSLObject | None = None
        self._sasl: SaslExchange | None = None
        if acceptor.tls is not None:
            self._tls_in, self._tls_out = ssl.MemoryBIO(), ssl.MemoryBIO()
            self._tls = acceptor.tls.wrap_bio(self._tls_in, self._tls_out, server_side=True)
            # The SASL exchange starts once the handshake is done (it needs the peer certificate).
        else:
            self._sasl = SaslExchange(acceptor.policy, encrypted=False)
        super().__init__(sock, reactor)
        acceptor.authenticating.add(self)
        self.deadline = time.time() + acceptor.auth_timeout
        self.update()

    # ------------------------------------------------------------------ what the selector waits for

    @property  # type: ignore[override]
    def reading(self) -> bool:
        """Wait for input: never while closing; always until the transport exists; then if it wants input and none is pending."""
        if self._closing or self._terminal:
            return False
        if self._transport is None:
            return True
        return self._t_reading and not self._in_plain

    @reading.setter
    def reading(self, value: bool) -> None:
        self._t_reading = value

    @property  # type: ignore[override]
    def writing(self) -> bool:
        """Wait for the socket to be writable: bytes are queued for it, or the transport wants to write."""
        return bool(self._out) or (self._transport is not None and self._t_writing)

    @writing.setter
    def writing(self, value: bool) -> None:
        self._t_writing = value

    # ------------------------------------------------------------------ called by IOHandler.on_reactor_quiesced

    def readable(self) -> None:
        """Read what the socket has through TLS, SASL or the transport; abort on EOF or a socket error."""
        try:
            data = self._delegate.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._abort(f"recv failed: {exc}")
            return
        if not data:
            self._abort("peer closed")
            return
        if self._tls is not None:
            self._tls_in.write(data)
            self._tls_receive()
        else:
            self._received(data)
        self._pull_transport()
        self._send()
        self._sync()

    def writable(self) -> None:
        """Move the transport's output to the socket and send what is queued."""
        self._pull_transport()
        self._send()
        self._sync()

    def expired(self) -> None:
        """Deadline reached: close a connection not authenticated in time, else tick the transport."""
        if self._transport is None:
            if not self._terminal:
                log.info("closed a connection from %s: not authenticated within %.0f s (security.auth_timeout)",
                         self._addr[0], self._acceptor.auth_timeout)
                self.finish()
            return
        self._sync()  # IOHandler.update -> transport.tick: idle timeout, heartbeats

    # ------------------------------------------------------------------ TLS

    def _tls_receive(self) -> None:
        tls = self._tls
        assert tls is not None
        if self._sasl is None:
            try:
                tls.do_handshake()
            except ssl.SSLWantReadError:
                self._out += self._tls_out.read()
                return
            except ssl.SSLError as exc:
                self._out += self._tls_out.read()  # the alert
                log.info("TLS handshake with %s failed: %s", self._addr[0], exc)
                self._closing = True
                return
            cert = tls.getpeercert()  # only a verified certificate (verify_mode OPTIONAL/REQUIRED)
            self._tls_subject = subject_dn(cert) if cert else None
            cn = subject_cn(cert) if cert else None
            log.debug("TLS %s with %s, client certificate %r", tls.version(), self._addr[0], self._tls_subject)
            self._sasl = SaslExchange(self._acceptor.policy, encrypted=True, peer_subject=cn)
        while not self._closing and not self._terminal:
            try:
                chunk = tls.read(65536)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                self._abort("TLS close_notify")
                break
            except ssl.SSLError as exc:
                self._abort(f"TLS error: {exc}")
                break
            if not chunk:
                break
            self._received(chunk)
        self._out += self._tls_out.read()

    def _emit(self, data: bytes) -> None:
        if not data:
            return
        if self._tls is not None:
            self._tls.write(data)
            self._out += self._tls_out.read()
        else:
            self._out += data

    # ------------------------------------------------------------------ SASL, then the transport

    def _received(self, data: bytes) -> None:
        if self._transport is not None:
            self._in_plain += data
            self._push()
            return
        sasl = self._sasl
        if sasl is None or sasl.done:
            return  # failed, closing: the rest is dropped
        sasl.feed(data)
        self._emit(sasl.take_output())
        if not sasl.done:
            return
        if sasl.ok:
            log.debug("%s authenticated as %r with %s", self._addr[0], sasl.user, sasl.mechanism or "no SASL")
            self._start_amqp(sasl)
        else:
            log.info("authentication from %s failed (%s): %s", self._addr[0], sasl.mechanism or "-", sasl.reason)
            self._closing = True

    def _start_amqp(self, sasl: SaslExchange) -> None:
        acceptor = self._acceptor
        acceptor.authenticating.discard(self)
        r = self._reactor
        conn = r.connection(r.handler)
        conn._acceptor = acceptor  # IOHandler.on_connection_bound: the socket exists, do not connect
        conn.url = Url(host=self._addr[0], port=self._addr[1])
        acceptor.identities.set(
            conn, Identity(sasl.user, sasl.mechanism, tls=self._tls is not None, tls_subject=self._tls_subject)
        )
        self._connection = conn
        t = Transport(Transport.SERVER)  # no t.sasl(), no t.ssl(): its autodetect sees the AMQP header
        t.bind(conn)
        self._transport = t
        t._selectable = self
        self.deadline = None
        self._in_plain += sasl.leftover
        self._push()

    def _push(self) -> None:
        t = self._transport
        while self._in_plain and t is not None:
            try:
                cap = t.capacity()
            except ProtonException:
                cap = -1
            if cap < 0:  # the tail is closed: nothing more is read
                self._in_plain.clear()
                return
            if cap == 0:
                return  # retried from _sync once the transport has room
            n = min(cap, len(self._in_plain))
            t.push(bytes(self._in_plain[:n]))
            del self._in_plain[:n]

    def _pull_transport(self) -> None:
        t = self._transport
        if t is None or len(self._out) >= _MAX_OUT:
            return
        try:
            pending = t.pending()
        except ProtonException:
            return
        if pending > 0:
            data = t.peek(pending)
            self._emit(data)
            t.pop(len(data))

    # ------------------------------------------------------------------ socket

    def _send(self) -> None:
        while self._out:
            try:
                n = self._delegate.send(self._out)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                self._out.clear()
                self._abort(f"send failed: {exc}")
                return
            del self._out[:n]
        if self._closing and not self._out and not self._terminal:
            self.finish()

    def _sync(self) -> None:
        if self._terminal:
            return
        t = self._transport
        if t is None:
            self.update()
            return
        if self._in_plain:
            self._push()
        IOHandler.update(t, self, self._reactor.now)

    def _abort(self, reason: str) -> None:
        """The socket is gone (EOF, an error): as IOHandler.on_selectable_error does."""
        log.debug("connection from %s: %s", self._addr[0], reason)
        t = self._transport
        if t is None:
            if self._sasl is not None:
                self._sasl.eof()
            self.finish()
            return
        t.close_head()
        t.close_tail()
        self.terminate()
        self._transport = None
        t._selectable = None
        self.update()

    def finish(self) -> None:
        """Close a connection that never reached the application."""
        self._acceptor.authenticating.discard(self)
        self.terminate()
        self.update()

    def close(self) -> None:
        """Called by IOHandler.on_selectable_final: a best effort to get the last TLS records
        (the close frame, close_notify) out before the socket closes; forgets the identity."""
        if self._tls is not None and self._sasl is not None:
            try:
                self._tls.unwrap()
            except ssl.SSLError:
                pass
            self._out += self._tls_out.read()
        if self._out:
            try:
                self._delegate.send(self._out)
            except OSError:
                pass
        self._acceptor.authenticating.discard(self)
        if self._connection is not None:
            self._acceptor.identities.discard(self._connection)
            self._connection = None
        super().close()
