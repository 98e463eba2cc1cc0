"""The HTTP endpoint of ``sharedsub serve`` / ``frontend``: metrics, health and admin calls.

A stdlib ``ThreadingHTTPServer`` on a daemon thread (one thread per request), listening on
``[server] http_host``:``http_port`` (0 = a free port; -1 = off; see sharedsub/core/defaults.toml). It
knows nothing about sharedsub: it dispatches on a **route table**, a dict
``(method, path) -> handler``, and turns what handlers return or raise into HTTP replies.

Contracts:

* A handler is ``handler(request: Request) -> Reply``. ``request.body`` is the parsed JSON
  object of a POST (``{}`` when empty); a body that is not a JSON object is answered 400 before
  any handler runs.
* A handler that raises a :class:`~sharedsub.core.errors.SharedSubError` gets the JSON error reply of
  :func:`sharedsub.core.ops.admin_rules.error_body` (``{"ok": false, "error": CODE, "exit_code": N,
  "message": ...}``) with the status of that code (:data:`sharedsub.core.ops.admin_rules.ERROR_CODES`);
  anything else is logged and answered 500 with code ``error``. Success replies of admin calls
  are ``{"ok": true, ...}`` (:meth:`Reply.json`).
* Unknown paths are 404 (``not-found``); a known path with another method is 405.

Hardening (docs/security.md):

* **Admin token.** Every request that is not a GET or HEAD, and every request under ``/admin/``,
  needs ``Authorization: Bearer TOKEN``; without it, or with another token, it is answered 401
  (code ``unauthorized``) before its body is read. The token is random per start
  (:attr:`AdminHttpServer.token`); ``serve`` records it in ``<data>/_service.json`` (0600), where
  the CLI reads it (sharedsub.runtime.discovery.call_admin). GET /health and /metrics need none.
* **Request bodies** need a ``Content-Length`` (a POST without one: 411; chunked bodies: 411); a
  value that is not a non-negative decimal integer, or several different values: 400; more than
  :data:`MAX_BODY_BYTES`: 413. The body is read up to that length, never to end of stream; the
  connection is closed after any refusal that leaves a body unread.
* **Time and connections.** Each request has ``request_timeout`` seconds from its first byte
  to its reply (a slow or silent client is disconnected then; an idle keep-alive connection
  too), and each request runs on a thread of its own, at most ``max_connections`` at once (more
  are answered 503 and closed), so a slow client holds one thread for a bounded time and never
  blocks the others.
* Handlers run on the HTTP threads. Anything that touches front-end state (proton objects, the
  in-memory catalog) must run on the reactor thread: :meth:`connectors.amqp.server.FrontEndServer.call`
  runs a function there and waits for its result.

**Extension point.** The routes of a running service are built in one place,
:func:`connectors.http.endpoints.build_routes`; to add an admin call (e.g. ``POST /admin/replay``)
write a handler there (or in a module of its own) and add one entry to the dict it returns::

    routes[("POST", "/admin/replay")] = lambda request: Reply.json({"ok": True, ...})

:meth:`AdminHttpServer.add_route` does the same on a server that is already built.
"""

from __future__ import annotations

