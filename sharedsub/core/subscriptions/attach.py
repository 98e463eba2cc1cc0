"""Attach and detach decisions for topic subscriptions: the decision table; pure.

The front end turns a receiver attach into an :class:`~sharedsub.core.subscriptions.terminus.AttachRequest`, asks
:func:`decide_attach` what to do, and applies the returned value; on a detach it asks
:func:`decide_detach`. Nothing here does I/O: the catalog is read through the ``existing``
callable and every outcome is a frozen dataclass. Sources: docs/seeds.md (seed 000) (normative), docs/design.md §4
(which wins), docs/wire.md §2.4-§2.10 and §5.

Identity (docs/design.md §4.2, docs/wire.md §2.4) — ``SubscriptionKey(namespace, name, shared, durable)``:

* shared = source capability ``shared``; durable = terminus durable >= 1 (docs/seeds.md seed 000, not
  Broker-J's expiry ``never``, docs/wire.md D2);
* namespace = ``global`` when the source has capability ``global``, else the container-id;
* name = the link name cut at the first ``|`` when shared, the whole link name otherwise;
* unshared non-durable (a plain topic consumer): container-id and a fresh unique name given by
  the caller; ``global`` is ignored (docs/seeds.md seed 000 row YES NO YES NO: "the same as ... GLOBAL=NO").

Attach with a source (docs/seeds.md seed 000 rows "Not Null Source = YES"), first match wins:

====  =========================================================  ==============================
 #    situation                                                   decision
====  =========================================================  ==============================
 1    ``dynamic`` source                                          Refuse not-implemented
 2    address not ``T`` or ``T/pattern``, or pattern too long     Refuse invalid-field
 3    selector invalid (blank selector = none)                    Refuse invalid-field (filter)
 4    durable, and the same name in the same namespace exists     Refuse resource-locked
      with the other exclusivity (shared vs unshared)             (consumers or not, §4.4, D6)
 5    no subscription with this identity                          Create
 6    unshared, and it has a consumer attached                    Refuse resource-locked (§4.7;
                                                                  refused, not stolen, vs D7)
 7    topic, binding, selector or no-local differ, consumers      Refuse resource-locked (§4.4)
 8    ... differ, no consumers                                    NewGeneration (starts empty)
 9    shared, consumers already at ``shared_consumer_limit``      Refuse resource-limit-exceeded
10    otherwise (same source)                                     Join, reply expiry adjusted to
                                                                  the subscription's (docs/seeds.md seed 000)
====  =========================================================  ==============================

Attach with a null source (docs/seeds.md seed 000 rows "Not Null Source = NO", docs/design.md §4.5), a lookup in
the catalog: namespace ``global`` when the link name has the ``|global`` suffix, else the
container-id; try the unshared durable named by the whole link name (for a ``|global`` name also
the one named by the cut name), then the shared durable named by the name cut at the first
``|`` (shared non-durable for a ``|volatile`` name) — :func:`lookup_identities`:

====  =========================================================  ==============================
11    none of them exists                                         Refuse not-found ("No
                                                                  subscription link found")
12    found, unshared, a consumer attached                        Refuse resource-locked
13    found, shared, consumers at the limit                       Refuse resource-limit-exceeded
14    found                                                       Lookup: reply with the stored
                                                                  source
====  =========================================================  ==============================

Reply source (docs/wire.md §2.7): address echoed; capabilities ``[global?, shared?, topic]`` in
that order; durable 1 (configuration: the catalog keeps the terminus, not a link's unsettled
state, docs/wire.md §2.2) for a durable subscription, else 0; expiry policy of the subscription;
distribution mode ``copy`` for durable or shared ones; the applied selector and no-local, never
unknown filters (docs/design.md §4.8). The JSON of this reply is what the catalog stores
(:attr:`Create.stored_source`), so a lookup answers with it.

Detach (docs/design.md §4.6, docs/wire.md §2.9, scenarios 33-37), ``remaining`` = other consumer links:

====  =========================================================  ==============================
 a    durable, closed=true, remaining 0                           DeleteSubscription (unsubscribe)
 b    durable, closed=true, remaining > 0                         RefuseDelete resource-locked,
                                                                  reply closed=true, kept
 c    unshared non-durable (its name is unique to this link)      DeleteSubscription
 d    remaining > 0                                               KeepSubscription
 e    expiry ``never``                                            KeepSubscription (permanent)
 f    expiry ``link-detach``                                      DeleteSubscription
 g    ``session-end``/``connection-close`` and that scope ends    DeleteSubscription
 h    ``session-end``/``connection-close``, scope goes on         KeepSubscription, ends_with set
====  =========================================================  ==============================

A deletion is always answered closed=true (row c too: nothing can resume the link). Otherwise
the reply is closed=true when the client closed, or the expiry policy ends the link now
(``link-detach`` always, even after closed=false, scenario 35; ``session-end`` when the session
or connection ends; ``connection-close`` when the connection ends); otherwise closed=false.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Literal

from sharedsub.core.addressing import binding_of, parse_address
from sharedsub.core.conditions import AmqpCondition, Capability
from sharedsub.core.errors import InvalidAddress, SharedSubError
from sharedsub.core.model import GLOBAL_NAMESPACE, ExpiryPolicy, SubscriptionKey, SubscriptionRecord
from sharedsub.core.subscriptions.linknames import parse_link_name, subscription_name_of
from sharedsub.core.subscriptions.terminus import (
    DISTRIBUTION_COPY,
    AttachRequest,
    SourceSpec,
    TerminusDurability,
    is_global,
    is_shared,
    source_from_json,
    stored_source_json,
)

# ---------------------------------------------------------------------------------- inputs


@dataclasses.dataclass(frozen=True, slots=True)
class Existing:
    """A stored subscription and how many consumer links are attached to it now."""

    record: SubscriptionRecord
    consumers: int


ExistingLookup = Callable[[SubscriptionKey], Existing | None]
"""Reads the catalog (and the live link count) for one identity; None when there is none."""


# ---------------------------------------------------------------------------------- reply


@dataclasses.dataclass(frozen=True, slots=True)
class ReplySource:
    """What the source of a successful attach reply carries (docs/wire.md §2.7).

    Attributes:
        address: the source address.
        capabilities: ``[global?, shared?, topic]`` in Broker-J's order.
        durable: terminus durability to echo (1 for a durable subscription, else 0).
        expiry_policy: the subscription's expiry policy (adjusted when it differs from the
            request, docs/seeds.md (seed 000)).
        distribution_mode: ``copy`` for durable or shared subscriptions, else None.
        selector: the applied selector, None for none.
        no_local: the no-local filter is applied.
    """

    address: str | None
    capabilities: tuple[str, ...]
    durable: int
    expiry_policy: ExpiryPolicy
    distribution_mode: str | None
    selector: str | None
    no_local: bool

    def to_spec(self) -> SourceSpec:
        """As a :class:`SourceSpec` (not dynamic, no unknown filters)."""
        return SourceSpec(
            address=self.address,
            capabilities=self.capabilities,
            durable=self.durable,
            expiry_policy=self.expiry_policy,
            selector=self.selector,
            no_local=self.no_local,
            distribution_mode=self.distribution_mode,
        )

    @classmethod
    def from_spec(cls, spec: SourceSpec) -> ReplySource:
        """The reply fields of a stored source."""
        return cls(
            address=spec.address,
            capabilities=spec.capabilities,
            durable=spec.durable,
            expiry_policy=spec.expiry_policy,
            distribution_mode=spec.distribution_mode,
            selector=spec.selector,
            no_local=spec.no_local,
        )


# ---------------------------------------------------------------------------------- decisions


@dataclasses.dataclass(frozen=True, slots=True)
class Create:
    """Create the subscription ``identity`` (generation 1) and attach the link to it."""

    identity: SubscriptionKey
    topic: str
    binding: str
    selector: str | None
    no_local: bool
    expiry_policy: ExpiryPolicy
    reply: ReplySource

    @property
    def stored_source(self) -> str:
        """JSON for ``SubscriptionRecord.source``: what a later lookup answers."""
        return stored_source_json(self.reply.to_spec())


@dataclasses.dataclass(frozen=True, slots=True)
class Join:
    """Attach the link to the existing subscription ``record`` as one more consumer."""

    record: SubscriptionRecord
    reply: ReplySource


@dataclasses.dataclass(frozen=True, slots=True)
class NewGeneration:
    """Replace ``record`` by a new generation with these fields, then attach.

    No consumer is attached; the new generation starts empty (JMS: changing a subscription is
    unsubscribe + subscribe), the old generation's table stays readable until retention
    removes it (docs/design.md §4.4).
    """

    record: SubscriptionRecord
    topic: str
    binding: str
    selector: str | None
    no_local: bool
    expiry_policy: ExpiryPolicy
    reply: ReplySource

    @property
    def stored_source(self) -> str:
        """JSON for the new generation's ``SubscriptionRecord.source``."""
        return stored_source_json(self.reply.to_spec())


