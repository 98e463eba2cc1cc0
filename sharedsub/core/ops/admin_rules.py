"""Administrative operations — ``unsubscribe`` and ``topics drop`` — as pure rules; and the one
mapping of errors to CLI exit codes, admin error codes and HTTP statuses.

The same rules decide whether the operation runs inside a running service (on its reactor
thread, connectors/amqp/admin_ops.py) or offline on the tables (sharedsub/runtime/offline_admin.py):

``unsubscribe SUB`` (:func:`decide_unsubscribe`):

====  ==============================================  ================================
 #    situation                                       decision
====  ==============================================  ================================
 1    no active subscription by that name             SubscriptionNotFound (exit 3)
 2    consumer links attached (``consumers`` > 0)     SubscriptionInUse (exit 5)
 3    otherwise                                       Unsubscribe(record): a DELETED
                                                      revision; the next attach creates
                                                      a new generation
====  ==============================================  ================================

``topics drop NAME [--force]`` (:func:`decide_drop_topic`):

====  ==============================================  ================================
 #    situation                                       decision
====  ==============================================  ================================
 1    the topic does not exist                        TopicNotFound (exit 3)
 2    publisher links attached to it                  TopicInUse (exit 5)
 3    a subscription on it has consumers attached     TopicInUse (exit 5), even forced
 4    active subscriptions on it, not ``force``       TopicInUse (exit 5), naming them
 5    otherwise                                       DropTopic(topic, subscriptions):
                                                      delete those subscriptions, then
                                                      remove the topic table
====  ==============================================  ================================

Exit codes (the CLI's; the admin endpoint's JSON error replies carry the same ``exit_code``):

== ============================================================================================
0  done
1  failure (an I/O error, the service did not answer, ``replay`` with no service running, ...)
2  usage or invalid input (bad flags or values, invalid names, an ambiguous subscription name,
   ``replay`` of a non-durable subscription or from a version the table does not have yet)
3  not found (topic, subscription, a ``replay`` point older than the retained Delta history)
4  already exists
5  refused: in use (consumers or publishers attached, subscriptions on a topic, a replay of
   the subscription already running)
6  the data dir does not take writes: no space left, over quota, or a read-only file system
   (``serve``/``frontend`` at start; an admin call whose write was given up on)
== ============================================================================================

No I/O: tested as tables in tests/unit/test_admin_rules.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import NotRequired, TypedDict

from sharedsub.core.errors import (
    AdminTokenRequired,
    AmbiguousSubscription,
    ConfigError,
    DataDirInUse,
    HistoryUnavailable,
    InvalidAddress,
    InvalidUser,
    ReplayInProgress,
    ReplayNotDurable,
    ServiceRefused,
    SharedSubError,
    StorageUnavailable,
    StoreUnusable,
    SubscriptionInUse,
    SubscriptionNotFound,
    TopicExists,
    TopicInUse,
    TopicNotFound,
    UserExists,
    UserNotFound,
    VersionNotFound,
)
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.selector.lexer import SelectorError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_EXISTS = 4
EXIT_IN_USE = 5
EXIT_STORAGE = 6

# error code (admin JSON replies) -> (exit code, HTTP status)
ERROR_CODES: dict[str, tuple[int, int]] = {
    "error": (EXIT_ERROR, 500),
    "usage": (EXIT_USAGE, 400),
    "not-found": (EXIT_NOT_FOUND, 404),
    "exists": (EXIT_EXISTS, 409),
    "in-use": (EXIT_IN_USE, 409),
    "storage": (EXIT_STORAGE, 503),
    # the HTTP endpoint's own refusals (connectors/http/admin.py): no or a wrong admin token
    "unauthorized": (EXIT_ERROR, 401),
}

_CODE_OF: tuple[tuple[type[SharedSubError], str], ...] = (
    (TopicExists, "exists"),
    (TopicNotFound, "not-found"),
    (SubscriptionNotFound, "not-found"),
    (AmbiguousSubscription, "usage"),
    (ConfigError, "usage"),
    (InvalidAddress, "usage"),
    (SubscriptionInUse, "in-use"),
    (TopicInUse, "in-use"),
    (DataDirInUse, "in-use"),
    (StorageUnavailable, "storage"),
    (StoreUnusable, "storage"),
    # replay (sharedsub.core.ops.replay)
    (HistoryUnavailable, "not-found"),
    (VersionNotFound, "usage"),
    (ReplayNotDurable, "usage"),
    (ReplayInProgress, "in-use"),
    # users (sharedsub.runtime.users)
    (UserExists, "exists"),
    (UserNotFound, "not-found"),
    (InvalidUser, "usage"),
    # the HTTP endpoint (connectors/http): no or a wrong admin token
    (AdminTokenRequired, "unauthorized"),
    # a console browse's selector (sharedsub.runtime.backlog_browse)
    (SelectorError, "usage"),
)


def error_code(error: BaseException) -> str:
    """The admin error code of ``error`` (``error`` for anything not listed; a
    :class:`~sharedsub.core.errors.ServiceRefused` carries the code the service answered)."""
    if isinstance(error, ServiceRefused):
        return error.code if error.code in ERROR_CODES else "error"
    for kind, code in _CODE_OF:
        if isinstance(error, kind):
            return code
    return "error"


def exit_code(error: BaseException) -> int:
    """The CLI exit code of ``error``."""
    return ERROR_CODES[error_code(error)][0]


class ErrorBody(TypedDict):
    """JSON body of an admin error reply (:func:`error_body`)."""

    ok: bool
    error: str
    exit_code: int
    message: str
    candidates: NotRequired[list[str]]


def error_body(error: BaseException) -> ErrorBody:
    """JSON body of an admin error reply: ``{ok: false, error, exit_code, message[, candidates]}``."""
    code = error_code(error)
    message = error.description if isinstance(error, SharedSubError) else f"internal error: {error}"
    body: ErrorBody = {"ok": False, "error": code, "exit_code": ERROR_CODES[code][0], "message": message}
    if isinstance(error, AmbiguousSubscription):
        body["candidates"] = list(error.candidates)
    return body


def http_status(code: str) -> int:
    """HTTP status of an admin error code (500 for unknown codes)."""
    return ERROR_CODES.get(code, ERROR_CODES["error"])[1]


def error_from_body(body: Mapping[str, object]) -> tuple[int, str]:
    """``(exit code, message)`` of an admin error reply (the CLI's side of :func:`error_body`)."""
    code = str(body.get("error", "error"))
    return ERROR_CODES.get(code, ERROR_CODES["error"])[0], str(body.get("message", "the service refused"))


# --------------------------------------------------------------------------- decisions


@dataclasses.dataclass(frozen=True, slots=True)
class Unsubscribe:
    """Delete ``record`` (write its DELETED revision)."""

    record: SubscriptionRecord


@dataclasses.dataclass(frozen=True, slots=True)
class DropTopic:
    """Delete ``subscriptions`` (active ones on the topic), then remove the topic table."""

    topic: str
    subscriptions: tuple[SubscriptionRecord, ...]


def decide_unsubscribe(record: SubscriptionRecord | None, name: str, consumers: int) -> Unsubscribe:
    """Rule table ``unsubscribe`` above; ``record`` is what ``name`` resolved to (None: nothing).

    Raises:
        SubscriptionNotFound: no record, or a deleted one.
        SubscriptionInUse: consumer links are attached.
    """
    if record is None or not record.active:
        raise SubscriptionNotFound(name)
    if consumers > 0:
        raise SubscriptionInUse(name, consumers)
    return Unsubscribe(record)


def decide_drop_topic(
    topic: str,
    *,
    exists: bool,
    subscriptions: Sequence[SubscriptionRecord],
    consumers: Mapping[str, int],
    publishers: int,
    force: bool,
) -> DropTopic:
    """Rule table ``topics drop`` above.

    ``subscriptions``: every catalog record (any topic, any state); ``consumers``: consumer links
    by subscription key; ``publishers``: publisher links attached to the topic.

    Raises:
        TopicNotFound, TopicInUse.
    """
    if not exists:
        raise TopicNotFound(topic)
    if publishers > 0:
        raise TopicInUse(topic, f"{publishers} publisher link(s) attached")
    mine = tuple(sorted((r for r in subscriptions if r.active and r.topic == topic), key=lambda r: r.key))
    busy = [r.key for r in mine if consumers.get(r.key, 0) > 0]
    if busy:
        raise TopicInUse(topic, "consumers attached to subscription(s) " + ", ".join(busy))
    if mine and not force:
        raise TopicInUse(
            topic, f"{len(mine)} subscription(s) on it: " + ", ".join(r.key for r in mine) + " (--force deletes them)"
        )
    return DropTopic(topic, mine)
