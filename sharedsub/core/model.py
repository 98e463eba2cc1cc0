"""Value types shared by the front end, the fan-out job and the CLI; pure.

A subscription's identity is ``(namespace, name, shared, durable)`` (docs/design.md §4.2). Each change of
topic, binding, selector or no-local while no consumer is attached starts a new *generation*, a
new table; the catalog keeps one current :class:`SubscriptionRecord` per identity.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
from typing import Any

from sharedsub.core import layout

GLOBAL_NAMESPACE = "global"


class ExpiryPolicy(enum.StrEnum):
    """Source terminus expiry policy, which sets a subscription's lifetime (docs/design.md §4.2)."""

    LINK_DETACH = "link-detach"
    SESSION_END = "session-end"
    CONNECTION_CLOSE = "connection-close"
    NEVER = "never"


class SubscriptionState(enum.StrEnum):
    """Catalog state of a subscription generation."""

    ACTIVE = "active"
    DELETED = "deleted"


@dataclasses.dataclass(frozen=True, slots=True)
class SubscriptionKey:
    """Identity of a subscription, independent of link names and protocol."""

    namespace: str
    name: str
    shared: bool
    durable: bool

    @property
    def key(self) -> str:
        """The filesystem-safe key the catalog and layout use."""
        return layout.subscription_key(self.namespace, self.name, shared=self.shared, durable=self.durable)


@dataclasses.dataclass(frozen=True, slots=True)
class SubscriptionRecord:
    """The catalog's current view of one subscription (one generation of it)."""

    identity: SubscriptionKey
    generation: int
    state: SubscriptionState
    topic: str
    binding: str
    selector: str | None
    no_local: bool
    expiry_policy: ExpiryPolicy
    start_seq: int
    source: str  # JSON of the stored source terminus
    created_at: dt.datetime
    updated_at: dt.datetime
    revision: int = 0
    # The user whose attach created it (sharedsub.core.security.permissions); None: an anonymous connection,
    # or a record written before owners were recorded.
    owner: str | None = None
    # The first seq this generation may receive in each partition of its topic other than
    # ``start_seq``'s that had a table when it was saved, as (partition, seq) pairs ascending;
    # see :meth:`start_in`.
    start_seqs: tuple[tuple[int, int], ...] = ()

    @property
    def key(self) -> str:
        """Catalog key of the identity."""
        return self.identity.key

    @property
    def table(self) -> str:
        """Generation table, relative to the data dir."""
        return layout.generation_table_rel(self.key, self.generation)

    @property
    def active(self) -> bool:
        """True unless the subscription was deleted."""
        return self.state is SubscriptionState.ACTIVE

    def start_in(self, partition: int) -> int:
        """The first seq of topic partition ``partition`` this generation receives: ``start_seq``
        in the partition it was numbered in (the saving front end's), the recorded start in the
        other partitions that existed then, and the partition's first seq in one made later
        (everything in it was published after this record was saved)."""
        if partition == layout.partition_of_seq(self.start_seq):
            return self.start_seq
        for known, seq in self.start_seqs:
            if known == partition:
                return seq
        return layout.partition_seq_base(partition)

    def to_row(self) -> dict[str, object]:
        """Row of the catalog table (schemas.CATALOG)."""
        return {
            "key": self.key,
            "revision": self.revision,
            "namespace": self.identity.namespace,
            "name": self.identity.name,
            "shared": self.identity.shared,
            "durable": self.identity.durable,
            "generation": self.generation,
            "state": str(self.state),
            "topic": self.topic,
            "binding": self.binding,
            "selector": self.selector,
            "no_local": self.no_local,
            "expiry_policy": str(self.expiry_policy),
            "start_seq": self.start_seq,
            "table": self.table,
            "source": self.source,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "owner": self.owner,
            "start_seqs": json.dumps({str(p): s for p, s in self.start_seqs}) if self.start_seqs else None,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> SubscriptionRecord:  # Any: a row as pyarrow's to_pylist() gives it
        """Inverse of :meth:`to_row`."""
        return cls(
            identity=SubscriptionKey(row["namespace"], row["name"], bool(row["shared"]), bool(row["durable"])),
            generation=int(row["generation"]),
            state=SubscriptionState(row["state"]),
            topic=row["topic"],
            binding=row["binding"],
            selector=row["selector"],
            no_local=bool(row["no_local"]),
            expiry_policy=ExpiryPolicy(row["expiry_policy"]),
            start_seq=int(row["start_seq"]),
            source=row["source"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            revision=int(row["revision"]),
            owner=row.get("owner"),
            start_seqs=tuple(sorted((int(p), int(s)) for p, s in json.loads(row.get("start_seqs") or "{}").items())),
        )
