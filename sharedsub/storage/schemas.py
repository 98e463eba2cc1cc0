"""Arrow schemas of every table sharedsub writes: one source of truth for front end, job and notebooks.

Topic table (``topics/<topic>``): one row per published message. ``message`` holds the exact
bytes of the AMQP message as received (header, annotations, properties, application
properties, body sections, footer); the other columns are typed copies of the fields routing,
selectors and notebooks need. Payload bytes exist only here.

Subscription table (``subscriptions/<key>/g<gen>``): one row per message routed to that
subscription generation. It refers to the message by ``(topic, seq)`` and carries the routing
metadata and the columns a backlog query needs, never the payload.

Ack log (``subscriptions/<key>/acks-g<gen>``) and dead-letter table
(``subscriptions/<key>/dlq-g<gen>``): see :data:`ACK` and :data:`DEAD_LETTER`.

Catalog table (``catalog/subscriptions``): append-only revisions of subscription records; the
row with the highest ``revision`` per ``key`` is the current state.
"""

from __future__ import annotations

import pyarrow as pa

TIMESTAMP = pa.timestamp("us", tz="UTC")

# One typed application-property value. ``type`` is the AMQP type name (int, long, double,
# string, boolean, ...); exactly one of the value fields is set for the types a JMS selector can
# compare (numbers, strings, booleans); other types keep a string rendering only.
PROPERTY_VALUE = pa.struct(
    [
        ("type", pa.string()),
        ("long", pa.int64()),
        ("double", pa.float64()),
        ("string", pa.string()),
        ("bool", pa.bool_()),
    ]
)

TOPIC = pa.schema(
    [
        ("seq", pa.int64()),  # position in the topic, 0-based, gap-free, commit order
        ("published_at", TIMESTAMP),  # time of the group commit that stored it
        ("publisher", pa.string()),  # container-id of the publishing connection (no-local)
        ("routing_key", pa.string()),
        ("partition", pa.int32()),
        ("size", pa.int32()),  # bytes of ``message``
        # header
        ("durable", pa.bool_()),
        ("priority", pa.int32()),
        ("ttl", pa.int64()),
        # properties (ids rendered as strings; the typed original stays in ``message``)
        ("message_id", pa.string()),
        ("user_id", pa.binary()),
        ("to", pa.string()),
        ("subject", pa.string()),
        ("reply_to", pa.string()),
        ("correlation_id", pa.string()),
        ("content_type", pa.string()),
        ("content_encoding", pa.string()),
        ("absolute_expiry_time", pa.int64()),  # ms since epoch
        ("creation_time", pa.int64()),  # ms since epoch
        ("group_id", pa.string()),
        ("group_sequence", pa.int64()),
        ("reply_to_group_id", pa.string()),
        ("application_properties", pa.map_(pa.string(), PROPERTY_VALUE)),
        ("message", pa.binary()),
    ]
)

# The columns routing needs: everything but the payload. The fan-out source reads only these.
ROUTING_COLUMNS = [f.name for f in TOPIC if f.name != "message"]

SUBSCRIPTION = pa.schema(
    [
        ("topic", pa.string()),
        ("seq", pa.int64()),
        ("partition", pa.int32()),
        ("routing_key", pa.string()),
        ("publisher", pa.string()),
        ("published_at", TIMESTAMP),
        ("routed_at", TIMESTAMP),
        ("size", pa.int32()),
        ("durable", pa.bool_()),
        ("priority", pa.int32()),
        ("ttl", pa.int64()),
        ("absolute_expiry_time", pa.int64()),
        ("message_id", pa.string()),
        ("correlation_id", pa.string()),
        ("subject", pa.string()),
        ("group_id", pa.string()),
        ("fanout_batch", pa.int64()),
    ]
)