@dataclasses.dataclass(frozen=True, slots=True)
class Lookup:
    """Null-source attach that found ``record``: attach and answer with its stored source."""

    record: SubscriptionRecord
    reply: ReplySource


@dataclasses.dataclass(frozen=True, slots=True)
class Refuse:
    """Refuse the attach: null source in the reply, then detach closed=true with the error.

    Attributes:
        condition: the AMQP error condition.
        description: what happened and what a person can do about it.
        field: when set, the error info is ``{"field": field}`` (``filter`` for a selector).
    """

    condition: AmqpCondition
    description: str
    field: str | None = None


Decision = Create | Join | NewGeneration | Lookup | Refuse
"""The closed set :func:`decide_attach` returns."""


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteSubscription:
    """Delete the subscription now (unsubscribe, or its lifetime is over); reply closed=true."""

    record: SubscriptionRecord
    reply_closed: bool = True


@dataclasses.dataclass(frozen=True, slots=True)
class RefuseDelete:
    """Unsubscribe refused: reply closed=true carrying the error; the subscription stays."""

    record: SubscriptionRecord
    condition: AmqpCondition
    description: str
    reply_closed: bool = True


@dataclasses.dataclass(frozen=True, slots=True)
class KeepSubscription:
    """The subscription stays; only this link goes.

    Attributes:
        record: the subscription.
        reply_closed: answer detach closed=true (the link cannot be resumed) or closed=false.
        ends_with: None, or ``session``/``connection`` when the subscription now has no
            consumer and its lifetime ends with this link's session/connection: the caller
            calls :func:`decide_detach` again (``session_ending``/``connection_closing``) when
            that scope ends, unless a consumer has attached by then.
    """

    record: SubscriptionRecord
    reply_closed: bool
    ends_with: Literal["session", "connection"] | None = None


