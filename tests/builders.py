"""Test-data builders on real Delta tables: topics with messages, catalog records, reading back.

No pyspark import here, so any test tier can use them. Everything goes through
``sharedsub.storage`` (delta-rs), exactly as the front end writes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import threading
from collections.abc import Sequence
from typing import Any

import proton
import pyarrow as pa

from sharedsub.core import layout
from sharedsub.core.addressing import Address
from sharedsub.core.config import MaintenanceSettings, defaults
from sharedsub.core.model import ExpiryPolicy, SubscriptionKey, SubscriptionRecord, SubscriptionState
from sharedsub.core.publish import amqp_message
from sharedsub.core.publish.topic_row import topic_columns
from sharedsub.runtime.commit_requests import Publish, Result, Token
from sharedsub.storage import catalog, schemas
from sharedsub.storage.delta.appender import DeltaAppender
from sharedsub.storage.delta.commit_log import latest_version, read_commit
from sharedsub.storage.delta.table_reads import iter_rows, read_files
from sharedsub.storage.delta.tables import table_exists
from sharedsub.storage.topics import create_topic, last_seq, topic_exists

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
_names = itertools.count()


def topic(root: str, name: str) -> str:
    """Create topic ``name`` under ``root`` (if missing); return its table path."""
    if not topic_exists(root, name):
        create_topic(root, name)
    return layout.topic_table(root, name)


def publish(
    root: str,
    name: str,
    keys: Sequence[str | None],
    *,
    publisher: str | None = "publisher-1",
    properties: dict[str, Any] | None = None,
    partition: int = 0,
) -> list[int]:
    """Append one message per routing key to topic ``name`` in one commit; return their seqs.

    Seqs continue gap-free from the topic's last one (0 for an empty topic); the payload is
    ``b"m<seq>"``. ``properties`` maps names to ints or strings (typed application properties).
    ``partition``: the topic partition written (as the front end in that member slot does; its
    seqs start at ``partition << 40``, sharedsub.core.layout).
    """
    path = topic(root, name)
    if partition:
        path = layout.topic_partition_table(root, name, partition)
        if not table_exists(path):
            create_topic(root, name, partition)
    first = last_seq(path, partition) + 1
    props = [
        (k, {"type": "long", "long": v} if isinstance(v, int) else {"type": "string", "string": str(v)})
        for k, v in (properties or {}).items()
    ]
    rows = [
        {
            "seq": first + i,
            "published_at": T0 + dt.timedelta(seconds=first + i - layout.partition_seq_base(partition)),
            "publisher": publisher,
            "routing_key": key,
            # Partition 0's rows spread the column over 0-3, which the backlog tests count by.
            "partition": partition or (first + i) % 4,
            "size": 8,
            "durable": True,
            "priority": 4,
            "ttl": None,
            "message_id": f"ID:{name}-{first + i}",
            "subject": key,
            "application_properties": props,
            "message": f"m{first + i}".encode(),
        }
        for i, key in enumerate(keys)
    ]
    DeltaAppender(path, schemas.TOPIC).append(pa.Table.from_pylist(rows, schema=schemas.TOPIC))
    return [first + i for i in range(len(keys))]


def subscription(
    topic_name: str,
    *,
    binding: str = "#",
    name: str | None = None,
    namespace: str = "container-1",
    no_local: bool = False,
    start_seq: int = 0,
    selector: str | None = None,
    shared: bool = True,
    durable: bool = True,
    generation: int = 1,
) -> SubscriptionRecord:
    """An active subscription record (revision 0: :func:`register` assigns the real one)."""
    return SubscriptionRecord(
        identity=SubscriptionKey(namespace, name or f"sub{next(_names)}", shared, durable),
        generation=generation,
        state=SubscriptionState.ACTIVE,
        topic=topic_name,
        binding=binding,
        selector=selector,
        no_local=no_local,
        expiry_policy=ExpiryPolicy.NEVER,
        start_seq=start_seq,
        source="{}",
        created_at=T0,
        updated_at=T0,
    )


def register(root: str, *records: SubscriptionRecord) -> list[SubscriptionRecord]:
    """Commit ``records`` to the catalog in one commit with increasing revisions; return them."""
    current = catalog.load_catalog(root)
    revision = max((r.revision for r in current.values()), default=0)
    stored = [dataclasses.replace(r, revision=revision + 1 + i) for i, r in enumerate(records)]
    catalog.append_records(catalog.catalog_appender(root), stored)
    return stored


def delete(root: str, record: SubscriptionRecord) -> SubscriptionRecord:
    """Commit a deleted revision of ``record``."""
    (stored,) = register(root, dataclasses.replace(record, state=SubscriptionState.DELETED))
    return stored


def routed(root: str, record: SubscriptionRecord) -> list[dict[str, Any]]:
    """Rows of ``record``'s subscription table in append order (commit by commit); [] if none."""
    path = layout.join(root, record.table)
    latest = latest_version(path)
    rows: list[dict[str, Any]] = []
    for version in range(latest + 1):
        commit = read_commit(path, version)
        if commit is not None and commit.added:
            rows.extend(iter_rows(read_files(commit.added)))
    return rows


def routed_seqs(root: str, record: SubscriptionRecord) -> list[int]:
    """``seq`` of every row of ``record``'s table, in append order."""
    return [r["seq"] for r in routed(root, record)]


def maintenance_policy(**changes: Any) -> MaintenanceSettings:
    """The packaged ``[maintenance]`` defaults with ``changes`` applied (the maintenance policy)."""
    return dataclasses.replace(defaults().maintenance, **changes)


# --------------------------------------------------------------------------- the committer


def publish_request(
    topic: str, msg: proton.Message, token: Token | None, *, key: str = "k", publisher: str = "c1"
) -> Publish:
    """The committer request the front end makes of ``msg`` published to ``topic/key`` by the
    connection of container-id ``publisher`` (decoded, its topic row built by the product's
    functions)."""
    raw = msg.encode()
    columns = topic_columns(amqp_message.decode(raw), Address(topic, key), publisher=publisher, size=len(raw))
    return Publish(topic, columns, raw, token)


class Collector:
    """An ``on_done`` for a Committer that keeps every result; :meth:`wait` for a count of them."""

    def __init__(self) -> None:
        self.results: list[Result] = []
        self.cond = threading.Condition()

    def __call__(self, results: list[Result]) -> None:
        with self.cond:
            self.results.extend(results)
            self.cond.notify_all()

    def wait(self, n: int, timeout: float = 120.0) -> list[Result]:
        """The results once there are at least ``n`` (fails after ``timeout`` seconds)."""
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.results) >= n, timeout), f"{len(self.results)} of {n} results"
            return list(self.results)
