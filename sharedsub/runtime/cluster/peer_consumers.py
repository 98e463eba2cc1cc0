"""The catalog and the other members' consumers, as a front end's attach and detach decisions
see them when several members share a data dir (docs/design.md §8;
connectors.amqp.cluster_decisions.OtherMembers).

The store is read off the reactor thread: the catalog's latest records of the subscriptions a
decision names (another member may have created, changed or deleted them since this one's last
reading), the consumers of each active one on the other live members (their presence objects,
sharedsub.runtime.cluster.partition_owners), and the claim of an unshared durable subscription's
one consumer (sharedsub.runtime.cluster.member_claims). Every answer is handed to ``post``, which runs
it on the reactor thread.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
from collections.abc import Callable

from sharedsub.core.model import SubscriptionRecord
from sharedsub.runtime.cluster.member_claims import Held, MemberClaims
from sharedsub.storage.catalog import CatalogReader

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class Seen:
    """What the store says of some subscription keys now."""

    records: dict[str, SubscriptionRecord]  # the catalog's latest record of each key it has
    consumers: dict[str, int]  # consumers of that record's generation on other live members (active ones)

    def with_one_more(self, key: str) -> Seen:
        """The same, with at least one consumer of ``key`` elsewhere (a member holds its claim)."""
        return Seen(self.records, {**self.consumers, key: max(1, self.consumers.get(key, 0))})


class PeerConsumers:
    """:class:`connectors.amqp.cluster_decisions.OtherMembers` of one member (module docstring)."""

    def __init__(
        self,
        root: str,
        claims: MemberClaims,
        count: Callable[[str, int], int],
        post: Callable[[Callable[[], None]], None],
    ) -> None:
        """``root``: the data dir; ``claims``: of kind ``subscriptions``; ``count(key,
        generation)``: consumers on the other live members (reads the store); ``post(fn)``: run
        ``fn`` on the reactor thread."""
        self._catalog = CatalogReader(root)  # the pool's thread only
        self._claims = claims
        self._count = count
        self._post = post
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="sharedsub-peer-consumers")

    def look(self, keys: list[str], done: Callable[[Seen | None], None]) -> None:
        """See :class:`connectors.amqp.cluster_decisions.OtherMembers`."""

        def run() -> None:
            seen: Seen | None
            try:
                latest = self._catalog.refresh()
                records = {key: latest[key] for key in keys if key in latest}
                counts = {key: self._count(key, rec.generation) for key, rec in records.items() if rec.active}
                seen = Seen(records, counts)
            except Exception as exc:  # noqa: BLE001 (a store that does not answer: the caller says so)
                log.warning("could not read the catalog and the other members' consumers: %s", exc)
                seen = None
            self._post(lambda: done(seen))

        self._pool.submit(run)

    def claim(self, key: str, done: Callable[[Held | None], None]) -> None:
        """See :class:`connectors.amqp.cluster_decisions.OtherMembers`."""
        self._claims.claim(key, lambda held: self._post(lambda: done(held)))

    def release(self, key: str) -> None:
        """See :class:`connectors.amqp.cluster_decisions.OtherMembers`."""
        self._claims.release(key)

    def stop(self) -> None:
        """Finish what is queued."""
        self._pool.shutdown(wait=True)
        self._claims.stop()
