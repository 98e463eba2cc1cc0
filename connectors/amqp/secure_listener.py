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

How it plugs into proton 0.40's pure-Python reactor (public API only: ``Container.selectable``,
``Container.connection``, ``Container.global_handler``, ``Container.now``, the selectable's
``reading``/``writing``/``deadline``/``terminate()``/``is_terminal``/``update()``, ``Transport``,
``ProtonException``, ``Handler``):

* The container's global handler (by default proton's ``GlobalOverrides`` around an
  ``IOHandler``) runs after the regular handler for every event. :meth:`SecureIOHandler.install`
  wraps whatever global handler the container has in a :class:`SecureIOHandler`, which keeps side
  tables of the selectables, transports and connections that belong to a secure listener. For
  those it answers the events itself; every other event (and every event of the plain listener,
  the injector, the timer or an outgoing connection) goes to the wrapped handler unchanged. It
  wraps rather than replaces, so it can be installed at any time before or while the reactor runs
  and keeps the state of the handler it wraps (the selector of every selectable so far).
* Sockets are plain selectables from ``container.selectable(handler=..., delegate=sock)``: the
  listening socket's handler is the :class:`SecureAcceptor`, an accepted socket's is its
  :class:`SecureSocket`. Proton's selector loop (``IOHandler.on_reactor_quiesced``) turns readiness
  into SELECTABLE_READABLE / WRITABLE / EXPIRED events; proton dispatches those to the
  selectable's handler first, which does the socket I/O, then to the global handler, where
  :class:`SecureIOHandler` stops them (``IOHandler`` would look for a transport on the
  selectable). SELECTABLE_INIT / UPDATED / FINAL still go to the wrapped ``IOHandler``, which adds
  the selectable to its selector, re-reads ``reading``/``writing``/``deadline`` and, at the end,
  removes it and closes the socket (the SecureSocket's own FINAL handler runs just before that
  and sends the last TLS records).
* :meth:`SecureSocket._update` is our equivalent of ``IOHandler.update``: it sets ``reading`` /
  ``writing`` from the transport's ``capacity()`` / ``pending()`` plus our buffered state (TLS
  records not sent yet, the SASL phase, decrypted bytes the transport had no room for) and
  ``deadline`` from ``transport.tick(now)`` (the idle timeout and heartbeats), then calls
  ``selectable.update()``.
* After SASL the connection comes from ``container.connection(container.handler)`` (collected by
  the container, the application handler as its handler) and is bound to a ``Transport(SERVER)``
  that :class:`SecureIOHandler` knows as ours, so it answers CONNECTION_BOUND (nothing to connect:
  the socket exists), TRANSPORT (our ``_update``) and TRANSPORT_CLOSED (terminate the selectable,
  unbind) for it, as ``IOHandler`` does for its own transports. Unbinding queues one more
  TRANSPORT event, after the socket's SELECTABLE_FINAL, so a closed socket's transport is
  forgotten only at the next REACTOR_QUIESCED (nothing queued) once it is unbound: handed to
  ``IOHandler``, that event would fail on a transport it did not set up.

Nothing reads or writes proton's private attributes or imports its private modules
(tests/unit/test_no_proton_internals.py checks that). One visible consequence: proton's
``IOHandler.on_connection_bound`` is what links a transport to its container, so
``event.container`` is None in the events of these connections (the application does not use it;
it holds the container itself). tests/e2e/test_security.py exercises all this against a real
service.

Limits while a connection is not authenticated yet: ``auth_timeout`` seconds for TLS and SASL
(then it is closed), and at most ``max_authenticating`` such connections (more are closed at
accept). Authenticated connections count against ``[server] max_connections`` in the handler.
"""

from __future__ import annotations

import logging
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

from proton import Connection, Handler, ProtonException, Transport, Url

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


def _setup_socket(sock: socket.socket) -> None:
    """An accepted socket as proton sets up its own: non-blocking, TCP_NODELAY."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
    sock.setblocking(False)