DetachDecision = DeleteSubscription | RefuseDelete | KeepSubscription
"""The closed set :func:`decide_detach` returns."""


# ---------------------------------------------------------------------------------- identity


def identity_for(request: AttachRequest, *, new_name: str | None = None) -> SubscriptionKey:
    """The subscription identity an attach names (docs/design.md §4.2; module docstring).

    Args:
        request: the attach.
        new_name: the fresh unique name for an unshared non-durable (plain) consumer.

    Returns:
        The identity. For a null source, the first one a lookup tries
        (:func:`lookup_identities`).

    Raises:
        ValueError: a plain consumer and no ``new_name``.
    """
    spec = request.source
    if spec is None:
        return lookup_identities(request)[0]
    shared = is_shared(spec)
    durable = spec.durable >= TerminusDurability.CONFIGURATION
    if not shared and not durable:
        if new_name is None:
            msg = "an unshared non-durable subscription needs new_name"
            raise ValueError(msg)
        # docs/seeds.md (seed 000) row YES NO YES NO: the same as without 'global', so the container's namespace
        # (which no-local compares with the publisher's container-id, docs/design.md §4.9).
        return SubscriptionKey(request.container_id, new_name, shared=False, durable=False)
    namespace = GLOBAL_NAMESPACE if is_global(spec) else request.container_id
    return SubscriptionKey(namespace, subscription_name_of(request.link_name, shared=shared), shared, durable)


