"""The service's life cycle: everything ``sharedsub serve`` and ``sharedsub frontend`` do between
reading the settings and exiting.

In order: logging, the exposure check (refuse anonymous clients on a network address unless
configured), a writable data dir, the data dir's ownership lock, the AMQP listener(s), the HTTP
endpoint, ``<data>/_service.json``, the fan-out child (``serve`` only), the maintenance thread, then
the reactor until SIGINT/SIGTERM; on the way out each part stops in reverse and the service file
is removed. This module is the composition root: it alone builds the service from its parts
(tests/unit/test_layering.py places it, with the CLI, above the adapters).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
import types
from collections.abc import Callable

from connectors.amqp.operations import FrontEndOperations
from connectors.amqp.parts import build_parts
from connectors.amqp.server import FrontEndServer
from connectors.amqp.wire import reactor_thread
from connectors.http.admin import AdminHttpServer
from connectors.http.endpoints import build_routes
from sharedsub.core import layout
from sharedsub.core.config import Settings
from sharedsub.core.errors import ConfigError, DataDirInUse, FanoutInUse, SharedSubError, StorageUnavailable, StoreUnusable
from sharedsub.core.ops.admin_rules import EXIT_ERROR, EXIT_OK
from sharedsub.core.ops.gc_tuning import tune_for_serving
from sharedsub.core.publish.write_faults import fault_errno
from sharedsub.core.security.exposure import is_loopback, open_warning, refusal
from sharedsub.runtime.cluster.data_dir_owner import DataDirLock, own_data_dir, own_fanout
from sharedsub.runtime.discovery import (
    ServiceInfo,
    pid_alive,
    read_service_file,
    remove_service_file,
    write_service_file,
)
from sharedsub.runtime.fanout_process import FanoutProcess
from sharedsub.runtime.maintenance import MaintenanceThread, SettledBelow
from sharedsub.runtime.permissions_file import PolicyStore
from sharedsub.runtime.process import console
from sharedsub.runtime.process.logformat import configure_logging
from sharedsub.runtime.process.memprofile import start_from_env
from sharedsub.runtime.users import load_users, users_path
from sharedsub.storage import diskspace
from sharedsub.storage.objects.locations import locate
from sharedsub.storage.objects.probe import probe_store
from sharedsub.storage.objects.store import StoreFailure
from sharedsub.storage.owner_only import ensure_data_dir, open_to_others


def configure_logging_from(settings: Settings) -> None:
    """Configure this process's logging from ``[log]`` and hand the same to the fan-out child."""
    configure_logging(settings.log.level, settings.log.format)
    # The fan-out child reads its settings from the same config and environment; flags reach it
    # as the SHAREDSUB_LOG_* variables they override.
    os.environ["SHAREDSUB_LOG_FORMAT"] = settings.log.format
    os.environ["SHAREDSUB_LOG_LEVEL"] = settings.log.level


def start_http(server: FrontEndServer, settings: Settings) -> AdminHttpServer | None:
    """Start the HTTP endpoint (metrics, health, admin) unless ``[server] http_port`` is -1.

    Raises:
        ConfigError: the address cannot be bound (names the key).
    """
    if settings.server.http_port < 0:
        return None
    # Loopback unless http_host is set: GET /health and /metrics need no token.
    host = settings.server.http_host or "127.0.0.1"
    http = AdminHttpServer(
        host,
        settings.server.http_port,
        build_routes(FrontEndOperations(server)),
        request_timeout=settings.server.http_request_timeout,
        max_connections=settings.server.http_max_connections,
    )  # a random admin token, recorded in _service.json (0600) for the CLI
    try:
        http.start()
    except OSError as exc:
        raise ConfigError("server.http_port", f"cannot listen on {host}:{settings.server.http_port}: {exc}") from None
    logging.getLogger("sharedsub").info(
        "metrics and admin on %s", http.url, extra={"http_host": http.host, "http_port": http.port}
    )
    return http


