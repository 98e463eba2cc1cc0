"""Listener and reactor lifecycle of the front end.

``FrontEndServer.run()`` blocks on the engine loop (connectors/amqp/wire/engine_loop.py; main thread,
so signals reach it);
``request_stop()`` may be called from a signal handler or any thread and leads to a clean stop:
stop accepting, commit and settle everything already received, close connections, return.
``call(fn)`` runs ``fn`` on the reactor thread from any other thread (the admin endpoint's
calls) and waits for the result it gives.

Listeners (``[security]``, docs/security.md; connectors/amqp/wire/listener.py): while the users file
holds no user, anonymous clients are allowed (``anonymous = "auto"``) and TLS is off, ``[server]
port`` is served without a SASL layer of ours (proton's own answers: any client gets in, with SASL
ANONYMOUS or none). Otherwise our SASL layer serves it, and also ``[security] tls_port`` (amqps)
when that is not -1: TLS and SASL are done before the handler sees a connection, and who
authenticated is recorded in ``FrontEnd.identities``.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
from collections.abc import Callable
from typing import TypeVar

from connectors.amqp.arrow_pool import ArrowPoolRelease
from connectors.amqp.handler import FrontEnd, Operation
from connectors.amqp.parts import FrontEndParts
from connectors.amqp.reactor_gc import ReactorCollector
from connectors.amqp.wire.engine_loop import EngineLoop
from connectors.amqp.wire.listener import Listener, tls_context
from sharedsub.core.errors import ConfigError, ServiceUnavailable
from sharedsub.core.security.sasl_rules import PASSWORD_MECHANISMS, SaslPolicy, anonymous_allowed
from sharedsub.runtime.fanout_process import FanoutStatus
from sharedsub.runtime.users import UserStore, users_path

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class _Root(FrontEnd):
    """FrontEnd plus the stop sequence, which needs the loop and the listeners."""

    server: FrontEndServer

    def run_call(self, fn: Operation[_T], future: concurrent.futures.Future[_T]) -> None:
        """Run a :meth:`FrontEndServer.call` function; what it raises fails its future."""
        if not future.set_running_or_notify_cancel():
            return  # the caller gave up before the reactor got to it
        try:
            fn(self, future)
        except BaseException as exc:  # noqa: BLE001 (reported to the caller, which maps it to a reply)
            if not future.done():
                future.set_exception(exc)

    def begin_stop(self) -> None:
        """The stop sequence's first half (:meth:`FrontEndServer.request_stop`): stop accepting,
        fail what is outstanding, commit everything queued, then :meth:`finish_stop`."""
        srv = self.server
        for acceptor in (srv.acceptor, srv.tls_acceptor):
            if acceptor is not None:
                acceptor.close()
        srv.acceptor = srv.tls_acceptor = None
        # Deliveries still unsettled now fail (their consumers are about to be disconnected);
        # recording that before the committer drains keeps their delivery counts across a restart.
        self.dispatcher.fail_outstanding()
        # Blocks until every queued publish is committed; the results arrive as injected calls
        # ahead of the one below, so publishers are settled before connections close.
        self.committer.stop()
        srv.injector.call(self.finish_stop)

    def finish_stop(self) -> None:
        """The stop sequence's second half: stop the tailer, close every connection, end the loop."""
        self.tailer.stop()
        if self.server.pool_release is not None:
            self.server.pool_release.stop()
        if self.server.collector is not None:
            self.server.collector.stop(give_back=False)  # (ReactorCollector.stop: threads may still run)
        for conn in list(self.connections):
            conn.close()
        self.server.injector.close()
        # Give the closing frames a moment to leave before the loop ends.
        self.server.loop.schedule(0.2, self.server.loop.stop)


def _offered(policy: SaslPolicy) -> list[str]:
    """What ``policy`` offers a client, for the log (EXTERNAL only to verified certificates)."""
    return [
        *(["EXTERNAL"] if policy.external else []),
        *(m for m in PASSWORD_MECHANISMS if m in policy.mechanisms),
        *(["ANONYMOUS"] if policy.anonymous else []),
    ]