class SecureIOHandler(Handler):
    """The container's global handler while secure listeners exist (see the module docstring).

    Events of the selectables, transports and connections registered here are answered here;
    everything else goes to :attr:`base`, the global handler the container had before.
    """

    def __init__(self, base: Any) -> None:
        self.base = base
        self._selectables: dict[Any, SecureAcceptor | SecureSocket] = {}
        self._transports: dict[Transport, SecureSocket] = {}
        self._connections: dict[Connection, SecureSocket] = {}
        self._retired: list[tuple[Connection, Transport]] = []  # of sockets closed: see _drop_retired

    @classmethod
    def install(cls, container: Any) -> SecureIOHandler:
        """The container's SecureIOHandler, wrapped around its global handler on first use."""
        current = container.global_handler
        if isinstance(current, cls):
            return current
        handler = cls(current)
        container.global_handler = handler
        return handler

    # ------------------------------------------------------------------ what belongs to us

    def add_selectable(self, selectable: Any, owner: SecureAcceptor | SecureSocket) -> None:
        """``selectable`` is a secure listener's: its readable/writable/expired events are the owner's."""
        self._selectables[selectable] = owner

    def add_transport(self, owner: SecureSocket, connection: Connection, transport: Transport) -> None:
        """``transport`` (bound to ``connection``) carries ``owner``'s byte stream."""
        self._transports[transport] = owner
        self._connections[connection] = owner

    def _forget(self, selectable: Any) -> None:
        owner = self._selectables.pop(selectable, None)
        if isinstance(owner, SecureSocket) and owner.amqp is not None:
            self._retired.append(owner.amqp)

    def _drop_retired(self) -> None:
        """Forget the transports (and their connections) of closed sockets once they are unbound.
        Only called with no event queued: unbinding queues one more TRANSPORT event (after the
        socket's SELECTABLE_FINAL), and it must still find the transport here, or it would go to
        the wrapped IOHandler, which fails on a transport it did not set up."""
        kept = []
        for connection, transport in self._retired:
            if transport.connection is None:
                self._transports.pop(transport, None)
                self._connections.pop(connection, None)
            else:
                kept.append((connection, transport))
        self._retired = kept

    def owns(self, selectable: Any) -> bool:
        """Whether ``selectable`` is a secure listener's (for tests)."""
        return selectable in self._selectables

    # ------------------------------------------------------------------ events

    def on_unhandled(self, method: str, *args: Any) -> None:
        """Not ours to answer: the wrapped handler's."""
        args[0].dispatch(self.base)

    def _selectable_event(self, event: Any) -> None:
        if event.context not in self._selectables:
            event.dispatch(self.base)
        # else: the selectable's own handler (SecureAcceptor / SecureSocket) has done it

    on_selectable_readable = _selectable_event
    on_selectable_writable = _selectable_event
    on_selectable_expired = _selectable_event

    def on_selectable_error(self, event: Any) -> None:
        """As ``IOHandler.on_selectable_error``: the socket is gone."""
        owner = self._selectables.get(event.context)
        if owner is None:
            event.dispatch(self.base)
        elif isinstance(owner, SecureSocket):
            owner.abort("selectable error")

    def on_selectable_final(self, event: Any) -> None:
        """The wrapped IOHandler drops it from its selector and closes the socket; we forget it."""
        event.dispatch(self.base)
        self._forget(event.context)

    def on_reactor_quiesced(self, event: Any) -> None:
        """No event is queued (proton's selector loop runs next, in the wrapped IOHandler)."""
        if self._retired:
            self._drop_retired()
        event.dispatch(self.base)

    def on_connection_bound(self, event: Any) -> None:
        """Ours are bound to a socket that exists already: nothing to connect."""
        if event.connection not in self._connections:
            event.dispatch(self.base)

    def on_transport(self, event: Any) -> None:
        """The transport has something to say or room to listen: what the socket waits for changes."""
        owner = self._transports.get(event.transport)
        if owner is None:
            event.dispatch(self.base)
        else:
            owner.transport_changed()

    def on_transport_closed(self, event: Any) -> None:
        """Both ends of the transport are closed: so is the socket."""
        owner = self._transports.get(event.transport)
        if owner is None:
            event.dispatch(self.base)
        else:
            owner.transport_closed(event.transport)


