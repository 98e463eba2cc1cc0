"""The front end's side of the HTTP seam: :class:`sharedsub.runtime.operations.ServiceOperations`
over a :class:`~connectors.amqp.server.FrontEndServer`.

Reads take copies (safe from the HTTP thread under the GIL: sharedsub.core.ops.metrics explains why);
admin calls go through ``FrontEndServer.call`` onto the reactor thread.
"""

from __future__ import annotations

from collections.abc import Mapping

from connectors.amqp import admin_ops, replays
from connectors.amqp.server import FrontEndServer
from sharedsub.core.config import Settings
from sharedsub.core.errors import ConfigError
from sharedsub.core.layout import topic_name_problem
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops.metrics import CounterKey
from sharedsub.core.ops.stage_timing import Histogram
from sharedsub.runtime.fanout_process import FanoutStatus
from sharedsub.storage.topics import create_topic


class FrontEndOperations:
    """ServiceOperations of one front end (see sharedsub.runtime.operations for the contract)."""

    def __init__(self, server: FrontEndServer) -> None:
        self._server = server

    @property
    def settings(self) -> Settings:  # noqa: D102 (the Protocol documents each member)
        return self._server.settings

    @property
    def amqp_url(self) -> str:  # noqa: D102
        return self._server.url

    def subscriptions(self) -> list[SubscriptionRecord]:  # noqa: D102
        return self._server.handler.subscription_records()

    def counters(self) -> Mapping[CounterKey, int]:  # noqa: D102
        return self._server.handler.counters.snapshot()

    def stages(self) -> Mapping[str, Histogram]:  # noqa: D102
        return self._server.handler.stages.snapshot()

    def delivery_state_sizes(self) -> Mapping[str, int]:  # noqa: D102
        return self._server.handler.dispatcher.delivery_state_sizes()

    def endpoint_state_sizes(self) -> Mapping[str, int]:  # noqa: D102
        return self._server.handler.endpoints.sizes()

    def storage_status(self) -> dict[str, object]:  # noqa: D102
        return self._server.handler.committer.storage_status()

    def write_errors(self) -> Mapping[str, int]:  # noqa: D102
        return self._server.handler.committer.write_errors.copy()

    def fanout_status(self) -> FanoutStatus | None:  # noqa: D102
        status = self._server.fanout_status
        return status() if status is not None else None

    def member(self) -> dict[str, object] | None:  # noqa: D102
        status = self._server.cluster.status()
        return None if status is None else {"slot": status.slot, "idle_consumers": status.idle_consumers}

    def connections(self, *, timeout: float) -> list[dict[str, object]]:  # noqa: D102
        return self._server.call(admin_ops.connections(), timeout)

    def create_topic(self, topic: str) -> dict[str, object]:  # noqa: D102
        # What ``sharedsub topics create`` does, which runs beside a service too.
        problem = topic_name_problem(topic)
        if problem is not None:
            raise ConfigError("topic", problem)
        return {"ok": True, "topic": topic, "path": create_topic(self.settings.data_dir, topic)}

    def unsubscribe(self, name: str, *, timeout: float) -> dict[str, object]:  # noqa: D102
        elsewhere = 0
        cluster = self._server.cluster
        if cluster.several:  # several members: ask the store who has consumers
            key, generation = self._server.call(admin_ops.find(name), timeout)
            elsewhere = cluster.consumers_elsewhere(key, generation) or 0
        return self._server.call(admin_ops.unsubscribe(name, elsewhere=elsewhere), timeout)

    def drop_topic(self, topic: str, *, force: bool, timeout: float) -> dict[str, object]:  # noqa: D102
        return self._server.call(admin_ops.drop_topic(topic, force=force), timeout)

    def replay(self, name: str, *, version: int | None, timestamp_ms: int | None, timeout: float) -> dict[str, object]:  # noqa: D102
        return self._server.call(replays.replay(name, version=version, timestamp_ms=timestamp_ms), timeout)
