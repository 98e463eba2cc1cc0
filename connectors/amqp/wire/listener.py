"""The AMQP listeners of the front end: sockets accepted on the engine loop, with TLS and SASL done
here before proton sees a byte, when the service asks for them.

    listener = Listener(loop, "127.0.0.1", 5671, identities=identities,
                        policy=SaslPolicy(...), tls=tls_context(settings.security))

Each accepted socket is an :class:`AmqpSocket`, a channel of :class:`~connectors.amqp.wire.engine_loop.EngineLoop`:

    socket -> [ssl.SSLObject over MemoryBIO: amqps only] -> [sharedsub.core.security.sasl_rules.SaslExchange]
           -> proton Connection + Transport(SERVER) (no proton SASL, no proton SSL) get the rest of
              the byte stream (the client's AMQP header onwards)
           -> SASL failed: the outcome (code 1, auth) is sent, then the socket is closed

so the application handler never sees an unauthenticated connection, and proton's idle timeout,
flow control and close handling work unchanged on what follows. Without a SASL policy (``policy
None``: no users, anonymous clients allowed, no TLS: the open default) the transport gets the
bytes from the first one and proton's own server layer answers a SASL header (ANONYMOUS) or a bare
AMQP header, as proton's stock listener did.

Limits while a connection is not authenticated yet: ``auth_timeout`` seconds for TLS and SASL
(then it is closed), and at most ``max_authenticating`` such connections (more are closed at
accept). Authenticated connections count against ``[server] max_connections`` in the handler.

Everything runs on the loop's thread. Nothing here reads or writes proton's private state
(tests/unit/test_no_proton_internals.py checks that).
"""

from __future__ import annotations

import logging
import selectors
import socket
import ssl
from typing import Any

from proton import Connection, ProtonException, Transport

from connectors.amqp.wire.engine_loop import READ_SIZE, EngineLoop, now
from sharedsub.core.config import SecuritySettings
from sharedsub.core.errors import ConfigError
from sharedsub.core.security.authenticated import Identities, Identity
from sharedsub.core.security.sasl_rules import SaslExchange, SaslPolicy

log = logging.getLogger(__name__)

_MAX_OUT = 256 * 1024  # stop pulling from the transport while this much is not sent yet (TLS)
_ACCEPTS_PER_WAKEUP = 64
ACCEPT_PAUSE = 0.1
"""Seconds a listener stops accepting after accept failed (out of file descriptors, say): the
connection stays in the backlog, and a listener still readable would otherwise spin the loop."""


_SHORT_NAMES = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "domainComponent": "DC",
}


# Any: ssl's getpeercert() dict holds str or nested tuples by key (typeshed's private _PeerCertRetDictType)
def subject_dn(cert: dict[str, Any]) -> str:
    """The subject of ``SSLObject.getpeercert()`` as a DN, most specific first (``CN=a,O=b``)."""
    rdns = []
    for rdn in reversed(cert.get("subject", ())):
        rdns.append("+".join(f"{_SHORT_NAMES.get(k, k)}={v}" for k, v in rdn))
    return ",".join(rdns)


def subject_cn(cert: dict[str, Any]) -> str | None:  # Any: as subject_dn
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