# Columns copied verbatim from the topic row into the subscription row.
SUBSCRIPTION_FROM_TOPIC = [
    "seq",
    "partition",
    "routing_key",
    "publisher",
    "published_at",
    "size",
    "durable",
    "priority",
    "ttl",
    "absolute_expiry_time",
    "message_id",
    "correlation_id",
    "subject",
    "group_id",
]

CATALOG = pa.schema(
    [
        ("key", pa.string()),  # layout.subscription_key(namespace, name, shared, durable)
        ("revision", pa.int64()),  # strictly increasing across the catalog
        ("namespace", pa.string()),  # container-id, or "global"
        ("name", pa.string()),
        ("shared", pa.bool_()),
        ("durable", pa.bool_()),
        ("generation", pa.int32()),
        ("state", pa.string()),  # "active" or "deleted"
        ("topic", pa.string()),
        ("binding", pa.string()),  # topic-exchange pattern, '#' when the address had none
        ("selector", pa.string()),  # JMS selector text, null when none
        ("no_local", pa.bool_()),
        ("expiry_policy", pa.string()),  # link-detach | session-end | connection-close | never
        ("start_seq", pa.int64()),  # first topic seq this generation may receive
        ("table", pa.string()),  # generation table, relative to the data dir
        ("source", pa.string()),  # JSON of the source terminus to answer a null-source lookup
        ("created_at", TIMESTAMP),
        ("updated_at", TIMESTAMP),
        # User who created it (sharedsub.core.security.permissions); null = anonymous. Added after the first
        # release: the catalog appender merges it into older catalogs' schema.
        ("owner", pa.string()),
        # JSON {partition: first seq} of the topic's other partitions (SubscriptionRecord.start_seqs);
        # null: none. Added with partitions, merged into older catalogs' schema like ``owner``.
        ("start_seqs", pa.string()),
    ]
)

ACK = pa.schema(
    [
        ("seq", pa.int64()),  # topic seq of the message
        # accepted | dead-lettered | expired: settled for good (older logs: rejected);
        # failed: one failed delivery (modified delivery-failed, or unsettled when its link went
        # away), not an acknowledgement; the count of these rows is the message's delivery count
        ("outcome", pa.string()),
        ("acked_at", TIMESTAMP),
        ("consumer", pa.string()),  # container-id of the consumer that settled it ("" when none)
    ]
)
"""Acknowledgement log of a subscription generation: one row per message settled for good, plus
one ``failed`` row per failed delivery (sharedsub.core.delivery.outcomes.AckOutcome)."""

DEAD_LETTER = pa.schema(
    [
        ("topic", pa.string()),
        ("seq", pa.int64()),  # the message is row ``seq`` of ``topics/<topic>``
        ("reason", pa.string()),  # rejected | max-delivery-count (sharedsub.core.delivery.outcomes.DeadLetterReason)
        ("error_condition", pa.string()),  # the rejected outcome's error condition, if any
        ("error_description", pa.string()),  # ... and its description
        ("delivery_count", pa.int64()),  # failed deliveries when it was dead-lettered
        ("consumer", pa.string()),  # container-id of the consumer whose settlement moved it here
        ("message_id", pa.string()),  # properties.message-id as a string, for people looking
        ("dead_lettered_at", TIMESTAMP),
    ]
)
"""Dead-letter table of a subscription generation: messages that will never be delivered again."""

LINKS = pa.schema(
    [
        ("key", pa.string()),  # subscription key
        ("generation", pa.int32()),
        ("link", pa.string()),  # link name
        ("container", pa.string()),  # container-id of the consumer's connection
        ("connection", pa.string()),  # front-end connection id (distinguishes two connections of one container)
        ("event", pa.string()),  # attached | detached
        ("at", TIMESTAMP),
    ]
)
"""Consumer link attach/detach events; the links attached to a subscription are those whose last event is ``attached``."""

SPARK_APP_ID = "sharedsub-fanout"
"""Delta app-transaction id of the fan-out; its version is the highest topic seq in the table."""