def lookup_identities(request: AttachRequest) -> tuple[SubscriptionKey, ...]:
    """The identities a null-source attach may mean, in the order they are tried.

    Namespace ``global`` when the link name carries the ``|global`` suffix (docs/wire.md §3: the
    link capabilities Broker-J also reads are invisible to Proton-C), else the container-id.
    Then: the unshared durable named by the whole link name (Qpid JMS's unsubscribe uses the
    first-consumer name, ``sub``, for both kinds, docs/wire.md §1.9); for a ``|global`` name also
    the unshared durable named by the cut name; and the shared durable named by the name cut at
    the first ``|``. A ``|volatile`` name means the shared non-durable one instead: it never
    names a durable subscription (scenario 12). At most one of them exists, since unshared and
    shared durable subscriptions of one name and namespace exclude each other.
    """
    parsed = parse_link_name(request.link_name)
    namespace = GLOBAL_NAMESPACE if parsed.global_hint else request.container_id
    candidates = [SubscriptionKey(namespace, request.link_name, shared=False, durable=True)]
    if parsed.global_hint:
        # An unshared global durable (raw clients only: Qpid JMS needs a ClientID for unshared
        # ones) is named by its whole link name, and '|global' is how a lookup says global.
        candidates.append(SubscriptionKey(namespace, parsed.subscription_name, shared=False, durable=True))
    candidates.append(
        SubscriptionKey(namespace, parsed.subscription_name, shared=True, durable=not parsed.volatile_hint)
    )
    return tuple(candidates)


# ---------------------------------------------------------------------------------- attach