def _setup_socket(sock: socket.socket) -> None:
    """An accepted socket as proton sets up its own: non-blocking, TCP_NODELAY."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
    sock.setblocking(False)


class Listener:
    """A listening socket on the loop; each accepted socket becomes an :class:`AmqpSocket`."""

    def __init__(
        self,
        loop: EngineLoop,
        host: str,
        port: int,
        *,
        identities: Identities,
        policy: SaslPolicy | None = None,
        tls: ssl.SSLContext | None = None,
        auth_timeout: float = 10.0,
        max_authenticating: int = 256,
        backlog: int = 128,
    ) -> None:
        """Bind and listen on ``host:port`` (0 = a free port, then in :attr:`port`). ``policy``
        None: no SASL of ours (proton's own layer answers; only without ``tls``).

        Raises:
            OSError: the address cannot be bound.
            ValueError: ``tls`` without a SASL ``policy``.
        """
        if tls is not None and policy is None:
            raise ValueError("a TLS listener needs a SASL policy")
        self.loop = loop
        self.policy = policy
        self.identities = identities
        self.tls = tls
        self.auth_timeout = auth_timeout
        self.max_authenticating = max_authenticating
        self.authenticating: set[AmqpSocket] = set()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, True)
            sock.setblocking(False)
            sock.bind((host, port))
            sock.listen(backlog)
        except OSError:
            sock.close()
            raise
        self.port: int = sock.getsockname()[1]
        self.sock = sock
        self._closed = False
        self._paused = False
        self.accept_failures = 0
        loop.add(self)

    def close(self) -> None:
        """Stop listening and drop the connections still authenticating (authenticated ones are
        proton connections: the application closes them)."""
        if self._closed:
            return
        self._closed = True
        self.loop.remove(self)
        self.sock.close()
        for s in list(self.authenticating):
            s.finish()

    # ------------------------------------------------------------------ as a loop channel

    def interest(self) -> int:
        """Readable: a connection waits to be accepted (not while paused after a failed accept)."""
        return 0 if self._closed or self._paused else selectors.EVENT_READ

    def deadline(self) -> float | None:
        """None: nothing is timed."""
        return None

    def on_readable(self) -> None:
        """Accept what is waiting (at most 64 per wake-up)."""
        for _ in range(_ACCEPTS_PER_WAKEUP):
            try:
                sock, addr = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE and friends: left in the backlog for now
                self.accept_failures += 1
                if self.accept_failures == 1 or self.accept_failures % 100 == 0:
                    log.warning("accept failed (%d times so far): %s; trying again in %.1f s",
                                self.accept_failures, exc, ACCEPT_PAUSE)
                self._paused = True
                self.loop.schedule(ACCEPT_PAUSE, self._resume)
                return
            if self.policy is not None and len(self.authenticating) >= self.max_authenticating:
                log.warning(
                    "closed a connection from %s: %d connections are authenticating, the limit "
                    "(security.max_authenticating)", addr[0], len(self.authenticating),
                )
                sock.close()
                continue
            try:
                _setup_socket(sock)
            except OSError:  # reset before we got to it
                sock.close()
                continue
            AmqpSocket(sock, self, addr)

    def _resume(self) -> None:
        self._paused = False
        self.loop.update(self)

    def on_writable(self) -> None:
        """Never waited for."""

    def on_expired(self, at: float) -> None:
        """No deadline."""

    def flush(self) -> None:
        """No output."""

    def transport_closed(self, transport: Transport) -> None:
        """No transport."""

    def abort(self, reason: str) -> None:
        """Stop listening."""
        log.error("listener on port %d failed (%s); it stops", self.port, reason)
        self.close()


class AmqpSocket:
    """One accepted connection: [TLS] -> [SASL] -> proton Transport, as a loop channel."""

    # ``addr``: what socket.accept() gives for an AF_INET or AF_INET6 socket (typeshed types it Any)
    def __init__(self, sock: socket.socket, listener: Listener, addr: tuple[str, int] | tuple[str, int, int, int]) -> None:
        self.sock = sock
        self._listener = listener
        self._loop = listener.loop
        self._addr = addr
        self._t: Transport | None = None  # the transport while it carries this socket's bytes
        self._connection: Connection | None = None  # its connection, for the identity
        self._t_reading = False  # the transport has room (capacity() > 0)
        self._t_writing = False  # the transport has output the socket did not take yet
        self._t_deadline: float | None = None  # the transport's next tick (idle timeout, heartbeats)
        self._auth_deadline: float | None = None
        self._closing = False  # send what is in _out, then close
        self._closed = False
        self._out = bytearray()  # bytes for the socket not sent yet (SASL frames, TLS records)
        self._in_plain = bytearray()  # bytes for the transport it had no room for yet
        self._tls_subject: str | None = None
        self._tls: ssl.SSLObject | None = None
        self._sasl: SaslExchange | None = None
        self._loop.add(self)
        if listener.tls is not None:
            self._tls_in, self._tls_out = ssl.MemoryBIO(), ssl.MemoryBIO()
            self._tls = listener.tls.wrap_bio(self._tls_in, self._tls_out, server_side=True)
            # The SASL exchange starts once the handshake is done (it needs the peer certificate).
        elif listener.policy is not None:
            self._sasl = SaslExchange(listener.policy, encrypted=False)
        else:
            self._start_amqp(None)
            return
        listener.authenticating.add(self)
        self._auth_deadline = now() + listener.auth_timeout
        self._loop.update(self)

    # ------------------------------------------------------------------ what the loop waits for

    def interest(self) -> int:
        """Read while the transport (or TLS/SASL before it) wants input and none is held back;
        write while output waits for the socket."""
        if self._closed:
            return 0
        bits = 0
        if not self._closing and (self._t is None or (self._t_reading and not self._in_plain)):
            bits |= selectors.EVENT_READ
        if self._out or self._t_writing:
            bits |= selectors.EVENT_WRITE
        return bits

    def deadline(self) -> float | None:
        """The authentication deadline until the transport exists, then the transport's tick."""
        if self._closed:
            return None
        return self._auth_deadline if self._t is None else self._t_deadline

    # ------------------------------------------------------------------ loop callbacks

    def on_readable(self) -> None:
        """Read what the socket has through TLS, SASL or the transport; abort on EOF or a socket error."""
        if self._closed:
            return
        try:
            data = self.sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.abort(f"recv failed: {exc}")
            return
        if not data:
            self.abort("peer closed")
            return
        if self._tls is not None:
            self._tls_in.write(data)
            self._tls_receive()
        else:
            self._received(data)
        # Flushed at the end of the pass, after the events this input queued were handled: the
        # engine's own answers (and SASL's) go out with the handler's.
        self._loop.mark_dirty(self)

    def on_writable(self) -> None:
        """The socket takes output again."""
        self.flush()

    def on_expired(self, at: float) -> None:
        """Deadline reached: close a connection not authenticated in time, else tick the transport."""
        if self._closed:
            return
        if self._t is None:
            log.info("closed a connection from %s: not authenticated within %.0f s (security.auth_timeout)",
                     self._addr[0], self._listener.auth_timeout)
            self.finish()
            return
        self._tick()
        self.flush()

    def flush(self) -> None:
        """Move the transport's output to the socket, send what is queued, re-read the
        transport's state (room for input, output left, next tick)."""
        if self._closed:
            return
        t = self._t
        if t is not None:
            if self._in_plain:
                self._push()
            if self._tls is None and not self._out:
                self._send_transport(t)
            else:
                self._pull_transport(t)
        if self._out:
            self._send()
        if self._closed:
            return
        if self._closing and not self._out:
            self.finish()
            return
        t = self._t
        if t is not None:
            try:
                self._t_reading = t.capacity() > 0
            except ProtonException:
                self._t_reading = False
            self._tick()

    def transport_closed(self, transport: Transport) -> None:
        """Proton's TRANSPORT_CLOSED (the handler has seen it): send what is left, close the socket."""
        self._t = None
        self._loop.unbind(transport)
        self.finish()

    def abort(self, reason: str) -> None:
        """The socket is gone (EOF, an error): the transport is closed at both ends, which
        queues TRANSPORT_CLOSED (the handler's on_transport_closed, then :meth:`transport_closed`)."""
        log.debug("connection from %s: %s", self._addr[0], reason)
        t = self._t
        if t is None:
            if self._sasl is not None:
                self._sasl.eof()
            self._out.clear()
            self.finish()
            return
        self._closing = True  # nothing more is read; the socket waits for TRANSPORT_CLOSED
        self._out.clear()
        self._t_writing = False
        t.close_head()
        t.close_tail()

    def finish(self) -> None:
        """Close the socket (a best effort to send what is queued first: the close frame, the last
        TLS records) and forget the connection's identity."""
        if self._closed:
            return
        self._closed = True
        self._listener.authenticating.discard(self)
        if self._tls is not None and self._sasl is not None:
            try:
                self._tls.unwrap()
            except (ssl.SSLError, ValueError):
                pass
            self._out += self._tls_out.read()
        if self._out:
            try:
                self.sock.send(self._out)
            except OSError:
                pass
            self._out.clear()
        self._loop.remove(self)
        self.sock.close()
        if self._t is not None:  # closed before proton closed it (listener closed while authenticating)
            self._loop.unbind(self._t)
            self._t = None
        if self._connection is not None:
            self._listener.identities.discard(self._connection)
            self._connection = None

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
            assert self._listener.policy is not None
            self._sasl = SaslExchange(self._listener.policy, encrypted=True, peer_subject=cn)
        while not self._closing and not self._closed:
            try:
                chunk = tls.read(READ_SIZE)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                self.abort("TLS close_notify")
                break
            except ssl.SSLError as exc:
                self.abort(f"TLS error: {exc}")
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
        if self._t is not None:
            if self._in_plain:  # bytes held back go first
                self._in_plain += data
                self._push()
            else:
                rest = self._push_view(memoryview(data))
                if rest:
                    self._in_plain += rest
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

    def _start_amqp(self, sasl: SaslExchange | None) -> None:
        listener = self._listener
        listener.authenticating.discard(self)
        conn = self._loop.connection()
        if sasl is not None:
            listener.identities.set(
                conn, Identity(sasl.user, sasl.mechanism, tls=self._tls is not None, tls_subject=self._tls_subject)
            )
            self._connection = conn
        t = Transport(Transport.SERVER)  # no t.sasl(), no t.ssl(): its autodetect sees the header
        self._loop.bind(self, conn, t)
        self._t = t
        self._t_reading = True
        self._auth_deadline = None
        if sasl is not None and sasl.leftover:
            self._in_plain += sasl.leftover
            self._push()
        self._loop.mark_dirty(self)

    def _push_view(self, view: memoryview) -> memoryview | None:
        """Push ``view`` into the transport as far as it has room (proton decodes what it is
        given at once, so its room comes back as frames complete); what is left, or None."""
        t = self._t
        while view and t is not None:
            try:
                cap = t.capacity()
            except ProtonException:
                cap = -1
            if cap < 0:  # the tail is closed: nothing more is read
                return None
            if cap == 0:
                return view  # held back, pushed from flush once the transport has room
            # The binding copies any buffer it is given (its stub says bytes): no copy of ours.
            if cap >= len(view):
                t.push(view)  # type: ignore[arg-type]
                return None
            t.push(view[:cap])  # type: ignore[arg-type]
            view = view[cap:]
        return None

    def _push(self) -> None:
        """Push the bytes held back."""
        if not self._in_plain:
            return
        rest = self._push_view(memoryview(self._in_plain))
        self._in_plain = bytearray(rest) if rest else bytearray()

    def _pull_transport(self, t: Transport) -> None:
        """The transport's output into ``_out`` (through TLS on amqps)."""
        if len(self._out) >= _MAX_OUT:
            self._t_writing = True
            return
        try:
            pending = t.pending()
        except ProtonException:
            pending = -1
        data = t.peek(pending) if pending > 0 else None  # None only when nothing is pending
        if data:
            self._emit(data)
            t.pop(len(data))
        self._t_writing = False

    def _send_transport(self, t: Transport) -> None:
        """The transport's output straight to the socket (no TLS, nothing queued before it)."""
        sock = self.sock
        while True:
            try:
                pending = t.pending()
            except ProtonException:
                pending = -1
            data = t.peek(pending) if pending > 0 else None  # None only when nothing is pending
            if not data:
                self._t_writing = False
                return
            try:
                sent = sock.send(data)
            except (BlockingIOError, InterruptedError):
                self._t_writing = True
                return
            except OSError as exc:
                self.abort(f"send failed: {exc}")
                return
            t.pop(sent)
            if sent < len(data):
                self._t_writing = True
                return

    # ------------------------------------------------------------------ socket

    def _send(self) -> None:
        while self._out:
            try:
                n = self.sock.send(self._out)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._out.clear()
                self.abort(f"send failed: {exc}")
                return
            del self._out[:n]

    def _tick(self) -> None:
        t = self._t
        if t is None:
            return
        try:
            due = t.tick(now())
        except ProtonException:
            due = 0
        self._t_deadline = due or None
