"""Typed errors; each carries the facts and the AMQP condition it maps to (one mapping, here)."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from sharedsub.core.conditions import AmqpCondition
from sharedsub.core.publish.write_faults import errno_name

if TYPE_CHECKING:
    from sharedsub.core.model import SubscriptionRecord


class SharedSubError(Exception):
    """Root of sharedsub's errors. ``condition`` is what a link or delivery refusal carries."""

    condition: AmqpCondition = AmqpCondition.INTERNAL_ERROR

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class TopicNotFound(SharedSubError):
    """An address names a topic that does not exist (and auto-creation is off)."""

    condition = AmqpCondition.NOT_FOUND

    def __init__(self, topic: str) -> None:
        super().__init__(
            f"topic {topic!r} does not exist; create it with 'sharedsub topics create {topic}' "
            "or set auto_create_topics = true"
        )
        self.topic = topic


class TopicExists(SharedSubError):
    """``topics create`` of a topic that is already there."""

    condition = AmqpCondition.RESOURCE_LOCKED

    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic!r} already exists")
        self.topic = topic


class InvalidAddress(SharedSubError):
    """An address that cannot name a topic."""

    condition = AmqpCondition.INVALID_FIELD

    def __init__(self, address: str | None, reason: str) -> None:
        super().__init__(f"invalid address {address!r}: {reason}")
        self.address = address


class InvalidAttach(SharedSubError):
    """An attach whose fields cannot be read (e.g. an address that is not valid UTF-8)."""

    condition = AmqpCondition.INVALID_FIELD


class NotSupported(SharedSubError):
    """A feature the peer asked for that sharedsub does not implement."""

    condition = AmqpCondition.NOT_IMPLEMENTED


class MessageDecodeError(SharedSubError):
    """A transfer whose bytes are not an AMQP message."""

    condition = AmqpCondition.DECODE_ERROR


class InvalidMessage(SharedSubError):
    """A well-encoded message whose sections break the AMQP message format (e.g. an
    application-properties section that is not a map)."""

    condition = AmqpCondition.INVALID_FIELD


class MessageTooLarge(SharedSubError):
    """A published message larger than ``[server] max_message_size``."""

    condition = AmqpCondition.MESSAGE_SIZE_EXCEEDED

    def __init__(self, limit: int) -> None:
        super().__init__(f"message larger than the {limit}-byte limit (server.max_message_size)")
        self.limit = limit


class UnknownTransaction(SharedSubError):
    """A transfer, settlement or discharge naming a transaction this connection has not declared
    (or one already discharged or rolled back)."""

    condition = AmqpCondition.TRANSACTION_UNKNOWN_ID

    def __init__(self, txn_id: bytes) -> None:
        super().__init__(
            f"unknown transaction id {txn_id.hex()}: not declared on this connection, "
            "or already discharged or rolled back"
        )
        self.txn_id = txn_id


class TransactionRolledBack(SharedSubError):
    """A discharge asking to commit a transaction that could not be committed; it was rolled back."""

    condition = AmqpCondition.TRANSACTION_ROLLBACK

    def __init__(self, txn_id: bytes, reason: str) -> None:
        super().__init__(f"transaction {txn_id.hex()} was rolled back: {reason}")
        self.txn_id = txn_id
        self.reason = reason


class TransactionTooLarge(SharedSubError):
    """A transactional publish beyond the per-transaction limit; the transaction can only roll back."""

    condition = AmqpCondition.RESOURCE_LIMIT_EXCEEDED

    def __init__(self, txn_id: bytes, limit: str) -> None:
        super().__init__(
            f"transaction {txn_id.hex()} holds more than {limit} of published messages "
            "(server.max_transaction_messages / max_transaction_bytes); it will roll back"
        )
        self.txn_id = txn_id