def decide_attach(
    request: AttachRequest,
    existing: ExistingLookup,
    *,
    shared_consumer_limit: int | None,
    new_name: str,
    validate_selector: Callable[[str], None],
) -> Decision:
    """Decide a receiver attach on a topic (the table in the module docstring).

    Args:
        request: the attach.
        existing: the catalog's active subscription for an identity and its consumer count;
            a record in state ``deleted`` counts as none.
        shared_consumer_limit: most consumer links one shared subscription may have; None is
            unlimited (docs/design.md §4.7).
        new_name: a fresh unique name, used only if the attach is a plain consumer.
        validate_selector: raises a :class:`~sharedsub.core.errors.SharedSubError` for a selector
            that does not parse; called before anything is looked up or created.

    Returns:
        One :data:`Decision`. Whether the topic exists is the caller's check (docs/design.md §3).

    Raises:
        ValueError: ``shared_consumer_limit`` below 1.
    """
    if shared_consumer_limit is not None and shared_consumer_limit < 1:
        msg = f"shared_consumer_limit must be None (unlimited) or at least 1, not {shared_consumer_limit}"
        raise ValueError(msg)
    spec = request.source
    if spec is None:
        return _decide_lookup(request, existing, shared_consumer_limit)

    if spec.dynamic:
        # Row 1; docs/wire.md §2.3 step 1 / §2.10.
        return Refuse(
            AmqpCondition.NOT_IMPLEMENTED,
            "Temporary subscription is not implemented: a dynamic source cannot subscribe to a "
            "topic; give the source an address naming a topic ('T' or 'T/pattern')",
        )
    try:
        address = parse_address(spec.address)
        binding = binding_of(address)
    except InvalidAddress as exc:
        # Row 2 (also a binding pattern past binding.MAX_PATTERN_LENGTH).
        return Refuse(AmqpCondition.INVALID_FIELD, exc.description)
    selector = spec.selector if spec.selector and spec.selector.strip() else None  # docs/wire.md §1.5
    if selector is not None:
        try:
            validate_selector(selector)
        except SharedSubError as exc:
            # Row 3; docs/design.md §4.8, docs/wire.md §2.5: nothing is created.
            return Refuse(AmqpCondition.INVALID_FIELD, exc.description, field="filter")

    identity = identity_for(request, new_name=new_name)
    topic, no_local = address.topic, spec.no_local
    # docs/seeds.md (seed 000): 'global' is echoed for durable or shared subscriptions only (row YES NO YES NO).
    global_cap = is_global(spec) and (identity.shared or identity.durable)

    if identity.durable:
        # Row 4; docs/design.md §4.4, docs/wire.md §5.15 / D6: unshared and shared durable of one name clash.
        other = _active(existing, dataclasses.replace(identity, shared=not identity.shared))
        if other is not None:
            return Refuse(AmqpCondition.RESOURCE_LOCKED, _exclusivity_clash(identity, other))

    # A plain consumer's name is fresh, so it cannot exist: no catalog read.
    found = _active(existing, identity) if identity.shared or identity.durable else None
    if found is None:
        # Row 5; docs/seeds.md (seed 000) every "YES" row.
        reply = _reply(spec.address, identity, global_cap, spec.expiry_policy, selector, no_local)
        return Create(identity, topic, binding, selector, no_local, spec.expiry_policy, reply)

    record = found.record
    if not identity.shared and found.consumers > 0:
        # Row 6; docs/design.md §4.7: one consumer per unshared subscription, a second is refused.
        return Refuse(AmqpCondition.RESOURCE_LOCKED, _unshared_in_use(identity, found.consumers))

    changes = _changes(record, topic, binding, selector, no_local)
    if changes:
        if found.consumers > 0:
            # Row 7; docs/design.md §4.4, docs/seeds.md (seed 000) "if there is/are existing consumer(s)".
            return Refuse(AmqpCondition.RESOURCE_LOCKED, _change_in_use(identity, found.consumers, changes))
        # Row 8; docs/design.md §4.4, docs/wire.md §2.6 / D5, scenarios 18-20: a new, empty generation.
        reply = _reply(spec.address, identity, global_cap, spec.expiry_policy, selector, no_local)
        return NewGeneration(record, topic, binding, selector, no_local, spec.expiry_policy, reply)

    if identity.shared and _at_limit(found.consumers, shared_consumer_limit):
        # Row 9; docs/design.md §4.7.
        return Refuse(AmqpCondition.RESOURCE_LIMIT_EXCEEDED, _limit_reached(identity, found.consumers))

    # Row 10; docs/seeds.md (seed 000): "if existing queue lifetime and/or durability are different from
    # expected, link creation is allowed but the source fields in the reply should be modified".
    reply = _reply(spec.address, identity, global_cap, record.expiry_policy, selector, no_local)
    return Join(record, reply)


def _decide_lookup(request: AttachRequest, existing: ExistingLookup, limit: int | None) -> Decision:
    candidates = lookup_identities(request)
    for identity in candidates:
        found = _active(existing, identity)
        if found is None:
            continue
        if not identity.shared and found.consumers > 0:
            # Row 12; docs/seeds.md (seed 000) "if queue exists and there is no consumer"; docs/design.md §4.7.
            return Refuse(AmqpCondition.RESOURCE_LOCKED, _unshared_in_use(identity, found.consumers))
        if identity.shared and _at_limit(found.consumers, limit):
            # Row 13.
            return Refuse(AmqpCondition.RESOURCE_LIMIT_EXCEEDED, _limit_reached(identity, found.consumers))
        # Row 14; docs/design.md §4.5, docs/wire.md §2.8, scenarios 40, 42, 45, 46.
        return Lookup(found.record, _stored_reply(found.record))
    # Row 11; docs/wire.md §1.9 step 4, scenario 41.
    unshared, shared = candidates[0], candidates[-1]
    kind = "non-durable" if not shared.durable else "durable"
    return Refuse(
        AmqpCondition.NOT_FOUND,
        f"No subscription link found: link {request.link_name!r} names no durable subscription "
        f"{unshared.name!r} nor shared {kind} subscription {shared.name!r} in namespace "
        f"{shared.namespace!r}; it was never created, was unsubscribed, or belongs to another "
        "client ID (a global one is looked up by a link name ending in '|global')",
    )