class FrontEndServer:
    """The AMQP listener of ``sharedsub frontend`` / ``serve``."""

    def __init__(self, parts: FrontEndParts, fanout_status: Callable[[], FanoutStatus] | None = None) -> None:
        """Serve with ``parts`` (connectors.amqp.parts.build_parts); ``fanout_status``: the
        embedded fan-out job's (``serve``), None when it runs elsewhere (``frontend``)."""
        settings = parts.settings
        self.settings = settings
        self.injector = parts.injector
        self.handler = _Root(parts)
        self.handler.server = self
        self.loop = EngineLoop(self.handler, injector=self.injector)
        self.acceptor: Listener | None = None
        self.tls_acceptor: Listener | None = None
        self.host = settings.server.host
        self.port = settings.server.port
        self.tls_port: int | None = None  # the amqps port once listening; None: no TLS listener
        self.pool_release: ArrowPoolRelease | None = None  # started by run()
        self.collector: ReactorCollector | None = None  # started by run()
        self.users: UserStore | None = None
        self.anonymous = True  # anonymous clients allowed (decided in listen())
        self._stopping = False
        # State of the embedded fan-out job for /health and /metrics (sharedsub.runtime.fanout_process
        # FanoutProcess.status); None under ``frontend`` (the job runs elsewhere).
        self.fanout_status = fanout_status
        # The membership (connectors/amqp/cluster_port.py): consumers on other members, /health's member.
        self.cluster = parts.cluster

    def listen(self) -> tuple[str, int]:
        """Bind the listeners; return the actual (host, port) of the amqp one (port 0 picks a
        free one; the amqps port is then in :attr:`tls_port`).

        Raises:
            ConfigError: a [security] file cannot be read (users file, certificate, key, CA), or
                the amqps port cannot be bound.
        """
        sec = self.settings.security
        self.users = UserStore(users_path(self.settings.data_dir, sec.users_file))
        have_users = bool(self.users.names)
        self.anonymous = anonymous_allowed(sec.anonymous_mode, have_users)
        tls = tls_context(sec) if sec.tls_port >= 0 else None
        self.handler.start()
        identities = self.handler.identities
        if tls is None and self.anonymous and not have_users:
            self.acceptor = Listener(self.loop, self.host, self.port, identities=identities)
            self.port = self.acceptor.port
            log.info("listening on %s; anonymous clients allowed (no users in %s)", self.url, self.users.path,
                     extra={"amqp_port": self.port, "anonymous": True})
            return self.host, self.port
        policy = SaslPolicy(
            users=self.users.lookup,
            mechanisms=sec.mechanism_list,
            anonymous=self.anonymous,
            external=sec.external,
            external_user=self._external_user,
        )
        listener = functools.partial(
            Listener,
            policy=policy,
            identities=identities,
            auth_timeout=sec.auth_timeout,
            max_authenticating=sec.max_authenticating,
        )
        self.acceptor = listener(self.loop, self.host, self.port)
        self.port = self.acceptor.port
        if tls is not None:
            try:
                self.tls_acceptor = listener(self.loop, self.host, sec.tls_port, tls=tls)
            except OSError as exc:
                self.acceptor.close()
                self.handler.stop()
                raise ConfigError("security.tls_port", f"cannot listen on {self.host}:{sec.tls_port}: {exc}") from None
            self.tls_port = self.tls_acceptor.port
        listeners = " and ".join(u for u in (self.url, self.tls_url) if u)
        log.info(
            "listening on %s; SASL %s; anonymous clients %s; %d users in %s",
            listeners,
            ", ".join(_offered(policy)),
            "allowed" if self.anonymous else "refused",
            len(self.users.names),
            self.users.path,
            extra={"amqp_port": self.port, "amqps_port": self.tls_port, "anonymous": self.anonymous},
        )
        return self.host, self.port

    def _external_user(self, common_name: str) -> str | None:
        """SASL EXTERNAL: the client certificate's subject CN, when the users file holds that user."""
        assert self.users is not None
        return common_name if self.users.lookup(common_name) else None

    @property
    def url(self) -> str:
        """amqp:// URL clients connect to."""
        return f"amqp://{self.host}:{self.port}"

    @property
    def tls_url(self) -> str | None:
        """amqps:// URL of the TLS listener, or None when there is none."""
        return None if self.tls_port is None else f"amqps://{self.host}:{self.tls_port}"

    def run(self, on_started: Callable[[], None] | None = None) -> None:
        """Serve until :meth:`request_stop`."""
        if self.acceptor is None:
            self.listen()
        self.pool_release = ArrowPoolRelease(self.loop)
        self.loop.schedule(self.pool_release.interval, self.pool_release)
        # Cycles are freed on this thread only. Taken over before ``on_started`` starts the
        # fan-out's child: a fork with a preexec_fn under way would give collection back after
        # it (connectors/amqp/reactor_gc.py).
        self.collector = ReactorCollector(self.loop)
        self.collector.start()
        if on_started is not None:
            on_started()
        try:
            self.loop.run()
        finally:
            if not self._stopping:
                self.handler.stop()

    def call(self, fn: Operation[_T], timeout: float = 30.0) -> _T:
        """Run ``fn(front_end, future)`` on the reactor thread and return the future's result.

        ``fn`` completes ``future`` with ``set_result``/``set_exception``, at once or later from
        a reactor continuation (e.g. once a catalog commit is done); an exception ``fn`` raises
        fails it. Any thread but the reactor's (it would wait on itself).

        Raises:
            ServiceUnavailable: the service is stopping, or no result within ``timeout`` seconds.
            Whatever ``fn`` set as the future's exception.
        """
        if self._stopping:
            raise ServiceUnavailable("the service is stopping")
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()
        self.injector.call(functools.partial(self.handler.run_call, fn, future))
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ServiceUnavailable(f"the service did not complete the request within {timeout:.0f} s") from None

    def request_stop(self) -> None:
        """Begin a clean stop (safe from signal handlers and other threads)."""
        if self._stopping:
            return
        self._stopping = True
        self.injector.call(self.handler.begin_stop)