class ConfigError(SharedSubError):
    """An invalid configuration value, named by its key."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"configuration {key!r}: {reason}")
        self.key = key


class UserExists(SharedSubError):
    """``users add`` of a user the users file already holds."""

    def __init__(self, name: str) -> None:
        super().__init__(f"user {name!r} already exists; remove it first to set a new password")
        self.name = name


class UserNotFound(SharedSubError):
    """``users remove`` of a user the users file does not hold."""

    def __init__(self, name: str) -> None:
        super().__init__(f"user {name!r} does not exist")
        self.name = name


class InvalidUser(SharedSubError):
    """An invalid user name or password given to ``users add``."""


class SubscriptionNotFound(SharedSubError):
    """A subscription named on the command line (or in a notebook) that the catalog does not hold."""

    condition = AmqpCondition.NOT_FOUND

    def __init__(self, name: str) -> None:
        super().__init__(
            f"no subscription {name!r}; give its key, '<namespace>:<name>' or a unique name "
            "(see 'sharedsub subscriptions list')"
        )
        self.name = name


class AmbiguousSubscription(SharedSubError):
    """A subscription name that matches several subscriptions; ``candidates`` are their keys."""

    condition = AmqpCondition.NOT_FOUND

    def __init__(self, name: str, candidates: list[str]) -> None:
        super().__init__(f"{name!r} names {len(candidates)} subscriptions; use one of their keys: " + ", ".join(candidates))
        self.name = name
        self.candidates = candidates


class SubscriptionInUse(SharedSubError):
    """``unsubscribe`` of a subscription that still has consumer links attached."""

    condition = AmqpCondition.RESOURCE_LOCKED

    def __init__(self, name: str, consumers: int) -> None:
        super().__init__(
            f"subscription {name!r} has {consumers} consumer link(s) attached; "
            "unsubscribe is refused while consumers are attached (detach them first)"
        )
        self.name = name
        self.consumers = consumers


class SubscriptionMoved(SharedSubError):
    """A catalog write of a subscription generation that another member of the data dir has
    meanwhile created, or gone past (docs/design.md §8): decide again on ``record``, its latest."""

    condition = AmqpCondition.RESOURCE_LOCKED

    def __init__(self, record: SubscriptionRecord) -> None:
        super().__init__(
            f"subscription {record.identity.name!r} was changed on another member of the cluster "
            f"(generation {record.generation}, {record.state}); attach again"
        )
        self.record = record


class TopicInUse(SharedSubError):
    """``topics drop`` of a topic that subscriptions, consumers or publishers still use."""

    condition = AmqpCondition.RESOURCE_LOCKED

    def __init__(self, topic: str, reason: str) -> None:
        super().__init__(f"topic {topic!r} is in use: {reason}")
        self.topic = topic
        self.reason = reason


class DataDirInUse(SharedSubError):
    """A second ``serve``/``frontend`` on a data dir another process owns (its ``flock`` on a local
    dir, its lease on object storage: sharedsub.core.ownership.lease)."""

    condition = AmqpCondition.RESOURCE_LOCKED

    def __init__(self, data_dir: str, pid: int | None, address: str | None, *, host: str | None = None) -> None:
        self.data_dir = data_dir
        self.pid = pid
        self.host = host
        where = f" serving {address}" if address else ""
        super().__init__(
            f"data dir {data_dir} is in use by {self.holder}{where}; one service per data dir "
            "(stop it first, or give this one another --data-dir)"
        )

    @property
    def holder(self) -> str:
        """Who holds it, for a message: ``process 123 on host``."""
        who = f"process {self.pid}" if self.pid else "another process"
        return who + (f" on {self.host}" if self.host else "")


class FanoutInUse(DataDirInUse):
    """``serve`` on object storage, whose fan-out a fan-out job elsewhere already is (it holds
    the fan-out lease): the tables must have one writer."""

    def __init__(self, data_dir: str, pid: int | None, host: str | None) -> None:
        self.data_dir = data_dir
        self.pid = pid
        self.host = host
        SharedSubError.__init__(
            self,
            f"a fan-out job ({self.holder}) writes the subscription tables of {data_dir}: run "
            "`sharedsub frontend` beside it, or stop it first",
        )


class StorageUnavailable(SharedSubError):
    """The data dir cannot take writes: no space left, over quota, or a read-only file system.

    Raised by the committer for a write it gave up on (the fault outlasted ``[storage]
    full_disk_timeout``, or the service is stopping: sharedsub.core.publish.write_faults), and by ``serve`` /
    ``frontend`` when the data dir cannot take writes at start. A publish is rejected with it; the
    condition tells clients it is a resource limit, to retry later, not a bad message.
    """

    condition = AmqpCondition.RESOURCE_LIMIT_EXCEEDED

    def __init__(
        self, data_dir: str, code: int, reason: str, *, waited: float | None = None, timeout: float | None = None
    ) -> None:
        """``code``/``reason``: the errno and its text; ``waited``: how long the data dir has
        refused writes (None: found at start); ``timeout``: the full_disk_timeout."""
        what = f"data dir {data_dir} cannot take writes: {reason} ({errno_name(code)})"
        if waited is None:
            fix = "remount it read-write" if code == errno.EROFS else "free space on it"
            tail = f"; {fix}, then start again"
        elif timeout is not None and waited >= timeout:
            tail = f"; not stored: it has refused writes for {waited:.0f} s, storage.full_disk_timeout is {timeout:g} s"
        else:
            tail = "; not stored: the service is stopping"
        super().__init__(what + tail)
        self.data_dir = data_dir
        self.code = code
        self.reason = reason
        self.waited = waited


class StoreUnusable(SharedSubError):
    """The object store of a data dir cannot be used: unreachable, credentials refused, no such
    bucket, or it ignores conditional writes (which the commits and the owner lease rely on).
    ``serve``/``frontend`` refuse to start with it; the message names the setting to check."""

    condition = AmqpCondition.RESOURCE_LIMIT_EXCEEDED

    def __init__(self, data_dir: str, reason: str) -> None:
        super().__init__(f"data dir {data_dir}: {reason}")
        self.data_dir = data_dir
        self.reason = reason


class ExecutorsUnfit(SharedSubError):
    """The Spark executors' Python cannot run the fan-out's code: a package missing or at another
    version than the driver's, another Python, or a Python worker that cannot start or load the
    job's code. The description is one line naming the executor hosts, what differs and the fix
    (sharedsub.core.fanout.executor_env); the fan-out job stops at start with it (exit 6)."""


class ServiceUnavailable(SharedSubError):
    """A service runs on the data dir but its admin endpoint cannot be reached or did not answer."""


# --------------------------------------------------------------------------- replay (sharedsub.core.ops.replay)


class ReplayNotDurable(SharedSubError):
    """A replay of a non-durable subscription: it keeps no acknowledgements and no history guarantee."""

    condition = AmqpCondition.NOT_ALLOWED

    def __init__(self, name: str) -> None:
        super().__init__(
            f"subscription {name!r} is not durable; only durable subscriptions can be replayed "
            "(a non-durable one keeps no acknowledgements and ends with its consumers)"
        )
        self.name = name


class VersionNotFound(SharedSubError):
    """A replay from a version the subscription table does not have yet (or a negative one)."""

    condition = AmqpCondition.INVALID_FIELD

    def __init__(self, name: str, version: int, latest: int) -> None:
        what = "its table has no commit yet" if latest < 0 else f"its table's latest version is {latest}"
        super().__init__(f"subscription {name!r} has no version {version}; {what}")
        self.name = name
        self.version = version
        self.latest = latest


class HistoryUnavailable(SharedSubError):
    """A replay from a point older than the retained Delta history of the subscription table."""

    condition = AmqpCondition.NOT_FOUND

    def __init__(self, name: str, wanted: str, oldest_version: int | None, oldest_at: str | None, retention_hours: int) -> None:
        oldest = (
            f"the oldest version still available is {oldest_version} (committed {oldest_at})"
            if oldest_version is not None
            else "no version of its table is available"
        )
        super().__init__(
            f"cannot replay subscription {name!r} from {wanted}: that part of its Delta history is gone; "
            f"{oldest}. History is kept for [maintenance] history_retention_hours "
            f"(here {retention_hours} h); raise it to replay further back"
        )
        self.name = name
        self.oldest_version = oldest_version
        self.oldest_at = oldest_at
        self.retention_hours = retention_hours


class ReplayInProgress(SharedSubError):
    """A replay of a subscription while an earlier replay of it is still running."""

    condition = AmqpCondition.RESOURCE_LOCKED

    def __init__(self, name: str) -> None:
        super().__init__(f"a replay of subscription {name!r} is already running; try again when it is done")
        self.name = name


class ServiceRefused(SharedSubError):
    """A running service refused an admin call; ``code`` is its error code (sharedsub.core.ops.admin_rules)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class ReplayNeedsService(SharedSubError):
    """``replay`` on a data dir no service runs on."""

    def __init__(self, data_dir: str) -> None:
        super().__init__(
            f"no service runs on {data_dir}; a replay re-delivers messages to the subscription's "
            "consumers, which only a running service has: start 'sharedsub serve' (or 'frontend') on it first"
        )
        self.data_dir = data_dir


class Unauthorized(SharedSubError):
    """A connection's user lacks a permission (sharedsub.core.security.permissions): publish, consume or manage
    on a topic, or manage to use a subscription another user created."""

    condition = AmqpCondition.UNAUTHORIZED_ACCESS

    def __init__(
        self, user: str | None, permission: str, topic: str, *, subscription: str | None = None
    ) -> None:
        who = f"user {user!r}" if user is not None else "an anonymous connection"
        if subscription is not None:
            text = (
                f"subscription {subscription!r} on topic {topic!r} belongs to another user; {who} "
                f"needs the {permission} permission on {topic!r} to use it ([security] permissions_file)"
            )
        else:
            text = f"{who} has no {permission} permission on topic {topic!r} ([security] permissions_file)"
        super().__init__(text)
        self.user, self.permission, self.topic = user, permission, topic


class AdminTokenRequired(SharedSubError):
    """An HTTP request needs the service's admin token and came without it (or with another one):
    an admin call, or a console read of message contents (sharedsub.core.ops.console_access)."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"{what} needs the service's admin token (Authorization: Bearer TOKEN; the token is "
            "in <data_dir>/_service.json, readable by the service's user only)"
        )
