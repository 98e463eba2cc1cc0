"""Admin operations on a data dir no service runs on: the tables are changed directly.

The rules are :mod:`sharedsub.core.ops.admin_rules`' (the same as inside a running service); with no
service there are no attached links, so consumers and publishers count 0 (links a killed
service recorded as attached are stale, and the next service start records them detached).
Catalog changes are DELETED revisions appended with the catalog's storage functions
(:func:`sharedsub.storage.catalog.append_records`), numbered after the highest revision, as the
committer would. The caller (the CLI) must have checked that no service runs: the front end is
the catalog's only writer while it runs.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterable

from sharedsub.core.model import SubscriptionRecord, SubscriptionState
from sharedsub.core.ops import admin_rules
from sharedsub.runtime.inspection import display_name, find_subscription
from sharedsub.storage import catalog
from sharedsub.storage.topics import remove_topic, topic_exists


def _describe(rec: SubscriptionRecord) -> dict[str, object]:
    return {"key": rec.key, "name": display_name(rec), "topic": rec.topic, "generation": rec.generation}


def _delete_records(
    root: str,
    records: Iterable[SubscriptionRecord],
    top_revision: int,
    progress: Callable[[int, int], None] | None = None,
) -> None:
    wanted = list(records)
    if not wanted:
        return
    now = dt.datetime.now(dt.UTC)
    deleted = [
        dataclasses.replace(r, state=SubscriptionState.DELETED, revision=top_revision + i + 1, updated_at=now)
        for i, r in enumerate(wanted)
    ]
    catalog.append_records(catalog.catalog_appender(root), deleted)  # one commit for all of them
    if progress is not None:
        progress(len(deleted), len(deleted))


def unsubscribe(root: str, name: str) -> dict[str, object]:
    """Delete subscription ``name`` (key, ``<namespace>:<name>`` or unique name).

    Raises:
        SubscriptionNotFound, AmbiguousSubscription.
    """
    records = catalog.load_catalog(root)
    active = {k: r for k, r in records.items() if r.active}
    rec = find_subscription(active, name)
    decision = admin_rules.decide_unsubscribe(rec, name, consumers=0)
    _delete_records(root, [decision.record], max((r.revision for r in records.values()), default=0))
    return {"ok": True, "subscription": _describe(decision.record)}


def drop_topic(
    root: str, topic: str, *, force: bool, progress: Callable[[int, int], None] | None = None
) -> dict[str, object]:
    """Drop ``topic``: with ``force`` delete its active subscriptions first, then remove its table.

    Raises:
        TopicNotFound, TopicInUse (active subscriptions and no ``force``).
    """
    records = catalog.load_catalog(root)
    decision = admin_rules.decide_drop_topic(
        topic,
        exists=topic_exists(root, topic),
        subscriptions=list(records.values()),
        consumers={},
        publishers=0,
        force=force,
    )
    _delete_records(root, decision.subscriptions, max((r.revision for r in records.values()), default=0), progress)
    remove_topic(root, topic)
    return {"ok": True, "topic": topic, "deleted_subscriptions": [_describe(r) for r in decision.subscriptions]}
