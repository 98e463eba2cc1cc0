"""A group of published messages as the columns of one topic-table commit.

The rest of each row is built by sharedsub.core.publish.topic_row; here the group commit adds what
only it knows: the seqs (consecutive from the topic's next one), the commit's time and the message
bytes. The result is handed to an appender as column lists (sharedsub.storage.commits.py_columns
says why not as an Arrow table).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Protocol

from sharedsub.core import layout
from sharedsub.core.publish.topic_row import TopicColumns
from sharedsub.storage import schemas
from sharedsub.storage.commits.py_columns import PyColumns


class StoredMessage(Protocol):
    """A message about to be stored: its topic row but the commit's columns, and its bytes
    (sharedsub.runtime.commit_requests.Publish is one)."""

    @property
    def columns(self) -> TopicColumns:
        """Every column of schemas.TOPIC but ``seq``, ``published_at`` and ``message``."""

    @property
    def message(self) -> bytes:
        """The encoded message, stored untouched."""


def topic_batch(first_seq: int, published_at: dt.datetime, messages: Sequence[StoredMessage]) -> PyColumns:
    """``messages`` as the columns of one commit to their topic: seqs ``first_seq`` onwards in
    their order, the partition those seqs are numbered in (sharedsub.core.layout) and
    ``published_at`` for all. Every key of each row's columns must be a schemas.TOPIC
    field (a KeyError otherwise: a row the schema does not know is never stored)."""
    columns: dict[str, list[object]] = {name: [] for name in schemas.TOPIC.names}
    columns["seq"] = list(range(first_seq, first_seq + len(messages)))
    columns["published_at"] = [published_at] * len(messages)
    columns["partition"] = [layout.partition_of_seq(first_seq)] * len(messages)
    bodies = columns["message"]
    for item in messages:
        bodies.append(item.message)
        for name, value in item.columns.items():
            columns[name].append(value)
    return PyColumns(schemas.TOPIC, columns)
