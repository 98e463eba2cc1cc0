"""What the committer does while the data dir cannot take a write (no space left, over quota,
read-only file system; on object storage, a store that does not answer); pure: time is passed
in, nothing here touches a file.

Such a write error is a *storage fault* (:func:`fault_errno`): not the fault of the requests in
the write, and it passes once space returns, the file system is remounted read-write, or the
store answers again. A store outage is named by the errno of what the client met
(:data:`STORE_ERRNOS`: refused or dropped connections, timeouts, 5xx answers), so both kinds of
fault follow one path. A store that answers with a refusal (credentials, no such bucket) is not
a storage fault: it needs an operator, and the write fails at once. The committer, the front
end's only writer, then follows :class:`FaultClock`:

1. **Hold.** The failed write is retried as it was (the same rows, the same seqs, the same
   commit id, so a commit that landed although delta-rs reported an error is found, not made
   twice) with a doubling delay (:attr:`RetryPolicy.first_delay` .. :attr:`RetryPolicy.max_delay`).
   Everything queued behind it waits: publishers keep their unsettled deliveries and get no
   credit back, so they block, as Artemis and RabbitMQ block producers on a full disk.
2. **Give up** once the fault has lasted ``[storage] full_disk_timeout`` seconds (counted from
   the first failed write since the last one that succeeded). From then on each write is tried
   once. What a client waits to hear about is refused (:data:`REFUSE`: the caller gets
   :class:`~sharedsub.core.errors.StorageUnavailable`, ``amqp:resource-limit-exceeded``); what records
   a settlement is kept (:data:`PARK`: in memory, in order, tried again with every later group
   and every ``max_delay`` while idle, so an acknowledgement is never dropped while the process
   lives; after a restart its message is delivered again). See :data:`ON_GIVE_UP`.
3. **Clear** at the first write (or, while idle, probe write) that succeeds: held and parked
   writes go through, publishes are accepted again.

The fault is logged when it starts, when it passes the timeout and when it clears, never per
retry (:meth:`FaultClock.failure` and :meth:`FaultClock.success` say when).

Decisions, by the request kind of the write (tested as a table in tests/unit/test_write_faults.py):

=================  =======================  ================================================
kind               fault < timeout          fault >= timeout (or the service is stopping)
=================  =======================  ================================================
publish            retry (hold)             refuse: rejected, resource-limit-exceeded
transaction        retry (hold)             refuse: discharge answers transaction:rollback
create-topic       retry (hold)             refuse: the attach / publish is refused
subscription       retry (hold)             refuse: the attach is refused
ack                retry (hold)             park
dead-letter        retry (hold)             park
link-event         retry (hold)             park
barrier            (no write of its own)    parked while anything of its group is parked
=================  =======================  ================================================
"""

from __future__ import annotations

import dataclasses
import enum
import errno
import os
import re
from collections.abc import Mapping

STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
"""Write errors that are the file system's state, not the data's: they pass when it changes."""

STORE_ERRNOS = frozenset({errno.ECONNREFUSED, errno.ETIMEDOUT, errno.EAGAIN})
"""How an object store that does not answer is named (:func:`store_errno`): unreachable or the
connection dropped (ECONNREFUSED), no answer in time (ETIMEDOUT), a 5xx answer (EAGAIN). They
pass when the store is back."""

FAULT_ERRNOS = STORAGE_ERRNOS | STORE_ERRNOS

# The object_store client (delta-rs's and obstore's) says "Generic S3 error: Error performing
# PUT http://... after N retries ... - HTTP error: error sending request"; the cause is in the tail.
_STORE_ERROR = re.compile(r"Generic S3 error|Error performing \w+ https?://|object store \S+ did not answer")
# In this order: a timed-out request also says "error sending request".
_STORE_CAUSES = (
    (re.compile(r"timed out|deadline has elapsed"), errno.ETIMEDOUT),
    (re.compile(r"status code: 5\d\d|\b50[0-4] |Service Unavailable|Internal Server Error|SlowDown"), errno.EAGAIN),
    (re.compile(r"error sending request|[Cc]onnection (refused|reset|closed)|connect error|Broken pipe"), errno.ECONNREFUSED),
)

# delta-rs (object_store) reports an io::Error as text only, displayed ("... No space left on
# device (os error 28)") or debug-printed ("Os { code: 30, kind: ReadOnlyFilesystem, ... }").
_OS_ERROR = re.compile(r"\(os error (\d+)\)|\bOs \{ code: (\d+)")


def store_errno(text: str) -> int | None:
    """The :data:`STORE_ERRNOS` code of an object-store client's error text that says the store
    did not answer (unreachable, timed out, 5xx), else None (another error, or one the store
    answered: refused credentials, no such bucket, a failed condition)."""
    if not _STORE_ERROR.search(text):
        return None
    for pattern, code in _STORE_CAUSES:
        if pattern.search(text):
            return code
    return None


