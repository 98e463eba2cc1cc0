"""The topic row of a published message, built in one place; pure.

A topic table row (schema: sharedsub.storage.schemas.TOPIC) comes from three sources:

* the message itself: :func:`sharedsub.core.publish.amqp_message.decode` reads its header and
  properties fields and application properties into ``Decoded.columns``;
* the link it came on and the front end: :func:`topic_columns` adds the routing key
  (docs/design.md §3: sharedsub.core.addressing.routing_key), the publisher's container-id
  (no-local) and the message's size;
* the group commit that stores it: ``seq``, ``partition`` (the partition its seqs are numbered
  in, sharedsub.core.layout), ``published_at`` and the ``message`` bytes, added by
  sharedsub.storage.topic_rows when the committer turns a group into columns.

The handler, the committer and the fuzz tier all build rows through these functions, so a new
column is added here and in the schema, nowhere else.
"""

from __future__ import annotations

from sharedsub.core.addressing import Address, routing_key
from sharedsub.core.publish.amqp_message import Decoded

TopicColumns = dict[str, object]
"""A topic row's columns but ``seq``, ``published_at`` and ``message`` (values as
``pyarrow.Table.from_pydict`` takes them for sharedsub.storage.schemas.TOPIC)."""

def topic_columns(decoded: Decoded, address: Address, *, publisher: str, size: int) -> TopicColumns:
    """The topic row of ``decoded`` (whose transfer was ``size`` bytes) published to ``address``
    by the connection of container-id ``publisher``, but the columns the commit adds.

    ``decoded.columns`` is taken over (its dict is extended and returned, not copied).

    Raises:
        InvalidAddress: a routing key longer than the binding rules allow.
    """
    columns: TopicColumns = decoded.columns
    columns["routing_key"] = routing_key(address, decoded.routing_properties, decoded.subject)
    columns["publisher"] = publisher
    columns["size"] = size
    return columns