def announce_service(
    settings: Settings, host: str, port: int, http: AdminHttpServer | None, tls_port: int | None = None, slot: int = 0
) -> None:
    """Write ``<data>/_service.json`` (member ``slot``'s): pid, the amqp (and amqps,
    ``tls_port``) and HTTP addresses, the admin token (sharedsub.runtime.discovery)."""
    info = ServiceInfo(
        os.getpid(),
        host,
        port,
        http.host if http else None,
        http.port if http else None,
        time.time(),
        admin_token=http.token if http else None,
        amqps_port=tls_port,
    )
    try:
        write_service_file(settings.data_dir, info, slot)
    except OSError as exc:
        logging.getLogger("sharedsub").warning("could not write %s/_service.json: %s", settings.data_dir, exc)


def previous_stop_was_unclean(settings: Settings, slot: int = 0) -> bool:
    """True when the last front end on the data dir (in member ``slot``) died without its clean
    stop: its ``_service.json`` (removed by a clean stop) is still there and its process is gone."""
    previous = read_service_file(settings.data_dir, slot)
    unclean = previous is not None and previous.pid != os.getpid() and not pid_alive(previous.pid)
    if unclean:
        logging.getLogger("sharedsub").warning(
            "the previous front end (pid %d) did not stop cleanly: backlog messages go out marked redelivered",
            previous.pid,  # type: ignore[union-attr]
        )
    return unclean


def start_maintenance(settings: Settings, settled_below: SettledBelow | None = None) -> MaintenanceThread | None:
    """Start the table-maintenance thread (``[maintenance] interval`` > 0);
    ``settled_below``: the front end's word on its non-durable subscriptions (maintenance.run_once)."""
    if settings.maintenance.interval <= 0:
        return None
    thread = MaintenanceThread(settings.data_dir, settings.maintenance, settled_below)
    thread.start()
    return thread


def host_is_loopback(host: str) -> bool:
    """``[server] host`` is a loopback address, or a name that resolves to loopback only."""
    if is_loopback(host):
        return True
    try:
        addresses = [str(info[4][0]) for info in socket.getaddrinfo(host, None)] if host else []
    except OSError:
        addresses = []
    return is_loopback(host, addresses)


def refuse_anonymous_network(settings: Settings) -> bool:
    """Secure by default (sharedsub.core.security.exposure): refuse to serve anonymous clients on a network
    address unless ``[security] anonymous = "true"`` says so; return whether the host is loopback.

    Raises:
        ConfigError: ``[server] host`` is not loopback, the users file holds no user and
            ``anonymous`` is ``"auto"`` (exit 2; the line names the settings).
    """
    host = settings.server.host
    loopback = host_is_loopback(host)
    if loopback:
        return True
    path = users_path(settings.data_dir, settings.security.users_file)
    problem = refusal(host, loopback, bool(load_users(path)), settings.security.anonymous_mode, path)
    if problem is not None:
        raise ConfigError("server.host", problem)
    return False


def require_writable(data_dir: str) -> None:
    """Refuse to start on a local data dir that does not take writes: every publish would be
    held and then refused, so say so now (exit 6) instead of at the first publish.

    Raises:
        StorageUnavailable: no space left, over quota, or a read-only file system.
    """
    try:
        ensure_data_dir(data_dir)  # 0700 when this creates it
        diskspace.probe_write(data_dir)
    except OSError as exc:
        code = fault_errno(exc)
        if code is None:
            raise
        raise StorageUnavailable(data_dir, code, os.strerror(code)) from None
    mode = open_to_others(data_dir)
    if mode is not None:
        logging.getLogger("sharedsub").warning(
            "the data dir %s has mode %o: other users of this machine may read its messages; "
            "chmod 700 it (a data dir sharedsub creates is 0700)", data_dir, mode
        )


