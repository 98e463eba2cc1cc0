"""Admin operations inside a running front end, on the reactor thread.

Each function has the shape :meth:`connectors.amqp.server.FrontEndServer.call` runs:
``op(front_end, future)``; it decides with the pure rules of :mod:`sharedsub.core.ops.admin_rules`
(against the in-memory catalog and the links attached right now), applies the decision through
the committer, and completes ``future`` with a JSON-ready dict once the catalog (and table)
commits are done — or with the rule's typed error.
"""

from __future__ import annotations

import concurrent.futures
import logging

from connectors.amqp.handler import FrontEnd, Operation
from sharedsub.core.errors import SharedSubError, SubscriptionInUse, TopicInUse
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops import admin_rules
from sharedsub.runtime.commit_requests import Result
from sharedsub.runtime.inspection import display_name, find_subscription

log = logging.getLogger(__name__)

Op = Operation[dict[str, object]]
"""An admin operation whose future gets the JSON-ready reply."""


def _describe(rec: SubscriptionRecord) -> dict[str, object]:
    return {"key": rec.key, "name": display_name(rec), "topic": rec.topic, "generation": rec.generation}


def _fail_on_error(future: concurrent.futures.Future[dict[str, object]], result: Result, what: str) -> bool:
    if result.error is None:
        return False
    if not future.done():
        future.set_exception(SharedSubError(f"{what} failed: {result.error}"))
    return True


def find(name: str) -> Operation[tuple[str, int]]:
    """The key and generation of the subscription ``name`` designates (before an unsubscribe
    asks the other members whether they have consumers of it)."""

    def op(front: FrontEnd, future: concurrent.futures.Future[tuple[str, int]]) -> None:
        rec = find_subscription(front.subscriptions.records, name)
        future.set_result((rec.key, rec.generation))

    return op


def connections() -> Operation[list[dict[str, object]]]:
    """This front end's connections and their links (EndpointState.describe), for the console."""

    def op(front: FrontEnd, future: concurrent.futures.Future[list[dict[str, object]]]) -> None:
        future.set_result(front.endpoints.describe(front.user_of))

    return op


def unsubscribe(name: str, *, elsewhere: int = 0) -> Op:
    """``unsubscribe SUB``: delete the subscription ``name`` designates unless consumers are
    attached: here, or on ``elsewhere`` other members (several members share the data dir)."""

    def op(front: FrontEnd, future: concurrent.futures.Future[dict[str, object]]) -> None:
        subs = front.subscriptions
        rec = find_subscription(subs.records, name)  # active records only: deleted ones are not held
        if subs.busy(rec.key):
            raise SubscriptionInUse(name, front.dispatcher.consumers(rec.key) or 1)
        decision = admin_rules.decide_unsubscribe(rec, name, front.dispatcher.consumers(rec.key) + elsewhere)

        def saved(result: Result) -> None:
            if _fail_on_error(future, result, "the catalog commit"):
                return
            log.info("admin: subscription %s unsubscribed", rec.key, extra={"subscription": rec.key})
            if not future.done():
                future.set_result({"ok": True, "subscription": _describe(decision.record)})

        subs.unsubscribe(decision.record, saved)

    return op


def drop_topic(topic: str, *, force: bool) -> Op:
    """``topics drop NAME [--force]``: delete the topic's subscriptions (with ``force``), then its table."""

    def op(front: FrontEnd, future: concurrent.futures.Future[dict[str, object]]) -> None:
        subs = front.subscriptions
        records = list(subs.records.values())
        busy = [r.key for r in records if r.topic == topic and subs.busy(r.key)]
        if busy:
            raise TopicInUse(topic, "a change to subscription(s) " + ", ".join(busy) + " is in progress")
        decision = admin_rules.decide_drop_topic(
            topic,
            exists=front.topics.exists(topic),
            subscriptions=records,
            consumers={r.key: front.dispatcher.consumers(r.key) for r in records},
            publishers=front.publishers(topic),
            force=force,
        )
        # From here on the topic is absent for attaches and publishes (no new subscription or
        # message can land on a table about to go).
        front.topics.close(topic)
        for rec in decision.subscriptions:
            subs.unsubscribe(rec)

        def dropped(result: Result) -> None:
            if _fail_on_error(future, result, "removing the topic table"):
                return
            log.info("admin: topic %s dropped", topic, extra={"topic": topic})
            if not future.done():
                future.set_result(
                    {"ok": True, "topic": topic, "deleted_subscriptions": [_describe(r) for r in decision.subscriptions]}
                )

        # Queued after the DELETED revisions: the committer commits them first (DropTopic contract).
        front.topics.drop(topic, dropped)

    return op
