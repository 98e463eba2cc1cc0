"""The HTTP endpoint of ``sharedsub serve`` / ``frontend``: metrics, health and admin calls.

A stdlib ``ThreadingHTTPServer`` on a daemon thread (one thread per request), listening on
``[server] http_host``:``http_port`` (0 = a free port; -1 = off; see conf/sharedsub.toml). It
knows nothing about sharedsub: it dispatches on a **route table**, a dict
``(method, path) -> handler``, and turns what handlers return or raise into HTTP replies.

Contracts:

* A handler is ``handler(request: Request) -> Reply``. ``request.body`` is the parsed JSON
  object of a POST (``{}`` when empty); a body that is not a JSON object is answered 400 before
  any handler runs.
* A handler that raises a :class:`~sharedsub.errors.SharedSubError` gets the JSON error reply of
  :func:`sharedsub.admin_rules.error_body` (``{"ok": false, "error": CODE, "exit_code": N,
  "message": ...}``) with the status of that code (:data:`sharedsub.admin_rules.ERROR_CODES`);
  anything else is logged and answered 500 with code ``error``. Success replies of admin calls
  are ``{"ok": true, ...}`` (:meth:`Reply.json`).
* Unknown paths are 404 (``not-found``); a known path with another method is 405.
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
import json
import logging
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sharedsub.admin_rules import error_body, http_status
from sharedsub.errors import SharedSubError

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """One HTTP request as a handler sees it."""

    method: str
    path: str
    query: Mapping[str, str]
    body: Mapping[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class Reply:
    """What a handler answers."""

    status: int
    body: bytes
    content_type: str = "application/json"

    @classmethod
    def json(cls, document: Any, status: int = 200) -> Reply:
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


class AdminHttpServer:
    """The HTTP server; :meth:`start` binds and serves on a daemon thread, :meth:`stop` ends it."""

    def __init__(self, host: str, port: int, routes: Routes | None = None) -> None:
        self.host = host
        self.port = port
        self.routes: Routes = dict(routes or {})
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def add_route(self, method: str, path: str, handler: Handler) -> None:
        """Add (or replace) the handler of ``method path``; safe while serving."""
        self.routes[(method.upper(), path)] = handler

    def start(self) -> tuple[str, int]:
        """Bind (``port`` 0 picks a free one) and serve; return the bound (host, port).

        Raises:
            OSError: the address cannot be bound.
        """
        routes = self.routes

        class _Handler(BaseHTTPRequestHandler):
            server_version = "sharedsub"
            protocol_version = "HTTP/1.1"

            def _handle(self, method: str) -> None:
                url = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(url.query))
                length = int(self.headers.get("Content-Length") or 0)
                reply: Reply | None = None
                body: Any = {}
                if length > MAX_BODY_BYTES:
                    reply = _error("usage", f"request body larger than {MAX_BODY_BYTES} bytes", 2, 413)
                elif length:
                    try:
                        body = json.loads(self.rfile.read(length))
                    except ValueError as exc:
                        reply = _error("usage", f"request body is not JSON: {exc}", 2, 400)
                    else:
                        if not isinstance(body, dict):
                            reply = _error("usage", "request body must be a JSON object", 2, 400)
                if reply is None:
                    reply = dispatch(routes, Request(method, url.path, query, body))
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                if length > MAX_BODY_BYTES:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                self.wfile.write(reply.body)

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                self._handle("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._handle("POST")

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                log.debug("%s %s", self.address_string(), format % args)

        server = ThreadingHTTPServer((self.host, self.port), _Handler)
        server.daemon_threads = True
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
