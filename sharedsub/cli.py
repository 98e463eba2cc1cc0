"""The ``sharedsub`` command line: serve, frontend, topics, subscriptions, backlog, selector.

Configuration is read here (and in jobs/*.main) only: conf/sharedsub.toml, then ``--config``,
then SHAREDSUB_* environment variables, then flags.

``subscriptions list|show``, ``backlog`` and ``selector check`` only read: they open the data
dir's Delta tables directly (sharedsub.inspection), whether or not a service runs on it. A
subscription is named by its key (as ``subscriptions list`` prints it), by
``<namespace>:<name>`` (namespace = the container-id, or ``global``) or by its bare name when
that is unique. ``--json`` prints one JSON document on stdout; otherwise a table for people.

Exit codes: 0 done; 1 failure; 2 usage or invalid input (bad flags, invalid topic name, invalid
selector, a subscription name matching several subscriptions: the candidates are printed);
3 not found (topic, subscription); 4 already exists.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from sharedsub.config import Settings, load_settings
from sharedsub.errors import SharedSubError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_EXISTS = 4


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", help="directory holding the tables (default: storage.data_dir, ./data)")
    p.add_argument("--config", help="TOML file with settings on top of conf/sharedsub.toml")


def _server_flags(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--host", help="listen address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="listen port (default 5672; 0 picks a free port)")
    p.add_argument("--auto-create-topics", action="store_true", default=None, help="create topics on first use")
    p.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING (default INFO)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="sharedsub", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("serve", help="run the AMQP front end and the embedded fan-out job")
    _server_flags(p)
    p = sub.add_parser("frontend", help="run the AMQP front end only (fan-out runs elsewhere)")
    _server_flags(p)
    topics = sub.add_parser("topics", help="create and list topics").add_subparsers(dest="action", required=True)
    p = topics.add_parser("create", help="create a topic")
    p.add_argument("name")
    _common(p)
    p = topics.add_parser("list", help="list topics")
    _common(p)
    _json(p)
    subs = sub.add_parser("subscriptions", help="list and show subscriptions (read-only)")
    actions = subs.add_subparsers(dest="action", required=True)
    p = actions.add_parser("list", help="subscriptions with consumers and backlog")
    _common(p)
    _json(p)
    p.add_argument("--all", action="store_true", help="include deleted subscriptions")
    p = actions.add_parser("show", help="one subscription: identity, generation, source, selector, consumers, backlog")
    p.add_argument("subscription", metavar="SUB", help="key, <namespace>:<name>, or a unique name")
    _common(p)
    _json(p)
    p = sub.add_parser("backlog", help="unacknowledged messages, bytes and oldest age (read-only)")
    p.add_argument("subscription", metavar="SUB", nargs="?", help="one subscription, per partition (default: all)")
    _common(p)
    _json(p)
    check = sub.add_parser("selector", help="JMS selectors").add_subparsers(dest="action", required=True)
    p = check.add_parser("check", help="parse and explain a selector")
    p.add_argument("expression", metavar="EXPR")
    _json(p)
    return parser


def _json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable output (one JSON document)")


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {
        "storage.data_dir": getattr(args, "data_dir", None),
        "server.host": getattr(args, "host", None),
        "server.port": getattr(args, "port", None),
        "server.auto_create_topics": getattr(args, "auto_create_topics", None),
    }
    return load_settings(args.config, os.environ, overrides)


def _log(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def _start_maintenance(settings: Settings) -> Any:
    """Start the table-maintenance thread (``[maintenance] interval`` > 0, local data dirs)."""
    from sharedsub.maintenance import MaintenanceThread

    if settings.maintenance.interval <= 0 or "://" in settings.data_dir:
        return None
    thread = MaintenanceThread(settings.data_dir, settings.maintenance)
    thread.start()
    return thread


def cmd_serve(args: argparse.Namespace, *, with_fanout: bool) -> int:
    """Run the front end (and the fan-out child) until SIGINT/SIGTERM."""
    from connectors.amqp.server import FrontEndServer
    from sharedsub.fanout_process import FanoutProcess

    settings = _settings(args)
    _log(args.log_level)
    # The reactor thread is CPU-bound Python; the committer and tailer threads call into Rust and
    # need the GIL briefly and often. A short switch interval keeps them from queuing behind the
    # reactor for 5 ms at every hand-over (measured: commits ~3x faster under publish load).
    sys.setswitchinterval(0.0005)
    if "://" not in settings.data_dir:
        os.makedirs(settings.data_dir, exist_ok=True)
    server = FrontEndServer(settings)
    host, port = server.listen()
    fanout = FanoutProcess(settings.data_dir, config=args.config) if with_fanout else None

    def on_signal(signum: int, _frame: Any) -> None:
        logging.getLogger("sharedsub").info("signal %d: stopping", signum)
        server.request_stop()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    def announce() -> None:
        if fanout is not None:
            fanout.start()
            import threading

            def wait() -> None:
                if fanout.wait_ready(settings.fanout.startup_timeout):
                    print(f"sharedsub ready amqp://{host}:{port}", flush=True)
                else:
                    logging.getLogger("sharedsub").error(
                        "fan-out job not running after %.0f s; stopping", settings.fanout.startup_timeout
                    )
                    server.request_stop()

            threading.Thread(target=wait, name="sharedsub-ready", daemon=True).start()
        else:
            print(f"sharedsub ready amqp://{host}:{port}", flush=True)

    maintenance = _start_maintenance(settings)
    try:
        server.run(on_started=announce)
    finally:
        if maintenance is not None:
            maintenance.stop()
        if fanout is not None:
            fanout.stop()
    logging.getLogger("sharedsub").info("stopped")
    return EXIT_OK


def cmd_topics(args: argparse.Namespace) -> int:
    """``topics create|list``."""
    from sharedsub.storage import delta

    settings = _settings(args)
    if args.action == "create":
        from sharedsub.storage.layout import is_valid_topic_name

        if not is_valid_topic_name(args.name):
            print(f"error: invalid topic name {args.name!r}: use [A-Za-z0-9][A-Za-z0-9._-]*", file=sys.stderr)
            return EXIT_USAGE
        path = delta.create_topic(settings.data_dir, args.name)
        print(f"created topic {args.name} at {path}")
        return EXIT_OK
    names = delta.list_topics(settings.data_dir)
    if args.json:
        print(json.dumps([{"name": n} for n in names]))
    else:
        for n in names:
            print(n)
    return EXIT_OK


def _progress(what: str) -> Callable[[int, int], None] | None:
    """A progress reporter on stderr for people (nothing when stderr is not a terminal)."""
    if not sys.stderr.isatty():
        return None

    def report(done: int, total: int) -> None:
        end = "\n" if done == total else ""
        print(f"\r{what} {done}/{total}", end=end, file=sys.stderr, flush=True)

    return report


def cmd_subscriptions(args: argparse.Namespace) -> int:
    """``subscriptions list|show``."""
    from sharedsub import inspection
    from sharedsub.cli_format import subscription_details, subscriptions_table

    settings = _settings(args)
    if args.action == "show":
        status = inspection.subscription_status(settings.data_dir, args.subscription)
        print(json.dumps(status.to_json(), indent=2) if args.json else subscription_details(status))
        return EXIT_OK
    found = inspection.list_subscriptions(
        settings.data_dir, include_deleted=args.all, progress=_progress("reading subscriptions")
    )
    print(json.dumps([s.to_json() for s in found], indent=2) if args.json else subscriptions_table(found))
    return EXIT_OK


def cmd_backlog(args: argparse.Namespace) -> int:
    """``backlog [SUB]``."""
    from sharedsub import inspection
    from sharedsub.cli_format import backlog_table, partitions_table

    settings = _settings(args)
    if args.subscription is not None:
        status = inspection.subscription_status(settings.data_dir, args.subscription)
        if args.json:
            print(json.dumps(status.to_json()["backlog"] | {"key": status.key, "name": status.display_name}, indent=2))
        else:
            print(partitions_table(status))
        return EXIT_OK
    found = inspection.list_subscriptions(settings.data_dir, progress=_progress("reading backlog"))
    if args.json:
        print(json.dumps([s.to_json()["backlog"] | {"key": s.key, "name": s.display_name} for s in found], indent=2))
    else:
        print(backlog_table(found))
    return EXIT_OK


def cmd_selector(args: argparse.Namespace) -> int:
    """``selector check EXPR``: 0 and an explanation when valid, 2 and the error when not."""
    from sharedsub.cli_format import selector_explanation
    from sharedsub.explain import explain_selector
    from sharedsub.selector import SelectorError

    try:
        explained = explain_selector(args.expression)
    except SelectorError as exc:
        if args.json:
            print(json.dumps({"selector": args.expression, "valid": False, "position": exc.position,
                              "expected": exc.expected, "found": exc.found, "error": exc.description}))
        print(f"error: {exc.description}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(explained.to_json(), indent=2) if args.json else selector_explanation(explained))
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``sharedsub`` console script."""
    args = build_parser().parse_args(argv)
    try:
        if args.command in ("serve", "frontend"):
            return cmd_serve(args, with_fanout=args.command == "serve")
        if args.command == "topics":
            return cmd_topics(args)
        if args.command == "subscriptions":
            return cmd_subscriptions(args)
        if args.command == "backlog":
            return cmd_backlog(args)
        if args.command == "selector":
            return cmd_selector(args)
    except SharedSubError as exc:
        print(f"error: {exc.description}", file=sys.stderr)
        from sharedsub.errors import AmbiguousSubscription, ConfigError, SubscriptionNotFound, TopicExists, TopicNotFound

        if isinstance(exc, TopicExists):
            return EXIT_EXISTS
        if isinstance(exc, (TopicNotFound, SubscriptionNotFound)):
            return EXIT_NOT_FOUND
        if isinstance(exc, (ConfigError, AmbiguousSubscription)):
            return EXIT_USAGE
        return EXIT_ERROR
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