def require_store(data_dir: str) -> None:
    """Refuse to start on a data dir on object storage that cannot be used (exit 6): unreachable,
    credentials refused, no bucket, conditional writes ignored (sharedsub.storage.objects.probe).

    Raises:
        StoreUnusable: the line names what is wrong and the setting to check.
    """
    store, key = locate(data_dir)
    probe_store(store, key, data_dir=data_dir)


def take_data_dir(data_dir: str, max_members: int = 1) -> DataDirLock:
    """Check that the data dir takes writes (a local dir) or can be used (object storage), then
    own it (a flock, or one of ``max_members`` member slots' leases).

    Raises:
        StorageUnavailable, StoreUnusable: it cannot take writes, or its store cannot be used.
        DataDirInUse: another live front end owns it.
    """
    if layout.local_path(data_dir) is not None:
        require_writable(data_dir)
    else:
        require_store(data_dir)
    try:
        return own_data_dir(data_dir, max_members=max_members)
    except StoreFailure as exc:
        raise StoreUnusable(data_dir, str(exc)) from None


def take_fanout_lease(data_dir: str, owner: DataDirLock, *, embedded: bool) -> DataDirLock:
    """On object storage with an ``embedded`` fan-out, its lease, held by the front end (the
    child writes under its epoch), so that whoever takes this data dir over takes its fan-out
    too; otherwise a lock that holds nothing. Gives ``owner`` up when it fails.

    Raises:
        FanoutInUse: a fan-out job elsewhere holds it.
        StoreUnusable: the store did not answer.
    """
    try:
        lease = own_fanout(data_dir) if embedded else None
    except DataDirInUse as exc:
        owner.release()
        raise FanoutInUse(data_dir, exc.pid, exc.host) from None
    except StoreFailure as exc:
        owner.release()
        raise StoreUnusable(data_dir, str(exc)) from None
    return lease if lease is not None else DataDirLock(None)


def fanout_child(
    settings: Settings, config: str | None, wake_tailer: Callable[[frozenset[str] | None], None], lease: DataDirLock
) -> FanoutProcess:
    """The embedded fan-out job's supervisor (not started). On object storage it writes under
    ``lease``'s epoch. Each micro-batch that wrote rows calls ``wake_tailer`` with the tables it
    wrote (sharedsub.core.fanout.routed_tables): the tailer probes those at once and backs off on
    the others while they stay idle."""
    return FanoutProcess(
        settings.data_dir,
        config=config,
        startup_timeout=settings.fanout.startup_timeout,
        on_routed=wake_tailer,
        extra_args=["--lease-epoch", str(lease.epoch)] if lease.epoch is not None else None,
    )