def _active(existing: ExistingLookup, identity: SubscriptionKey) -> Existing | None:
    found = existing(identity)
    if found is None or not found.record.active:
        return None
    return found


def _at_limit(consumers: int, limit: int | None) -> bool:
    return limit is not None and consumers >= limit


def _capabilities(identity: SubscriptionKey, global_cap: bool) -> tuple[str, ...]:
    # docs/wire.md §2.7: [global?, shared?, topic], in that order.
    caps: list[str] = []
    if global_cap:
        caps.append(Capability.GLOBAL)
    if identity.shared:
        caps.append(Capability.SHARED)
    caps.append(Capability.TOPIC)
    return tuple(str(c) for c in caps)


def _reply(
    address: str | None,
    identity: SubscriptionKey,
    global_cap: bool,
    expiry: ExpiryPolicy,
    selector: str | None,
    no_local: bool,
) -> ReplySource:
    return ReplySource(
        address=address,
        capabilities=_capabilities(identity, global_cap),
        # docs/wire.md §2.2: durability capped at configuration; the catalog is the stored terminus.
        durable=TerminusDurability.CONFIGURATION if identity.durable else TerminusDurability.NONE,
        expiry_policy=expiry,
        distribution_mode=DISTRIBUTION_COPY if identity.durable or identity.shared else None,
        selector=selector,
        no_local=no_local,
    )


def _stored_reply(record: SubscriptionRecord) -> ReplySource:
    """The reply a lookup gives: the stored source, or one rebuilt from the record's fields."""
    try:
        stored = source_from_json(record.source)
    except ValueError:
        stored = None
    if stored is not None and stored.address is not None:
        return ReplySource.from_spec(stored)
    identity = record.identity
    address = record.topic if record.binding == "#" else f"{record.topic}/{record.binding}"
    global_cap = identity.namespace == GLOBAL_NAMESPACE and (identity.shared or identity.durable)
    return _reply(address, identity, global_cap, record.expiry_policy, record.selector, record.no_local)


def _changes(record: SubscriptionRecord, topic: str, binding: str, selector: str | None, no_local: bool) -> list[str]:
    """What the attach changes, in words; empty when it matches the subscription."""
    out: list[str] = []
    if record.topic != topic:
        out.append(f"topic {record.topic!r} -> {topic!r}")
    if record.binding != binding:
        out.append(f"binding {record.binding!r} -> {binding!r}")
    if (record.selector or None) != selector:
        out.append(f"selector {record.selector!r} -> {selector!r}")
    if record.no_local != no_local:
        out.append(f"no-local {record.no_local} -> {no_local}")
    return out


def _kind(identity: SubscriptionKey) -> str:
    return ("shared " if identity.shared else "unshared ") + ("durable" if identity.durable else "non-durable")


def _exclusivity_clash(identity: SubscriptionKey, other: Existing) -> str:
    return (
        f"Subscription is already in use: {identity.name!r} in namespace {identity.namespace!r} "
        f"exists as a {_kind(other.record.identity)} subscription ({other.consumers} consumer(s) "
        f"attached) and this link asks for a {_kind(identity)} one; the two kinds cannot share a "
        f"name, so unsubscribe {identity.name!r} first or choose another subscription name"
    )


def _unshared_in_use(identity: SubscriptionKey, consumers: int) -> str:
    return (
        f"Subscription is already in use: {_kind(identity)} subscription {identity.name!r} in "
        f"namespace {identity.namespace!r} already has {consumers} active consumer(s) and allows "
        "only one; close that consumer first, or use a shared subscription"
    )