import dataclasses
import email.message
import hmac
import json
import logging
import secrets
import socket
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sharedsub.core.errors import SharedSubError
from sharedsub.core.ops.admin_rules import error_body, http_status

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024
REQUEST_TIMEOUT = 10.0  # seconds one request may take, from its first byte to its reply
MAX_CONNECTIONS = 64  # connections served at once; more are answered 503 and closed
READ_ONLY_METHODS = ("GET", "HEAD")


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """One HTTP request as a handler sees it."""

    method: str
    path: str
    query: Mapping[str, str]
    body: Mapping[str, object]
    # Whether it carried the admin token (a GET needs none to reach its handler; the console's
    # routes decide with it what a GET may read: sharedsub.core.ops.console_access).
    authorized: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Reply:
    """What a handler answers."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()  # more response headers (the console's CSP, caching)

    @classmethod
    def json(cls, document: object, status: int = 200) -> Reply:
        """A JSON reply."""
        return cls(status, (json.dumps(document) + "\n").encode(), "application/json")

    @classmethod
    def text(cls, text: str, content_type: str = "text/plain; charset=utf-8", status: int = 200) -> Reply:
        """A text reply (``/metrics`` uses the Prometheus text content type)."""
        return cls(status, text.encode(), content_type)


Handler = Callable[[Request], Reply]
Routes = dict[tuple[str, str], Handler]


def _error(code: str, message: str, exit_code: int, status: int) -> Reply:
    return Reply.json({"ok": False, "error": code, "exit_code": exit_code, "message": message}, status)


def dispatch(routes: Mapping[tuple[str, str], Handler], request: Request) -> Reply:
    """Run the handler of ``request`` and map errors as the module docstring says."""
    handler = routes.get((request.method, request.path))
    if handler is None:
        if any(path == request.path for _, path in routes):
            return _error("usage", f"{request.method} not allowed on {request.path}", 2, 405)
        return _error("not-found", f"no route {request.method} {request.path}", 3, 404)
    try:
        return handler(request)
    except SharedSubError as exc:
        body = error_body(exc)
        return Reply.json(body, http_status(body["error"]))
    except Exception as exc:  # last-resort guard: answer, log, keep serving
        log.exception("admin request %s %s failed", request.method, request.path)
        return Reply.json(error_body(exc), 500)


class _Server(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` with a cap on the connections it serves at once."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], max_connections: int) -> None:
        self._slots = threading.BoundedSemaphore(max_connections)
        self.max_connections = max_connections
        super().__init__(address, handler)

    # socketserver's request is socket | (bytes, socket) in typeshed, a socket for this TCP server (its
    # Any: settimeout and sendall are used below); its client address is typeshed's Any
    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            log.warning("HTTP endpoint: %d connections already served; refused %s", self.max_connections, client_address)
            reply = _error("busy", f"more than {self.max_connections} connections at once", 1, 503).body
            try:
                request.settimeout(1.0)
                request.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(reply)}\r\nConnection: close\r\n\r\n".encode()
                    + reply
                )
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: socket.socket | tuple[bytes, socket.socket], client_address: object) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: socket.socket | tuple[bytes, socket.socket], client_address: object) -> None:
        # A client that went away or was cut off at its deadline: not worth a traceback on stderr.
        log.debug("HTTP connection from %s ended with an error", client_address, exc_info=True)


def _content_length(headers: email.message.Message, method: str) -> tuple[int, Reply | None]:
    """The body length a request announces, or the refusal of its headers (module docstring)."""
    if headers.get("Transfer-Encoding") is not None:
        return 0, _error("usage", "Transfer-Encoding is not accepted: send the body with a Content-Length", 2, 411)
    values = {v.strip() for v in headers.get_all("Content-Length") or []}
    if not values:
        if method in READ_ONLY_METHODS:
            return 0, None
        return 0, _error("usage", f"a {method} needs a Content-Length header", 2, 411)
    if len(values) > 1:
        return 0, _error("usage", "several different Content-Length headers", 2, 400)
    (value,) = values
    if not (value.isascii() and value.isdigit()):
        return 0, _error("usage", f"Content-Length must be a non-negative integer, got {value[:40]!r}", 2, 400)
    length = int(value)
    if length > MAX_BODY_BYTES:
        return 0, _error("usage", f"request body larger than {MAX_BODY_BYTES} bytes", 2, 413)
    return length, None


class AdminHttpServer:
    """The HTTP server; :meth:`start` binds and serves on a daemon thread, :meth:`stop` ends it.

    ``token``: the bearer token admin calls need (None: a random one, see :attr:`token`).
    """

    def __init__(
        self,
        host: str,
        port: int,
        routes: Routes | None = None,
        *,
        token: str | None = None,
        request_timeout: float = REQUEST_TIMEOUT,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.host = host
        self.port = port
        self.routes: Routes = dict(routes or {})
        self.token = token or secrets.token_urlsafe(32)
        self.request_timeout = request_timeout
        self.max_connections = max_connections
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def add_route(self, method: str, path: str, handler: Handler) -> None:
        """Add (or replace) the handler of ``method path``; safe while serving."""
        self.routes[(method.upper(), path)] = handler

    def start(self) -> tuple[str, int]:  # noqa: C901 (its request handler class closes over this server's routes and token)
        """Bind (``port`` 0 picks a free one) and serve; return the bound (host, port).

        Raises:
            OSError: the address cannot be bound.
        """
        routes = self.routes
        expected = f"Bearer {self.token}".encode()
        deadline = self.request_timeout

        class _Handler(BaseHTTPRequestHandler):
            server_version = "sharedsub"
            protocol_version = "HTTP/1.1"
            timeout = deadline  # each read and write; the watchdog below bounds the whole request

            def handle(self) -> None:
                self.close_connection = True
                self._one_request()
                while not self.close_connection:
                    self._one_request()

            def _one_request(self) -> None:
                watchdog = threading.Timer(deadline, self._expire)
                watchdog.daemon = True
                watchdog.start()
                try:
                    self.handle_one_request()
                finally:
                    watchdog.cancel()

            def _expire(self) -> None:
                log.debug("HTTP request from %s took longer than %.1f s: disconnected", self.client_address, deadline)
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

            def _authorized(self) -> bool:
                given = (self.headers.get("Authorization") or "").strip().encode()
                return hmac.compare_digest(given, expected)

            def _handle(self, method: str) -> None:
                url = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(url.query))
                reply: Reply | None = None
                body: Mapping[str, object] = {}
                length = 0
                authorized = self._authorized()
                if (method not in READ_ONLY_METHODS or url.path.startswith("/admin/")) and not authorized:
                    reply = _error(
                        "unauthorized",
                        f"{method} {url.path} needs the service's admin token (Authorization: Bearer TOKEN; "
                        "the token is in <data_dir>/_service.json, readable by the service's user only)",
                        1,
                        401,
                    )
                else:
                    length, reply = _content_length(self.headers, method)
                if reply is None and length:
                    data = self.rfile.read(length)
                    if len(data) < length:  # the client went away (or was cut off) mid-body
                        self.close_connection = True
                        return
                    try:
                        body = json.loads(data)
                    except ValueError as exc:
                        reply = _error("usage", f"request body is not JSON: {exc}", 2, 400)
                    else:
                        if not isinstance(body, dict):
                            reply = _error("usage", "request body must be a JSON object", 2, 400)
                body_unread = reply is not None and length == 0 and (
                    self.headers.get("Content-Length") not in (None, "0") or self.headers.get("Transfer-Encoding")
                )
                if reply is None:
                    reply = dispatch(routes, Request(method, url.path, query, body, authorized))
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                for name, value in reply.headers:
                    self.send_header(name, value)
                if reply.status == 401:
                    self.send_header("WWW-Authenticate", 'Bearer realm="sharedsub admin"')
                if body_unread:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                self.wfile.write(reply.body)

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                self._handle("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._handle("POST")

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                log.debug("%s %s", self.address_string(), format % args)

        server = _Server((self.host, self.port), _Handler, self.max_connections)
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(target=server.serve_forever, name="sharedsub-http", daemon=True)
        self._thread.start()
        return self.host, self.port

    @property
    def url(self) -> str:
        """``http://host:port`` of the bound server."""
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        """Stop serving and close the socket (requests in progress finish on their threads)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
