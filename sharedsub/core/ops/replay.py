"""Replay of a durable subscription from Delta history: the pure rules.

``sharedsub replay SUB --version V | --timestamp T`` re-delivers what the subscription's current
generation table held at version ``V`` — or at the latest version committed at or before ``T`` —
and everything routed to it after, to its consumers, even messages acknowledged since, marked
redelivered. The running service carries it out on its reactor thread
(connectors/amqp/replays.py); this module decides, with no I/O:

1. **Where to start** (:func:`start_version`): the version ``V`` (``-1``: before the table's
   first commit, i.e. its whole life) from the table's retained history.

   ==========================================  ===============================================
   request                                     start
   ==========================================  ===============================================
   ``--version V``, V in the retained log      V
   ``--version V``, V newer than the latest    VersionNotFound (exit 2)
   ``--version V``, V older than the log       HistoryUnavailable (exit 3)
   ``--timestamp T``                           latest version committed at or before T
   T before the first commit, log from 0       -1 (everything the table ever held)
   T before the oldest retained commit (> 0)   HistoryUnavailable (exit 3)
   no commit at all                            VersionNotFound (exit 2)
   ==========================================  ===============================================

2. **What to re-deliver** (:func:`plan_replay`): the seqs of the table *as of* ``V`` (time
   travel: rows maintenance deleted since are still there) plus the seqs appended after ``V``
   (maintenance's rewrites add no new rows, sharedsub.storage.delta.commit_log.read_commit).

   * ``mark`` — those the ack log says are settled for good now get one ``replayed`` ack-log row
     each, which opens them again (sharedsub.core.delivery.acklog: settled ⇔ final rows > replayed rows).
     Only the log counts: a mark for a message whose ack row is still on its way would stay
     unbalanced for good if that row never landed (a crash), leaving the message open after
     its next acknowledgement. The service stores every acknowledgement it took before the
     request first (connectors/amqp/replays.py); one taken since is not in the log yet, and
     the message counts as open, like rows waiting or outstanding on a link: they get
     nothing and are delivered once, not twice.
   * ``restore`` — those no longer in the current table (maintenance deleted them once they were
     acknowledged) are appended to it again, so the backlog, a restart and
     ``sharedsub backlog`` see them like any other open message.
   * ``reopen`` — what the service takes out of its in-memory acknowledged set: ``mark`` plus
     ``restore``.

Retention: a replay needs the table's Delta log from ``V`` on and the data files of every
version since ``V``. Both are kept ``[maintenance] history_retention_hours`` (default 168);
maintenance vacuums files and cleans log entries older than that. A point older than what is
left is refused with :class:`~sharedsub.core.errors.HistoryUnavailable`, naming the oldest version
still available (:func:`oldest_available`) and that key. Topic tables are never vacuumed of
payloads a retained subscription version points at (they are append-only).
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
from collections.abc import Iterable, Sequence

from sharedsub.core.errors import ConfigError, HistoryUnavailable, VersionNotFound

BEFORE_FIRST_COMMIT = -1
"""Start "version" meaning: before the table existed (replay everything it ever held)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Commit:
    """One retained commit of a subscription table: version and commit time (ms since the epoch)."""

    version: int
    timestamp_ms: int


