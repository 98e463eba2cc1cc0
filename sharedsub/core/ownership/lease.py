"""Ownership of a data dir on object storage by a lease object: the decision tables; pure.

A local data dir is owned through ``flock`` (sharedsub.runtime.cluster.data_dir_owner.own_data_dir). An
object store has no locks, so one front end owns an ``s3://`` data dir by holding a lease
object ``_cluster/owner`` (sharedsub.core.layout): it **creates** it with put-if-absent and
**renews** it with put-if-match on the tag it last wrote, every ``renew_s`` seconds. Each taking
bumps the ``epoch`` (a clean stop marks the lease released instead of deleting it, so epochs
only grow over the data dir's life), which the holder's commits carry (fencing at the log: a commit that finds
its version taken under another epoch stops its writer).

Nothing here compares clocks of two machines. A lease is found **expired** when its tag stayed
the same for a whole ``ttl_s`` of the *observer's* own monotonic clock (its holder renews many
times per TTL); a lease left by a process of this host that is gone is taken at once (a SIGKILLed
service restarts without waiting, as with ``flock``).

Taking (:func:`decide_take`), given the lease read (or none), first match wins:

====  =========================================================  ==============================
 #    situation                                                   decision
====  =========================================================  ==============================
 1    no lease object                                             ``Create`` epoch 1
                                                                  (put-if-absent)
 2    released by its holder (a clean stop), or written by a      ``TakeOver`` epoch + 1
      process of this host that is no longer alive                (put-if-match on its tag)
 3    its tag unchanged for ``ttl_s`` of watching                 ``TakeOver`` epoch + 1
 4    its tag changed while watched (the holder renews)           ``Refuse``: DataDirInUse with
                                                                  its holder's address
 5    otherwise (watched less than ``ttl_s``, no change yet)      ``Watch`` again after
                                                                  ``renew_s`` (its holder's)
====  =========================================================  ==============================

A ``Create`` or ``TakeOver`` whose conditional put fails lost a race: the caller reads again and
asks again (someone else holds it now: row 4 or 5 follows).

Holding (:func:`decide_renewal`), after each renewal attempt:

====  =========================================================  ==============================
 a    renewed (put-if-match succeeded)                            ``Held`` until now + ttl
 b    refused: the tag changed (someone took it over)             ``Lost``: stop at once
 c    the store did not answer, and the last renewal is younger   ``Retry`` (keep serving)
      than ``ttl_s - renew_s`` (a taker waits ``ttl_s``)
 d    the store did not answer for longer                         ``Lost``: stop before a taker
                                                                  may take it
====  =========================================================  ==============================

Losing the lease is fail-stop: the front end stops accepting, closes its connections and exits
(it cannot know which of its writes the new owner saw; clients fail over and the new owner
redelivers what was not acknowledged).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Literal

DEFAULT_TTL_S = 15.0  # a lease not renewed for this long (as watched) may be taken over
DEFAULT_RENEW_S = 3.0  # the holder renews this often: five tries per TTL


@dataclasses.dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The body of a lease object (JSON). Never holds a secret: the admin token stays on the
    holder's disk."""

    holder: str  # unique per process: host, pid and a random part
    epoch: int
    host: str
    pid: int
    ttl_s: float
    renew_s: float
    amqp: str | None = None  # where its clients connect (for the refusal's message)
    http: str | None = None
    renewals: int = 0  # changes the body (and so the tag) with every renewal
    released: bool = False  # its holder stopped cleanly (the object stays: epochs only grow)

    def to_json(self) -> bytes:
        """The object's body."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True).encode()

    @staticmethod
    def from_json(data: bytes) -> LeaseRecord:
        """Read a body :meth:`to_json` wrote.

        Raises:
            ValueError: not a lease record (a file someone else put there).
        """
        try:
            raw = json.loads(data)
            return LeaseRecord(
                str(raw["holder"]), int(raw["epoch"]), str(raw["host"]), int(raw["pid"]), float(raw["ttl_s"]),
                float(raw["renew_s"]), raw.get("amqp"), raw.get("http"), int(raw.get("renewals", 0)),
                bool(raw.get("released", False)),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a lease record: {exc}") from None


@dataclasses.dataclass(frozen=True, slots=True)
class Seen:
    """A lease as the taker read it: its record, its tag, and how the watching went."""

    record: LeaseRecord
    etag: str
    watched_s: float  # how long (taker's monotonic clock) this tag has been seen unchanged
    changed: bool  # the tag changed since the taker first read the lease
    holder_alive: bool | None  # for a holder on this host: whether its pid lives; None: another host


@dataclasses.dataclass(frozen=True, slots=True)
class Create:
    """Row 1: create the lease (put-if-absent)."""

    epoch: int = 1


@dataclasses.dataclass(frozen=True, slots=True)
class TakeOver:
    """Rows 2-3: replace the lease read (put-if-match on its tag) with a higher epoch."""

    epoch: int
    etag: str  # the put-if-match condition
    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class Refuse:
    """Row 4: a live front end holds it."""

    holder: LeaseRecord


@dataclasses.dataclass(frozen=True, slots=True)
class Watch:
    """Row 5: read it again after ``wait_s``."""

    wait_s: float


TakeDecision = Create | TakeOver | Refuse | Watch


def decide_take(seen: Seen | None) -> TakeDecision:
    """Rows 1-5 of the module docstring."""
    if seen is None:
        return Create()
    rec = seen.record
    if rec.released:
        return TakeOver(rec.epoch + 1, seen.etag, "released by its holder")
    if seen.holder_alive is False:
        return TakeOver(rec.epoch + 1, seen.etag, f"its holder, process {rec.pid} of this host, is gone")
    if seen.changed:
        return Refuse(rec)
    if seen.watched_s >= rec.ttl_s:
        return TakeOver(rec.epoch + 1, seen.etag, f"not renewed for {seen.watched_s:.0f} s (ttl {rec.ttl_s:g} s)")
    return Watch(min(rec.renew_s, rec.ttl_s - seen.watched_s))


RenewalResult = Literal["renewed", "refused", "unanswered"]


@dataclasses.dataclass(frozen=True, slots=True)
class Held:
    """Row a: the lease is still this process's."""

    pass


@dataclasses.dataclass(frozen=True, slots=True)
class Retry:
    """Row c: try again at the next interval; keep serving."""

    pass


@dataclasses.dataclass(frozen=True, slots=True)
class Lost:
    """Rows b, d: stop (fail-stop)."""

    reason: str


RenewalDecision = Held | Retry | Lost


def decide_renewal(result: RenewalResult, *, since_renewed_s: float, ttl_s: float, renew_s: float) -> RenewalDecision:
    """Rows a-d of the module docstring; ``since_renewed_s``: the holder's monotonic time since
    it *sent* its last successful renewal (or the taking). Counted from the request, not the
    answer: the store wrote it after the request left, so a taker that read that tag at once
    can take over no sooner than ``ttl_s`` after the send, and the holder stops ``renew_s``
    before that."""
    if result == "renewed":
        return Held()
    if result == "refused":
        return Lost("the lease was taken over by another front end")
    if since_renewed_s < ttl_s - renew_s:
        return Retry()
    return Lost(f"the lease could not be renewed for {since_renewed_s:.0f} s (ttl {ttl_s:g} s)")
