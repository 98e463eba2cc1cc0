"""AMQP symbols sharedsub puts on the wire: conditions and capabilities. The only place they are spelled."""

from __future__ import annotations

import enum


class AmqpCondition(enum.StrEnum):
    """AMQP 1.0 error conditions used by sharedsub."""

    NOT_FOUND = "amqp:not-found"
    RESOURCE_LOCKED = "amqp:resource-locked"
    RESOURCE_LIMIT_EXCEEDED = "amqp:resource-limit-exceeded"
    INVALID_FIELD = "amqp:invalid-field"
    NOT_IMPLEMENTED = "amqp:not-implemented"
    INTERNAL_ERROR = "amqp:internal-error"
    DECODE_ERROR = "amqp:decode-error"
    NOT_ALLOWED = "amqp:not-allowed"
    UNAUTHORIZED_ACCESS = "amqp:unauthorized-access"
    MESSAGE_SIZE_EXCEEDED = "amqp:link:message-size-exceeded"
    LINK_STOLEN = "amqp:link:stolen"
    DETACH_FORCED = "amqp:link:detach-forced"
    TRANSACTION_UNKNOWN_ID = "amqp:transaction:unknown-id"
    TRANSACTION_ROLLBACK = "amqp:transaction:rollback"


class Capability(enum.StrEnum):
    """Connection and terminus capabilities."""

    SHARED_SUBS = "SHARED-SUBS"
    ANONYMOUS_RELAY = "ANONYMOUS-RELAY"
    SOLE_CONNECTION = "sole-connection-for-container"
    TOPIC = "topic"
    SHARED = "shared"
    GLOBAL = "global"


CONNECTION_OFFERED = (Capability.SHARED_SUBS, Capability.ANONYMOUS_RELAY, Capability.SOLE_CONNECTION)
"""Offered on every connection open (docs/design.md §4.1)."""

SELECTOR_FILTER_CODE = 0x0000468C00000004
SELECTOR_FILTER_SYMBOLS = ("apache.org:selector-filter:string", "apache.org:jms-selector-filter:string")
NO_LOCAL_FILTER_CODE = 0x0000468C00000003
NO_LOCAL_FILTER_SYMBOLS = ("apache.org:no-local-filter:list", "apache.org:jms-no-local-filter:list")