class SecureAcceptor:
    """A listening socket as a reactor selectable; each accepted socket gets a SecureSocket."""

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
        self.authenticating: set[SecureSocket] = set()
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
        self.io = SecureIOHandler.install(container)
        self._sock = sock
        s = container.selectable(handler=self, delegate=sock)
        s.reading = True
        self.selectable = s
        self.io.add_selectable(s, self)
        container.update(s)

    def close(self) -> None:
        """Stop listening and drop the connections still authenticating (authenticated ones are
        proton connections: the application closes them)."""
        if not self.selectable.is_terminal:
            self.selectable.terminate()
            self.selectable.update()
        for s in list(self.authenticating):
            s.finish()

    def on_selectable_readable(self, event: Any) -> None:
        """Accept what is waiting (at most 64 per wake-up)."""
        for _ in range(_ACCEPTS_PER_WAKEUP):
            try:
                sock, addr = self._sock.accept()
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
            _setup_socket(sock)
            SecureSocket(sock, self, addr)


class SecureSocket:
    """One accepted connection: TLS (amqps) -> SASL -> proton Transport. It is the handler of its
    selectable (readable/writable/expired/final); :class:`SecureIOHandler` passes it the events of
    its transport."""

    def __init__(self, sock: socket.socket, listener: SecureAcceptor, addr: Any) -> None:
        self._sock = sock
        self._listener = listener
        self._container = listener.container
        self._addr = addr
        self._t: Transport | None = None  # the transport while it carries this socket's bytes
        self.amqp: tuple[Connection, Transport] | None = None  # what SecureIOHandler knows as ours
        self._connection: Any = None  # for the identity, until the socket is closed
        self._t_reading = False  # the transport has room (capacity() > 0)
        self._t_writing = False  # the transport has output (pending() > 0)
        self._closing = False  # send what is in _out, then close
        self._out = bytearray()  # bytes for the socket (TLS records on amqps)
        self._in_plain = bytearray()  # decrypted bytes the transport had no room for yet
        self._tls_subject: str | None = None
        self._tls: ssl.SSLObject | None = None
        self._sasl: SaslExchange | None = None
        if listener.tls is not None:
            self._tls_in, self._tls_out = ssl.MemoryBIO(), ssl.MemoryBIO()
            self._tls = listener.tls.wrap_bio(self._tls_in, self._tls_out, server_side=True)
            # The SASL exchange starts once the handshake is done (it needs the peer certificate).
        else:
            self._sasl = SaslExchange(listener.policy, encrypted=False)
        self.selectable = self._container.selectable(handler=self, delegate=sock)
        listener.io.add_selectable(self.selectable, self)
        listener.authenticating.add(self)
        self.selectable.deadline = time.time() + listener.auth_timeout
        self._update()

    # ------------------------------------------------------------------ what the selector waits for

    def _wants_read(self) -> bool:
        """Wait for input: never while closing; always until the transport exists; then if it wants input and none is pending."""
        if self._closing or self.selectable.is_terminal:
            return False
        if self._t is None:
            return True
        return self._t_reading and not self._in_plain

    def _wants_write(self) -> bool:
        """Wait for the socket to be writable: bytes are queued for it, or the transport wants to write."""
        return bool(self._out) or (self._t is not None and self._t_writing)

    def _update(self) -> None:
        """What ``IOHandler.update`` does for proton's own sockets, plus our buffered state: set
        ``reading``/``writing``/``deadline`` (``transport.tick``: idle timeout, heartbeats) and
        tell the selector. A closed transport ends the socket."""
        sel = self.selectable
        if sel.is_terminal:
            return
        t = self._t
        if t is not None:
            reading = self._transport_wants(t, t.capacity)
            if reading is not None:
                self._t_reading = reading
            writing = self._transport_wants(t, t.pending)
            if writing is not None:
                self._t_writing = writing
            sel.deadline = t.tick(self._container.now)
        sel.reading = self._wants_read()
        sel.writing = self._wants_write()
        sel.update()

    def _transport_wants(self, t: Transport, measure: Callable[[], int]) -> bool | None:
        """Whether ``measure()`` (the transport's capacity or pending bytes) is positive; None
        when the transport refused to say (a closed one then ends the socket)."""
        try:
            return measure() > 0
        except ProtonException:
            if t.closed:
                self.selectable.terminate()
                self._t = None
            return None

    # ------------------------------------------------------------------ selectable events (this is its handler)

    def on_selectable_readable(self, event: Any) -> None:
        """Read what the socket has through TLS, SASL or the transport; abort on EOF or a socket error."""
        if self.selectable.is_terminal:
            return
        try:
            data = self._sock.recv(65536)
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
        self._pull_transport()
        self._send()
        self._sync()

    def on_selectable_writable(self, event: Any) -> None:
        """Move the transport's output to the socket and send what is queued."""
        if self.selectable.is_terminal:
            return
        self._pull_transport()
        self._send()
        self._sync()

    def on_selectable_expired(self, event: Any) -> None:
        """Deadline reached: close a connection not authenticated in time, else tick the transport."""
        if self._t is None:
            if not self.selectable.is_terminal:
                log.info("closed a connection from %s: not authenticated within %.0f s (security.auth_timeout)",
                         self._addr[0], self._listener.auth_timeout)
                self.finish()
            return
        self._sync()  # _update -> transport.tick: idle timeout, heartbeats

    def on_selectable_final(self, event: Any) -> None:
        """Before proton's IOHandler closes the socket: a best effort to get the last TLS records
        (the close frame, close_notify) out; forgets the identity."""
        if self._tls is not None and self._sasl is not None:
            try:
                self._tls.unwrap()
            except ssl.SSLError:
                pass
            self._out += self._tls_out.read()
        if self._out:
            try:
                self._sock.send(self._out)
            except OSError:
                pass
        self._listener.authenticating.discard(self)
        if self._connection is not None:
            self._listener.identities.discard(self._connection)
            self._connection = None

    # ------------------------------------------------------------------ transport events (from SecureIOHandler)

    def transport_changed(self) -> None:
        """TRANSPORT: as ``IOHandler.on_transport``."""
        if self._t is not None and not self.selectable.is_terminal:
            self._update()

    def transport_closed(self, transport: Transport) -> None:
        """TRANSPORT_CLOSED: as ``IOHandler.on_transport_closed``."""
        sel = self.selectable
        if self._t is not None and not sel.is_terminal:
            sel.terminate()
            self._t = None
            sel.update()
        transport.unbind()

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
            self._sasl = SaslExchange(self._listener.policy, encrypted=True, peer_subject=cn)
        while not self._closing and not self.selectable.is_terminal:
            try:
                chunk = tls.read(65536)
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
        listener = self._listener
        listener.authenticating.discard(self)
        container = self._container
        conn = container.connection(container.handler)
        conn.url = Url(host=self._addr[0], port=self._addr[1])
        listener.identities.set(
            conn, Identity(sasl.user, sasl.mechanism, tls=self._tls is not None, tls_subject=self._tls_subject)
        )
        self._connection = conn
        t = Transport(Transport.SERVER)  # no t.sasl(), no t.ssl(): its autodetect sees the AMQP header
        self.amqp = (conn, t)
        listener.io.add_transport(self, conn, t)  # before bind: CONNECTION_BOUND is then ours
        t.bind(conn)
        self._t = t
        self.selectable.deadline = None
        self._in_plain += sasl.leftover
        self._push()

    def _push(self) -> None:
        t = self._t
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
        t = self._t
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
                n = self._sock.send(self._out)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                self._out.clear()
                self.abort(f"send failed: {exc}")
                return
            del self._out[:n]
        if self._closing and not self._out and not self.selectable.is_terminal:
            self.finish()

    def _sync(self) -> None:
        if self.selectable.is_terminal:
            return
        if self._t is not None and self._in_plain:
            self._push()
        self._update()

    def abort(self, reason: str) -> None:
        """The socket is gone (EOF, an error): as IOHandler.on_selectable_error does."""
        log.debug("connection from %s: %s", self._addr[0], reason)
        t = self._t
        if t is None:
            if self._sasl is not None:
                self._sasl.eof()
            self.finish()
            return
        t.close_head()
        t.close_tail()
        self.selectable.terminate()
        self._t = None
        self.selectable.update()

    def finish(self) -> None:
        """Close a connection that never reached the application."""
        self._listener.authenticating.discard(self)
        self.selectable.terminate()
        self.selectable.update()