def fault_errno(exc: BaseException) -> int | None:
    """The errno of the storage fault ``exc`` reports (one of :data:`FAULT_ERRNOS`), else None.

    Looks at an ``OSError``'s errno, at the ``(os error N)`` delta-rs puts in its messages, at
    an object-store client's text (:func:`store_errno`), and then at the exceptions ``exc`` was
    raised from.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in FAULT_ERRNOS:
            return current.errno
        text = str(current)
        for match in _OS_ERROR.finditer(text):
            code = int(match.group(1) or match.group(2))
            if code in STORAGE_ERRNOS:
                return code
        named = store_errno(text)
        if named is not None:
            return named
        current = current.__cause__ or current.__context__
    return None


def errno_name(code: int) -> str:
    """``ENOSPC`` for 28 (the symbolic name; the number when it has none)."""
    return errno.errorcode.get(code, str(code))


class OnGiveUp(enum.Enum):
    """What becomes of a write's requests once the fault outlasted the timeout."""

    REFUSE = "refuse"  # reported failed (StorageUnavailable): its client hears a refusal
    PARK = "park"  # kept in memory, in order, and written once the data dir takes writes again


REFUSE = OnGiveUp.REFUSE
PARK = OnGiveUp.PARK

ON_GIVE_UP: Mapping[str, OnGiveUp] = {
    "publish": REFUSE,
    "transaction": REFUSE,
    "create-topic": REFUSE,
    "subscription": REFUSE,
    "ack": PARK,
    "dead-letter": PARK,
    "link-event": PARK,
    "barrier": PARK,
}
"""Request kind -> what giving up on its write does (the table in the module docstring)."""


@dataclasses.dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long and how often a write failing with a storage fault is tried again."""

    timeout: float  # [storage] full_disk_timeout: seconds of fault before giving up (0: at once)
    first_delay: float = 0.05
    max_delay: float = 2.0

    def delay(self, waited: float, attempt: int, *, stopping: bool = False) -> float | None:
        """Seconds to wait before trying the write again, or None to give up.

        ``waited``: seconds since the fault began; ``attempt``: failed tries of this write so far
        (1 after its first failure). The delay doubles per attempt up to ``max_delay`` and never
        reaches past the timeout, so the last retry comes at the timeout, not up to
        ``max_delay`` after it. A stopping service gives up at once (its publishers are refused
        rather than left unanswered at the close).
        """
        if stopping or waited >= self.timeout:
            return None
        backoff: float = self.first_delay * 2 ** max(0, attempt - 1)  # int ** int is typed Any (a negative power is a float)
        return max(0.0, min(backoff, self.max_delay, self.timeout - waited))


@dataclasses.dataclass(frozen=True, slots=True)
class Fault:
    """The storage fault in progress: what failed first, and since when."""

    code: int  # errno
    message: str  # its strerror, e.g. "No space left on device"
    path: str  # the table (or file) whose write failed first
    since: float  # monotonic seconds when it began
    since_wall: float  # the same as epoch seconds (for /health)

    @property
    def name(self) -> str:
        """The errno's symbolic name (``ENOSPC``)."""
        return errno_name(self.code)


def fault_of(code: int, path: str, now: float, wall: float) -> Fault:
    """A :class:`Fault` of ``code`` that begins now."""
    return Fault(code, os.strerror(code), path, now, wall)


class FaultClock:
    """The committer's view of the data dir: writable, or a fault since when (one writer thread).

    :attr:`fault` is replaced, never changed in place, so other threads (/health, /metrics) may
    read it at any time.
    """

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.fault: Fault | None = None
        self.failed_writes = 0  # failed tries during the current fault
        self._gave_up = False

    def failure(self, code: int, path: str, now: float, wall: float) -> Fault | None:
        """A write failed with storage fault ``code``; the new :class:`Fault` when this one
        starts a fault (log it), else None (a retry during a fault already logged)."""
        self.failed_writes += 1
        if self.fault is not None:
            return None
        self.fault = fault_of(code, path, now, wall)
        self._gave_up = False
        return self.fault

    def success(self) -> tuple[Fault, int] | None:
        """A write succeeded: ``(the fault that ends now, its failed tries)`` (log it), or None
        when there was no fault."""
        ended = self.fault
        if ended is None:
            return None
        failed, self.fault, self.failed_writes, self._gave_up = self.failed_writes, None, 0, False
        return ended, failed

    def waited(self, now: float) -> float:
        """Seconds the current fault has lasted (0 without one)."""
        return 0.0 if self.fault is None else max(0.0, now - self.fault.since)

    def retry_delay(self, now: float, attempt: int, *, stopping: bool = False) -> float | None:
        """:meth:`RetryPolicy.delay` for the current fault (None: give up)."""
        return self.policy.delay(self.waited(now), attempt, stopping=stopping)

    def refusing(self, now: float) -> bool:
        """True while the fault has outlasted the timeout: writes are tried once, then given up."""
        return self.fault is not None and self.waited(now) >= self.policy.timeout

    def gave_up(self) -> bool:
        """Record that the committer gave up on a write; True the first time in this fault
        (log that publishes are now refused), False after."""
        first = self.fault is not None and not self._gave_up
        self._gave_up = self._gave_up or self.fault is not None
        return first

    def idle_wait(self, parked: bool) -> float | None:
        """How long the committer may wait for new requests before it must act on its own:
        ``max_delay`` while a fault lasts or writes are parked (retry them, or probe whether
        the data dir takes writes again), else None (wait for requests)."""
        return self.policy.max_delay if self.fault is not None or parked else None
