"""Ending a non-durable subscription that no live member consumes any more; pure.

A non-durable subscription ends with its consumers (seed 000; sharedsub.core.subscriptions.attach,
detach rows c, f, g). With several members, the member whose consumer leaves last ends it
(counting the others' consumers). When that member **dies** instead, nobody detaches: its
connections are gone, and the subscription would stay, its table filling, until unsubscribed.
So every member looks, now and then, at the active non-durable subscriptions it has no consumer
of, and at who says they have one (presence objects of live members). One that no live member
consumes is **watched**; one watched for a whole ``grace`` is **ended** (a catalog revision,
which other members merge). The grace covers a consumer that just attached on a member that has
not written its presence yet (it does so at its next reading, within one interval of the
partition owners' thread, sharedsub.runtime.cluster.partition_owners).

:func:`verdict` decides for one subscription at one look:

====  ====================================================  ==============================
 #    the subscription                                      verdict
====  ====================================================  ==============================
 1    durable                                               ``keep`` (ends by unsubscribe)
 2    non-durable, ends with a session or connection         ``keep`` (that scope may still
                                                            live on a member without a
                                                            consumer, which presence does
                                                            not show)
 3    consumers here, or a live member says it has some     ``keep``
 4    no live consumer, first seen so, or for less than     ``watch`` (since when)
      ``grace``
 5    no live consumer for ``grace`` or more                ``end``
====  ====================================================  ==============================

Rows 1 and 2 by the record alone; a plain consumer (unshared non-durable) and a shared
non-durable subscription with expiry ``link-detach`` (how the Qpid JMS client asks for one, docs/wire.md
§1.4) are the ones looked at.
"""

from __future__ import annotations

import enum

from sharedsub.core.model import ExpiryPolicy, SubscriptionRecord


class Verdict(enum.Enum):
    """What a member does with a subscription at one look (module docstring)."""

    KEEP = "keep"
    WATCH = "watch"
    END = "end"


def looked_at(record: SubscriptionRecord) -> bool:
    """Rows 1 and 2: whether a look may end ``record`` at all (an active non-durable
    subscription that ends with its links: a plain consumer, or expiry ``link-detach``)."""
    if not record.active or record.identity.durable:
        return False
    return not record.identity.shared or record.expiry_policy is ExpiryPolicy.LINK_DETACH


def verdict(
    record: SubscriptionRecord, *, consumed: bool, unconsumed_since: float | None, now: float, grace: float
) -> tuple[Verdict, float | None]:
    """The verdict on ``record`` and since when it has had no live consumer (None: it has one).

    Args:
        record: the catalog's latest record of the subscription.
        consumed: this member has consumers of its generation, or a live member says it has.
        unconsumed_since: what the previous look returned (None: it was consumed, or not looked at).
        now: a monotonic clock's time of this look.
        grace: seconds without a live consumer before it ends.
    """
    if not looked_at(record) or consumed:
        return Verdict.KEEP, None
    since = now if unconsumed_since is None else unconsumed_since
    if now - since >= grace:
        return Verdict.END, since
    return Verdict.WATCH, since