def _change_in_use(identity: SubscriptionKey, consumers: int, changes: list[str]) -> str:
    return (
        f"Subscription is already in use: {_kind(identity)} subscription {identity.name!r} in "
        f"namespace {identity.namespace!r} has {consumers} active consumer(s) and this link changes "
        f"its {', '.join(changes)}; attach with the subscription's current topic, selector and "
        "no-local, or close its consumers first (the change then starts a new, empty subscription)"
    )


def _limit_reached(identity: SubscriptionKey, consumers: int) -> str:
    return (
        f"Shared subscription {identity.name!r} in namespace {identity.namespace!r} already has "
        f"{consumers} consumers, the configured limit per shared subscription"
    )


# ---------------------------------------------------------------------------------- detach


def decide_detach(
    closed: bool,
    record: SubscriptionRecord,
    remaining_consumers: int,
    *,
    session_ending: bool = False,
    connection_closing: bool = False,
) -> DetachDecision:
    """Decide what a consumer link's detach does to its subscription (module docstring, a-h).

    Args:
        closed: the peer's detach had closed=true. Pass False when the link goes because its
            session ends or its connection closes without a detach (docs/wire.md §1.8).
        record: the subscription the link consumed from.
        remaining_consumers: consumer links still attached to it, not counting this one.
        session_ending: the link goes because its session ends.
        connection_closing: the link goes because its connection closes (or is lost).

    Returns:
        One :data:`DetachDecision`.
    """
    identity, policy = record.identity, record.expiry_policy
    session_ending = session_ending or connection_closing
    if identity.durable and closed:
        if remaining_consumers == 0:
            # Row a; docs/design.md §4.6, docs/wire.md §2.9, scenarios 36 and 40.
            return DeleteSubscription(record)
        # Row b; docs/design.md §4.6, scenarios 37 and 44, docs/peers.md A9: reply closed=true with the error.
        return RefuseDelete(record, AmqpCondition.RESOURCE_LOCKED, _active_consumers(identity, remaining_consumers))

    # docs/wire.md §2.9: the broker closes its end when the expiry policy ends the link now.
    scope_over = (
        policy is ExpiryPolicy.LINK_DETACH
        or (policy is ExpiryPolicy.SESSION_END and session_ending)
        or (policy is ExpiryPolicy.CONNECTION_CLOSE and connection_closing)
    )
    reply_closed = closed or scope_over
    if not identity.shared and not identity.durable:
        # Row c; a plain consumer's name is unique to its link, so nothing can reach it again
        # (scenario 4, docs/peers.md A3.48); a re-attach gets a new subscription.
        return DeleteSubscription(record)
    if remaining_consumers > 0:
        # Row d; scenario 34 (first of two volatile consumers), scenario 33.
        return KeepSubscription(record, reply_closed=reply_closed)
    if policy is ExpiryPolicy.NEVER:
        # Row e; scenarios 33 and 38: a durable consumer's close or session end keeps it.
        return KeepSubscription(record, reply_closed=reply_closed)
    if scope_over:
        # Rows f and g; docs/seeds.md (seed 000) lifetime mapping, scenarios 34, 35, docs/peers.md A3.39.
        return DeleteSubscription(record)
    # Row h: no consumer left, but it lives as long as this link's session / connection.
    ends_with: Literal["session", "connection"] = "session" if policy is ExpiryPolicy.SESSION_END else "connection"
    return KeepSubscription(record, reply_closed=reply_closed, ends_with=ends_with)


def _active_consumers(identity: SubscriptionKey, remaining: int) -> str:
    what = "the shared subscription" if identity.shared else "the subscription"
    # The first sentence is Broker-J's text (docs/wire.md §2.10); the rest says what to do.
    return (
        f"There are active consumers on {what} '{identity.name}': {remaining} other consumer "
        f"link(s) still attached in namespace {identity.namespace!r}; the subscription was kept. "
        "Close them, then unsubscribe again"
    )