def parse_point(version: object, timestamp: object) -> tuple[int | None, int | None]:
    """``(version, timestamp_ms)`` of a replay request: exactly one of an int ``version`` (>= 0)
    and an ISO-8601 ``timestamp`` string (no zone: UTC).

    Raises:
        ConfigError: neither or both, or a value of the wrong form (named by its field).
    """
    if (version is None) == (timestamp is None):
        raise ConfigError("version", "give exactly one of a version and a timestamp")
    if version is not None:
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ConfigError("version", f"must be a table version (an integer >= 0), not {version!r}")
        return version, None
    if not isinstance(timestamp, str):
        raise ConfigError("timestamp", f"must be an ISO-8601 string, not {timestamp!r}")
    try:
        when = dt.datetime.fromisoformat(timestamp)
    except ValueError:
        raise ConfigError("timestamp", f"{timestamp!r} is not an ISO-8601 time (e.g. 2026-01-31T12:00:00Z)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return None, int(when.timestamp() * 1000)


def iso(ms: int) -> str:
    """``ms`` since the epoch as an ISO-8601 UTC instant (what errors and reports print)."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds")


def oldest_available(history: Sequence[Commit], *, now_ms: int, retention_hours: int) -> Commit | None:
    """The oldest commit a replay can be asked to start from: the oldest retained one inside the
    retention window (older ones may have lost their files to vacuum), else the latest; None
    when there is no commit."""
    if not history:
        return None
    cutoff = now_ms - retention_hours * 3_600_000
    for commit in history:
        if commit.timestamp_ms >= cutoff:
            return commit
    return history[-1]


def start_version(
    history: Sequence[Commit],
    *,
    name: str,
    version: int | None = None,
    timestamp_ms: int | None = None,
    now_ms: int,
    retention_hours: int,
) -> int:
    """The version a replay starts from (table above); ``history`` is oldest first.

    Exactly one of ``version`` and ``timestamp_ms`` is given.

    Raises:
        VersionNotFound: a version the table does not have yet, or no commit at all.
        HistoryUnavailable: a point older than the retained log.
    """
    if (version is None) == (timestamp_ms is None):
        raise ValueError("give exactly one of version and timestamp_ms")
    if not history:
        raise VersionNotFound(name, 0 if version is None else version, -1)
    latest = history[-1].version
    if version is not None and not 0 <= version <= latest:
        raise VersionNotFound(name, version, latest)
    oldest = history[0]

    def gone(wanted: str) -> HistoryUnavailable:
        avail = oldest_available(history, now_ms=now_ms, retention_hours=retention_hours)
        return HistoryUnavailable(
            name, wanted, avail.version if avail else None, iso(avail.timestamp_ms) if avail else None, retention_hours
        )

    if version is not None:
        if version < oldest.version:
            raise gone(f"version {version}")
        return version
    assert timestamp_ms is not None
    times = [c.timestamp_ms for c in history]
    i = bisect.bisect_right(times, timestamp_ms) - 1
    if i >= 0:
        return history[i].version
    if oldest.version == 0:
        return BEFORE_FIRST_COMMIT
    raise gone(f"{iso(timestamp_ms)}")


@dataclasses.dataclass(frozen=True, slots=True)
class ReplayPlan:
    """What a replay does (see the module docstring); all sorted ascending."""

    seqs: tuple[int, ...]  # every seq re-delivered (unless it is open already)
    mark: tuple[int, ...]  # seqs that get a ``replayed`` ack-log row
    restore: tuple[int, ...]  # seqs appended to the current table again
    reopen: tuple[int, ...]  # seqs the service no longer counts as acknowledged


def plan_replay(
    at_version: Iterable[int],
    appended_after: Iterable[int],
    current: Iterable[int],
    settled_in_log: Iterable[int],
) -> ReplayPlan:
    """The plan from the seqs of the table at the start version, those appended after it, those
    in the current table and those the ack log says are settled (the service stores the
    acknowledgements it took before the replay was asked for first: connectors/amqp/replays.py)."""
    replayed = set(at_version) | set(appended_after)
    now = set(current)
    restore = replayed - now
    mark = replayed & set(settled_in_log)
    return ReplayPlan(
        tuple(sorted(replayed)), tuple(sorted(mark)), tuple(sorted(restore)), tuple(sorted(mark | restore))
    )


@dataclasses.dataclass(frozen=True, slots=True)
class ReplayReport:
    """What a replay did (the admin endpoint's reply and the CLI's output)."""

    key: str
    name: str
    generation: int
    version: int  # start version (-1: from the table's first commit)
    version_at: str | None  # commit time of ``version`` (ISO-8601), None for -1
    latest_version: int
    messages: int  # seqs replayed
    reopened: int  # of those, settled before the replay (delivered again)
    restored: int  # of those, appended to the table again
    consumers: int  # consumer links attached on this service when it started

    def to_json(self) -> dict[str, object]:
        """JSON-ready dict."""
        return dataclasses.asdict(self)

    def describe(self) -> str:
        """One line for people."""
        point = "its first commit" if self.version < 0 else f"version {self.version} ({self.version_at})"
        tail = (
            f"delivering to {self.consumers} consumer link(s)"
            if self.consumers
            else "no consumer attached: they are delivered when one attaches"
        )
        return (
            f"replayed {self.name} generation {self.generation} from {point} to version {self.latest_version}: "
            f"{self.messages} message(s), {self.reopened} of them acknowledged before; {tail}"
        )
