"""What goes on the wire for a row sent to a consumer, and the deliveries not settled yet.

:meth:`SentDeliveries.send` applies one ``Send`` effect of the dispatch rules
(sharedsub.core.delivery.dispatch) to a consumer link: a new delivery tagged with this counter's
next value (unique across the links, as only the dispatcher sends on the service's sender links),
the row's message as published for its first delivery, or with its header's delivery-count and
first-acquirer rewritten for a redelivery (connectors/amqp/translate.py ``with_delivery_count``),
settled at once for an at-most-once consumer. It counts the delivery (metrics ``delivered``,
``redelivered``) and the row's ``publish_to_send`` time (sharedsub.core.ops.stage_timing).

:attr:`SentDeliveries.unsettled` maps the tag of each delivery sent and not settled to its
:class:`Sent` (which subscription, consumer and row): the dispatcher pops a disposition's tag
from it directly, once per settled message (connectors/amqp/kept_settlements.py).

Front end's thread only (it sends on proton links).
"""

from __future__ import annotations

import time

from connectors.amqp.translate import with_delivery_count
from connectors.amqp.wire.outgoing import Outgoing
from sharedsub.core.delivery import dispatch as rules
from sharedsub.core.ops import metrics
from sharedsub.core.ops.stage_timing import StageTimes
from sharedsub.core.value_type import value_type
from sharedsub.runtime.tailer import Row


@value_type
class Sent:
    """A delivery sent and not settled: which subscription, consumer and row."""

    key: str
    consumer: int
    seq: int


class SentDeliveries:
    """The sends of the dispatcher and their unsettled deliveries by tag (module docstring)."""

    __slots__ = ("unsettled", "_tag", "_counters", "_stages")

    def __init__(self, counters: metrics.Counters, stages: StageTimes) -> None:
        """``counters``: where deliveries are counted; ``stages``: where ``publish_to_send``
        times go."""
        self.unsettled: dict[str, Sent] = {}
        self._tag = 0
        self._counters = counters
        self._stages = stages

    def send(self, key: str, outgoing: Outgoing, effect: rules.Send[Row]) -> None:
        """Send ``effect``'s row of subscription ``key`` on ``outgoing`` (module docstring)."""
        row: Row = effect.row
        self._tag += 1
        tag = str(self._tag)
        self._counters.inc(metrics.DELIVERED, row.topic, key)
        if not effect.first_acquirer:
            self._counters.inc(metrics.REDELIVERED, row.topic, key)
        # An at-most-once consumer's delivery is settled on sending (acknowledged by the next effect).
        message = row.message if effect.first_acquirer else with_delivery_count(row.message, effect.delivery_count)
        outgoing.send(tag, message, effect.presettled)
        if effect.first_acquirer and row.published_ms is not None:
            self._stages.observe("publish_to_send", time.time() - row.published_ms / 1000)
        if not effect.presettled:
            self.unsettled[tag] = Sent(key, effect.consumer, row.seq)

    def forget_subscription(self, key: str) -> None:
        """Subscription ``key``'s unsettled deliveries are no longer awaited."""
        self.unsettled = {d: s for d, s in self.unsettled.items() if s.key != key}

    def forget_consumer(self, consumer: int) -> None:
        """``consumer``'s unsettled deliveries are no longer awaited."""
        self.unsettled = {d: s for d, s in self.unsettled.items() if s.consumer != consumer}

    def clear(self) -> None:
        """No unsettled delivery is awaited any more."""
        self.unsettled.clear()
