"""What the dispatcher records through the committer for the settlements the rules decide.

The dispatch rules (sharedsub.core.delivery.dispatch) return ``Record`` and ``DeadLetterRow``
effects; :class:`AckRecords` turns them into committer requests (sharedsub.runtime.commit_requests)
and counts them (metrics ``acknowledged``, ``expired``, ``dead_lettered``):

* a final outcome or a failed delivery is an ``Ack`` in the generation's ack log (durable
  generations, and shared ones: connectors/amqp/generations.py ``GenerationTables``; a
  non-durable one's acknowledgements live in the dispatcher's memory only). Consecutive records
  of one outcome and consumer are one ``Ack`` (the acknowledgements of a ``SettleAll``, mostly):
  :meth:`AckRecords.record` extends the ``Ack`` being built or submits it and starts another, and
  the caller submits the last one (:meth:`AckRecords.submit`), so the committer gets everything
  in the order decided;
* a dead letter is a ``DeadLetterMessage``: its row in the generation's dead-letter table (so it
  can be inspected), and in its ack log when durable (so a restart does not deliver it again).

A generation that was ended records nothing more (it is still counted).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import proton

from connectors.amqp.generations import Generation
from sharedsub.core.delivery import dispatch as rules
from sharedsub.core.delivery.outcomes import AckOutcome
from sharedsub.core.ops import metrics
from sharedsub.runtime.commit_requests import Ack, DeadLetterMessage, DeadLetterRow, Request
from sharedsub.runtime.tailer import Row

log = logging.getLogger(__name__)


class AckRecords:
    """The dispatcher's settlement records to the committer, and their counters (module docstring)."""

    __slots__ = ("submit", "_counters")

    def __init__(self, submit: Callable[[Request], None], counters: metrics.Counters) -> None:
        """``submit``: where the records go (the committer's queue)."""
        self.submit = submit
        self._counters = counters

    def record(self, gen: Generation, record: rules.Record[Row], container: str, ack: Ack | None) -> Ack | None:
        """Count ``record`` and add it to ``ack`` when it is one of the same outcome and
        consumer (``container``), else submit ``ack`` and start another; return the Ack being
        built (None: the generation records nothing)."""
        row, outcome = record.row, record.outcome
        if outcome in (AckOutcome.ACCEPTED, AckOutcome.EXPIRED):
            name = metrics.ACKNOWLEDGED if outcome == AckOutcome.ACCEPTED else metrics.EXPIRED
            self._counters.inc(name, row.topic, gen.key)
        if gen.tables.ack_table is None or gen.ended:
            return ack  # a non-durable generation's acknowledgements live in memory only
        if ack is not None and ack.outcome == outcome and ack.consumer == container:
            ack.seqs.append(row.seq)
            return ack
        if ack is not None:
            self.submit(ack)
        return Ack(gen.tables.ack_table, [row.seq], outcome, container)

    def dead_letter(
        self, gen: Generation, effect: rules.DeadLetterRow[Row, proton.Condition], container: str, ack: Ack | None
    ) -> None:
        """Count ``effect``'s dead-lettered row, submit ``ack`` first (the Ack being built, if
        any: it is closed), then record the row unless the generation ended (module docstring);
        ``container``: of the consumer that had it."""
        row = effect.row
        self._counters.inc(metrics.DEAD_LETTERED, row.topic, gen.key)
        if ack is not None:
            self.submit(ack)
        if gen.ended:
            return
        error = effect.error
        log.info("subscription %s: seq %d of %s dead-lettered (%s)", gen.key, row.seq, row.topic, effect.reason)
        self.submit(
            DeadLetterMessage(
                gen.tables.dead_letter_table,
                gen.tables.ack_table,
                DeadLetterRow(
                    topic=row.topic,
                    seq=row.seq,
                    reason=str(effect.reason),
                    error_condition=str(error.name) if error is not None and error.name else None,
                    error_description=str(error.description) if error is not None and error.description else None,
                    delivery_count=effect.delivery_count,
                    consumer=container,
                    message_id=row.message_id,
                ),
            )
        )