def run(settings: Settings, *, config: str | None, with_fanout: bool) -> int:
    """Run the front end (and, ``with_fanout``, the fan-out child) until SIGINT/SIGTERM; the exit code.

    ``config`` is the ``--config`` file the fan-out child reads its settings from (it gets the
    same environment, so flags reach it as the SHAREDSUB_LOG_* variables ``configure_logging_from``
    sets).

    Raises:
        SharedSubError: the service cannot start (configuration, a data dir in use or not
            writable, an address that cannot be bound): the CLI prints it and exits with its code.
    """
    configure_logging_from(settings)
    start_from_env(os.environ)  # off unless SHAREDSUB_TRACEMALLOC_DIR is set (diagnosis)
    reactor_thread.install_from_env(os.environ)  # off unless SHAREDSUB_PROTON_THREAD_CHECK is set (debug)
    # The reactor thread is CPU-bound Python; the committer and tailer threads call into Rust and
    # need the GIL briefly and often. A short switch interval keeps them from queuing behind the
    # reactor for 5 ms at every hand-over (measured: commits ~3x faster under publish load).
    sys.setswitchinterval(0.0005)
    loopback = refuse_anonymous_network(settings)
    owner = take_data_dir(settings.data_dir, settings.cluster.max_members)  # held until the process ends
    fanout_lease = take_fanout_lease(settings.data_dir, owner, embedded=with_fanout)
    stopped_by: list[str] = []  # why the service stopped itself, if it did (a lost lease, a fence)

    def fail_stop(reason: str) -> None:  # another thread (the lease's, the committer's)
        logging.getLogger("sharedsub").error("stopping: %s (data dir %s)", reason, settings.data_dir)
        stopped_by.append(reason)
        server.request_stop()

    parts = build_parts(
        settings,
        epoch=owner.epoch,
        partition=owner.slot,
        on_fenced=fail_stop,
        lapsed=owner.lapsed,
        after_unclean_stop=previous_stop_was_unclean(settings, owner.slot),
        # A missing or broken permissions file raises ConfigError here: never start more open.
        permissions=PolicyStore(settings.security.permissions_file),
        announced=with_fanout,
    )
    fanout = fanout_child(settings, config, parts.tailer.hint, fanout_lease) if with_fanout else None
    server = FrontEndServer(parts, fanout_status=fanout.status if fanout is not None else None)
    owner.when_lost(lambda reason: fail_stop(f"lost the owner lease: {reason}"))  # (sharedsub.core.ownership.lease)
    fanout_lease.when_lost(lambda reason: fail_stop(f"lost the fan-out lease: {reason}"))
    host, port = server.listen()
    warning = open_warning(host, loopback, server.anonymous, [u for u in (server.url, server.tls_url) if u])
    if warning is not None:
        logging.getLogger("sharedsub").warning(warning, extra={"anonymous": True})
    try:
        http = start_http(server, settings)
    except SharedSubError:
        server.handler.stop()
        raise
    announce_service(settings, host, port, http, server.tls_port, owner.slot)
    owner.announce(server.url, http.url if http else None)
    membership = parts.cluster.membership  # started with the loop, stopped after it
    fanout_failed = False

    def on_signal(signum: int, _frame: types.FrameType | None) -> None:
        logging.getLogger("sharedsub").info("signal %d: stopping", signum)
        server.request_stop()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    # The amqp URL stays the third word (tests/service.py reads it); the amqps one follows when on.
    # One write (sharedsub.runtime.process.console): the relay and logging write to the same pipe meanwhile.
    ready_line = " ".join(u for u in ("sharedsub ready", server.url, server.tls_url) if u)

    def announce() -> None:
        membership.start(server.url)
        if fanout is not None:
            fanout.start()

            def wait() -> None:
                # The supervisor bounds the start (attempts, each with its timeout); the front end
                # serves meanwhile, and a slow first micro-batch no longer ends the service.
                nonlocal fanout_failed
                if fanout.wait_started():
                    console.out(ready_line)
                else:
                    fanout_failed = True
                    logging.getLogger("sharedsub").error("%s; stopping", fanout.failure)
                    server.request_stop()

            threading.Thread(target=wait, name="sharedsub-ready", daemon=True).start()
        else:
            console.out(ready_line)

    # With several members, the member in slot 0 maintains the tables (one at a time: two
    # compactions of a table would conflict); a slot 0 left by a dead member is taken first.
    maintains = owner.slot == 0
    maintenance = start_maintenance(settings, server.handler.dispatcher.first_open_in_memory) if maintains else None
    if settings.server.gc_tuning:
        tune_for_serving()  # start-up is done: what it built is permanent (sharedsub.core.ops.gc_tuning)
    try:
        server.run(on_started=announce)
    finally:
        if http is not None:
            http.stop()
        remove_service_file(settings.data_dir, os.getpid(), owner.slot)
        if maintenance is not None:
            maintenance.stop()
        if fanout is not None:
            fanout.stop()
        membership.stop()
    fanout_lease.release()
    owner.release()
    logging.getLogger("sharedsub").info("stopped")
    return EXIT_ERROR if fanout_failed or stopped_by else EXIT_OK
