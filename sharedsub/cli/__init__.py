"""The ``sharedsub`` command line: serve, frontend, topics, subscriptions, backlog, selector.

Configuration is read here (and in jobs/*.main) only: sharedsub/core/defaults.toml, then ``--config``,
then SHAREDSUB_* environment variables, then flags.

``subscriptions list|show``, ``backlog`` and ``selector check`` only read: they open the data
dir's Delta tables directly (sharedsub.runtime.inspection), whether or not a service runs on it. A
subscription is named by its key (as ``subscriptions list`` prints it), by
``<namespace>:<name>`` (namespace = the container-id, or ``global``) or by its bare name when
that is unique. ``--json`` prints one JSON document on stdout; otherwise a table for people.

``unsubscribe SUB`` and ``topics drop NAME`` change things: when a service runs on the data dir
(``<data>/_service.json`` names a live pid) they are calls to its HTTP admin endpoint, decided
on its reactor thread against the links attached right now; when none runs they change the
tables directly and say so ("offline"). Both follow sharedsub.core.ops.admin_rules.

Exit codes (sharedsub.core.ops.admin_rules): 0 done; 1 failure; 2 usage or invalid input (bad flags,
invalid topic name, invalid selector, a subscription name matching several subscriptions: the
candidates are printed); 3 not found (topic, subscription); 4 already exists; 5 refused: in use
(``unsubscribe`` while consumers are attached, ``topics drop`` of a topic with subscriptions,
consumers or publishers); 6 the data dir does not take writes (``serve``/``frontend`` on a full or
read-only data dir).

``users add|remove|list`` edit the users file (``[security] users_file``, sharedsub.runtime.users): 4 when
``add`` names a user already there, 3 when ``remove`` names none, 2 for an invalid name or empty
password. No command ever prints a password or a stored key.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from sharedsub.core.config import Settings, load_settings
from sharedsub.core.errors import SharedSubError, StoreUnusable
from sharedsub.core.layout import local_path
from sharedsub.core.ops.admin_rules import (
    EXIT_ERROR,
    EXIT_EXISTS,
    EXIT_IN_USE,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_STORAGE,
    EXIT_USAGE,
    exit_code,
)
from sharedsub.runtime.process import console
from sharedsub.storage.objects.store import StoreFailure

__all__ = ["EXIT_ERROR", "EXIT_EXISTS", "EXIT_IN_USE", "EXIT_NOT_FOUND", "EXIT_OK", "EXIT_STORAGE", "EXIT_USAGE", "main"]

EPILOG = """exit codes: 0 done, 1 failure, 2 usage or invalid input (or an ambiguous subscription name),
3 not found, 4 already exists, 5 refused: in use (consumers, publishers or subscriptions attached),
6 the data dir does not take writes (no space left, over quota, read-only file system)"""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", help="directory holding the tables (default: storage.data_dir, ./data)")
    p.add_argument("--config", help="TOML file with settings on top of sharedsub/core/defaults.toml")


def _server_flags(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument(
        "--host", help="listen address (default 127.0.0.1; one not on loopback needs users or [security] anonymous = true)"
    )
    p.add_argument("--port", type=int, help="listen port (default 5672; 0 picks a free port)")
    p.add_argument("--auto-create-topics", action="store_true", default=None, help="create topics on first use")
    p.add_argument("--log-level", help="DEBUG, INFO, WARNING, ERROR (default: [log] level, INFO)")
    p.add_argument(
        "--log-format", choices=("text", "json"), help="log lines as text or one JSON object each (default: [log] format)"
    )
    p.add_argument("--http-host", help="HTTP endpoint address (default: [server] http_host, 127.0.0.1)")
    p.add_argument(
        "--http-port", type=int, help="HTTP endpoint port: metrics, health, admin (default 0 = a free port; -1 = off)"
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="sharedsub", description=__doc__.splitlines()[0], epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
    p = topics.add_parser(
        "drop", help="delete a topic (refused while it has subscriptions, unless --force)", epilog=EPILOG
    )
    p.add_argument("name")
    p.add_argument("--force", action="store_true", help="also delete the topic's subscriptions (none may have consumers)")
    _admin(p)
    p = sub.add_parser(
        "unsubscribe", help="delete a subscription (refused while consumers are attached)", epilog=EPILOG
    )
    p.add_argument("subscription", metavar="SUB", help="key, <namespace>:<name>, or a unique name")
    _admin(p)
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
    cluster = sub.add_parser("cluster", help="the front ends sharing a data dir (read-only)")
    p = cluster.add_subparsers(dest="action", required=True).add_parser(
        "status", help="members (slots, epochs, addresses), the fan-out's lease, topic partitions"
    )
    _common(p)
    _json(p)
    _replay_parser(sub)
    _users_parser(sub)
    return parser


def _admin(p: argparse.ArgumentParser) -> None:
    _common(p)
    _json(p)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a running service (default 60)")


def _json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable output (one JSON document)")


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, object] = {
        "storage.data_dir": getattr(args, "data_dir", None),
        "server.host": getattr(args, "host", None),
        "server.port": getattr(args, "port", None),
        "server.auto_create_topics": getattr(args, "auto_create_topics", None),
        "server.http_host": getattr(args, "http_host", None),
        "server.http_port": getattr(args, "http_port", None),
        "log.level": getattr(args, "log_level", None),
        "log.format": getattr(args, "log_format", None),
    }
    settings = load_settings(args.config, os.environ, overrides)
    # Every table under the data dir is reached with its [storage] options from here on.
    from sharedsub.storage.objects.locations import register

    register(settings.storage.data_dir, settings.storage.options)
    return settings


def cmd_topics(args: argparse.Namespace) -> int:
    """``topics create|list``."""
    from sharedsub.storage.topics import create_topic, list_topics

    settings = _settings(args)
    if args.action == "drop":
        return _admin_call(
            args,
            settings,
            "/admin/topics/drop",
            {"topic": args.name, "force": args.force},
            lambda: _offline().drop_topic(
                settings.data_dir, args.name, force=args.force, progress=_progress("deleting subscriptions")
            ),
        )
    if args.action == "create":
        from sharedsub.core.layout import topic_name_problem

        problem = topic_name_problem(args.name)
        if problem is not None:
            console.err(f"error: {problem}")
            return EXIT_USAGE
        path = create_topic(settings.data_dir, args.name)
        console.out(f"created topic {args.name} at {path}")
        return EXIT_OK
    names = list_topics(settings.data_dir)
    if args.json:
        console.out(json.dumps([{"name": n} for n in names]))
    else:
        for n in names:
            console.out(n)
    return EXIT_OK


def _progress(what: str) -> Callable[[int, int], None] | None:
    """A progress reporter on stderr for people (nothing when stderr is not a terminal)."""
    if not sys.stderr.isatty():
        return None

    def report(done: int, total: int) -> None:
        end = "\n" if done == total else ""
        console.write(sys.stderr, f"\r{what} {done}/{total}{end}")  # one write: a line of logging may come meanwhile

    return report


# Any: the lazily imported sharedsub.runtime.offline_admin module (no type of a module object keeps its functions)
def _offline() -> Any:
    from sharedsub.runtime import offline_admin

    return offline_admin


def _done_line(result: dict[str, Any], where: str) -> str:  # Any: an admin reply (json.loads's), read by key
    if "subscription" in result:
        sub = result["subscription"]
        return f"unsubscribed {sub['name']} (key {sub['key']}, generation {sub['generation']}, topic {sub['topic']}) {where}"
    deleted = result.get("deleted_subscriptions") or []
    also = f" and its {len(deleted)} subscription(s): " + ", ".join(d["name"] for d in deleted) if deleted else ""
    return f"dropped topic {result['topic']}{also} {where}"


def _admin_call(
    args: argparse.Namespace,
    settings: Settings,
    path: str,
    body: dict[str, object],
    offline: Callable[[], dict[str, object]],
) -> int:
    """Run an admin command through the running service, or ``offline()`` when none runs."""
    from sharedsub.core.ops.admin_rules import error_body, error_from_body
    from sharedsub.runtime.discovery import call_admin, running_service

    service = running_service(settings.data_dir)
    if service is not None:
        if sys.stderr.isatty():
            console.err(f"asking the service (pid {service.pid})...")
        result = call_admin(service, path, body, timeout=args.timeout)
        mode: dict[str, object] = {"mode": "service", "pid": service.pid}
        where = f"through the running service (pid {service.pid})"
        if not result.get("ok"):
            code, message = error_from_body(result)
            if args.json:
                console.out(json.dumps(result | mode))
            console.err(f"error: {message}")
            return code
    else:
        mode = {"mode": "offline"}
        where = f"offline: no service runs on {settings.data_dir}; the tables were changed directly"
        try:
            result = offline()
        except SharedSubError as exc:
            if args.json:
                console.out(json.dumps(error_body(exc) | mode))
            raise
    console.out(json.dumps(result | mode) if args.json else _done_line(result, where))
    return EXIT_OK


def cmd_unsubscribe(args: argparse.Namespace) -> int:
    """``unsubscribe SUB``: delete a subscription (refused with exit 5 while consumers are attached)."""
    settings = _settings(args)
    return _admin_call(
        args,
        settings,
        "/admin/unsubscribe",
        {"subscription": args.subscription},
        lambda: _offline().unsubscribe(settings.data_dir, args.subscription),
    )


def cmd_subscriptions(args: argparse.Namespace) -> int:
    """``subscriptions list|show``."""
    from sharedsub.cli.format import subscription_details, subscriptions_table
    from sharedsub.runtime import inspection

    settings = _settings(args)
    if args.action == "show":
        status = inspection.subscription_status(settings.data_dir, args.subscription)
        console.out(json.dumps(status.to_json(), indent=2) if args.json else subscription_details(status))
        return EXIT_OK
    found = inspection.list_subscriptions(
        settings.data_dir, include_deleted=args.all, progress=_progress("reading subscriptions")
    )
    console.out(json.dumps([s.to_json() for s in found], indent=2) if args.json else subscriptions_table(found))
    return EXIT_OK


def cmd_cluster(args: argparse.Namespace) -> int:
    """``cluster status``."""
    from sharedsub.cli.format import cluster_report
    from sharedsub.runtime.cluster.cluster_status import cluster_status

    status = cluster_status(_settings(args).data_dir)
    console.out(json.dumps(status.to_json(), indent=2) if args.json else cluster_report(status))
    return EXIT_OK


def cmd_backlog(args: argparse.Namespace) -> int:
    """``backlog [SUB]``."""
    from sharedsub.cli.format import backlog_table, partitions_table
    from sharedsub.runtime import inspection

    settings = _settings(args)
    if args.subscription is not None:
        status = inspection.subscription_status(settings.data_dir, args.subscription)
        if args.json:
            console.out(json.dumps(status.to_json()["backlog"] | {"key": status.key, "name": status.display_name}, indent=2))
        else:
            console.out(partitions_table(status))
        return EXIT_OK
    found = inspection.list_subscriptions(settings.data_dir, progress=_progress("reading backlog"))
    if args.json:
        console.out(json.dumps([s.to_json()["backlog"] | {"key": s.key, "name": s.display_name} for s in found], indent=2))
    else:
        console.out(backlog_table(found))
    return EXIT_OK


def cmd_selector(args: argparse.Namespace) -> int:
    """``selector check EXPR``: 0 and an explanation when valid, 2 and the error when not."""
    from sharedsub.cli.format import selector_explanation
    from sharedsub.core.fanout.explain import explain_selector
    from sharedsub.core.selector import SelectorError

    try:
        explained = explain_selector(args.expression)
    except SelectorError as exc:
        if args.json:
            console.out(json.dumps({"selector": args.expression, "valid": False, "position": exc.position,
                                    "expected": exc.expected, "found": exc.found, "error": exc.description}))
        console.err(f"error: {exc.description}")
        return EXIT_USAGE
    console.out(json.dumps(explained.to_json(), indent=2) if args.json else selector_explanation(explained))
    return EXIT_OK


# --------------------------------------------------------------------------- users
# ``users add|remove|list``: the users file ([security] users_file, default <data>/_users.json,
# sharedsub.runtime.users). A running service reads it again when it changes.


def _users_parser(sub: Any) -> None:  # Any: argparse's add_subparsers() returns a private class
    users = sub.add_parser(
        "users", help="users who may authenticate (SASL PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", epilog=EPILOG
    ).add_subparsers(dest="action", required=True)
    p = users.add_parser("add", help="add a user (asks for the password; stores only SCRAM keys)", epilog=EPILOG)
    p.add_argument("name")
    p.add_argument("--password-stdin", action="store_true", help="read the password from the first line of stdin")
    _common(p)
    p = users.add_parser("remove", help="remove a user", epilog=EPILOG)
    p.add_argument("name")
    _common(p)
    p = users.add_parser("list", help="list the users (names and mechanisms; never a secret)")
    _common(p)
    _json(p)


def _read_password(args: argparse.Namespace) -> str:
    """The new user's password: stdin's first line, or asked twice on the terminal.

    Raises:
        InvalidUser: no terminal and no --password-stdin, or the two entries differ.
    """
    import getpass

    from sharedsub.core.errors import InvalidUser

    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    if not sys.stdin.isatty():
        raise InvalidUser("no terminal to ask for the password: use --password-stdin")
    first = getpass.getpass(f"password for {args.name}: ")
    if getpass.getpass("again: ") != first:
        raise InvalidUser("the passwords differ")
    return first


def cmd_users(args: argparse.Namespace) -> int:
    """``users add|remove|list``."""
    from sharedsub.runtime import users as users_file

    settings = _settings(args)
    path = users_file.users_path(settings.data_dir, settings.security.users_file)
    current = users_file.load_users(path)
    if args.action == "list":
        if args.json:
            console.out(json.dumps([{"name": n, "mechanisms": sorted(current[n])} for n in sorted(current)]))
        else:
            for name in sorted(current):
                console.out(f"{name}\t{' '.join(sorted(current[name]))}")
        return EXIT_OK
    if args.action == "remove":
        users_file.save_users(path, users_file.remove_user(current, args.name))
        console.out(f"removed user {args.name} from {path}")
        return EXIT_OK
    if args.name in current:  # before asking for a password
        from sharedsub.core.errors import UserExists

        raise UserExists(args.name)
    updated = users_file.add_user(current, args.name, _read_password(args))
    users_file.save_users(path, updated)
    kept = "mode 0600" if local_path(path) is not None else "readable by who may read the bucket"
    console.out(f"added user {args.name} to {path} (SCRAM-SHA-256 and SCRAM-SHA-512 keys; {kept})")
    return EXIT_OK


# --------------------------------------------------------------------------- replay
# ``replay SUB --version V | --timestamp T``: through the running service only (sharedsub.cli.replay_client).


def _replay_parser(sub: Any) -> None:  # Any: as _users_parser
    p = sub.add_parser(
        "replay",
        help="re-deliver a durable subscription's messages from its Delta history (needs the running service)",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Re-deliver to the subscription's consumers what its table held at a version (or at the latest\n"
            "version committed at or before a time) and everything routed after, acknowledged or not, marked\n"
            "redelivered. History reaches back [maintenance] history_retention_hours (default 168); an older\n"
            "point is refused (exit 3) naming the oldest version still available."
        ),
    )
    p.add_argument("subscription", metavar="SUB", help="key, <namespace>:<name>, or a unique name")
    point = p.add_mutually_exclusive_group(required=True)
    point.add_argument("--version", type=int, metavar="V", help="a version of the subscription's generation table")
    point.add_argument("--timestamp", metavar="T", help="ISO-8601 time (no zone: UTC), e.g. 2026-01-31T12:00:00Z")
    _admin(p)
    p.set_defaults(timeout=120.0)


def cmd_replay(args: argparse.Namespace) -> int:
    """``replay SUB --version V | --timestamp T``."""
    from sharedsub.cli.replay_client import request_replay
    from sharedsub.core.ops.admin_rules import error_body

    settings = _settings(args)
    try:
        result = request_replay(
            settings.data_dir, args.subscription, version=args.version, timestamp=args.timestamp, timeout=args.timeout
        )
    except SharedSubError as exc:
        if args.json:
            console.out(json.dumps(error_body(exc)))
        raise
    console.out(json.dumps(result) if args.json else f"{result['message']} (through the running service, pid {result['pid']})")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``sharedsub`` console script."""
    args = build_parser().parse_args(argv)
    from sharedsub.runtime.process.process_exit import exit_after_clean_stop
    from sharedsub.storage.owner_only import owner_only_umask

    # Everything this process (and the fan-out child it starts) creates is owner-only.
    previous_umask = owner_only_umask()
    try:
        if args.command in ("serve", "frontend"):
            from sharedsub import serve

            code = serve.run(_settings(args), config=args.config, with_fanout=args.command == "serve")
            os.umask(previous_umask)
            # The service stopped cleanly (or said why not): leave without interpreter finalization,
            # which can crash in native libraries' threads (sharedsub.runtime.process.process_exit).
            exit_after_clean_stop(code)
        if args.command == "topics":
            return cmd_topics(args)
        if args.command == "subscriptions":
            return cmd_subscriptions(args)
        if args.command == "backlog":
            return cmd_backlog(args)
        if args.command == "cluster":
            return cmd_cluster(args)
        if args.command == "selector":
            return cmd_selector(args)
        if args.command == "unsubscribe":
            return cmd_unsubscribe(args)
        if args.command == "replay":
            return cmd_replay(args)
        if args.command == "users":
            return cmd_users(args)
    except SharedSubError as exc:
        console.err(f"error: {exc.description}")
        return exit_code(exc)
    except StoreFailure as exc:  # the data dir's object store did not answer or refused
        error = StoreUnusable(getattr(args, "data_dir", None) or "the data dir", str(exc))
        console.err(f"error: {error.description}")
        return exit_code(error)
    finally:
        os.umask(previous_umask)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
