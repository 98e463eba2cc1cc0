"""What a running service offers its HTTP endpoint: the one seam between HTTP and the front end.

connectors/http sees a service only through :class:`ServiceOperations`; connectors/amqp provides
it (``connectors.amqp.operations.FrontEndOperations``) and sharedsub.serve hands it over. Reads
may come from any thread and return copies; the admin calls run on the front end's reactor
thread and block the caller until they are done or ``timeout`` seconds have passed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from sharedsub.core.config import Settings
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops.metrics import CounterKey
from sharedsub.core.ops.stage_timing import Histogram
from sharedsub.runtime.fanout_process import FanoutStatus


class ServiceOperations(Protocol):
    """The reads and admin calls of one running service (see the module docstring)."""

    @property
    def settings(self) -> Settings:
        """The service's settings."""
        ...

    @property
    def amqp_url(self) -> str:
        """The plain AMQP listener's URL."""
        ...

    def subscriptions(self) -> list[SubscriptionRecord]:
        """The active subscriptions held in memory, by key (a copy)."""
        ...

    def counters(self) -> Mapping[CounterKey, int]:
        """A consistent copy of the front end's counters."""
        ...

    def stages(self) -> Mapping[str, Histogram]:
        """Copies of the front end's per-stage timing histograms."""
        ...

    def delivery_state_sizes(self) -> Mapping[str, int]:
        """Seqs held in memory per subscription table (sharedsub_delivery_state_seqs)."""
        ...

    def endpoint_state_sizes(self) -> Mapping[str, int]:
        """Entries the front end holds about links, connections and transfers, per table."""
        ...

    def storage_status(self) -> dict[str, object]:
        """Whether the data dir takes the front end's writes, and the current fault if not."""
        ...

    def write_errors(self) -> Mapping[str, int]:
        """Failed write tries because of the data dir, by errno name (a copy)."""
        ...

    def fanout_status(self) -> FanoutStatus | None:
        """The embedded fan-out job's state and restarts; None when it runs elsewhere (``frontend``)."""
        ...

    def member(self) -> dict[str, object] | None:
        """With several members on the data dir: this one's ``slot`` and its ``idle_consumers``
        (subscriptions whose consumers here get no partition: more members have consumers of them
        than their topic has partitions); None otherwise."""
        ...

    def connections(self, *, timeout: float) -> list[dict[str, object]]:
        """This front end's connections with their links, JSON-ready
        (connectors.amqp.endpoint_state.EndpointState.describe); runs on the reactor thread."""
        ...

    def create_topic(self, topic: str) -> dict[str, object]:
        """Create ``topic``'s table as ``sharedsub topics create`` does; ``{"ok", "topic", "path"}``.

        Raises:
            ConfigError: not a valid topic name. TopicExists: it is there already.
        """
        ...

    def unsubscribe(self, name: str, *, timeout: float) -> dict[str, object]:
        """Delete the subscription ``name`` designates (sharedsub.core.ops.admin_rules); the JSON result."""
        ...

    def drop_topic(self, topic: str, *, force: bool, timeout: float) -> dict[str, object]:
        """Drop ``topic`` (with its subscriptions when ``force``); the JSON result."""
        ...

    def replay(self, name: str, *, version: int | None, timestamp_ms: int | None, timeout: float) -> dict[str, object]:
        """Replay the durable subscription ``name`` from a version or time; the JSON report."""
        ...
