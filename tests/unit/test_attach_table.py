"""The attach/detach decision table (sharedsub.core.subscriptions.attach), one row per rule.

Row ids name the rule they pin: ``seed000/...`` for a row of the normative table in docs/seeds.md (seed 000),
``wire§5.N`` for a docs/wire.md §5 scenario, ``peers-A.N`` for a docs/peers.md scenario,
``design§4.N`` for a docs/design.md §4 decision. Wire mechanics (frames, link stealing, credit) are tested
elsewhere; these rows are the decisions.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing
from collections.abc import Mapping
from typing import Any

import pytest

from sharedsub.core.conditions import AmqpCondition
from sharedsub.core.errors import SharedSubError
from sharedsub.core.model import ExpiryPolicy, SubscriptionKey, SubscriptionRecord, SubscriptionState
from sharedsub.core.subscriptions.attach import (
    Create,
    Decision,
    DeleteSubscription,
    DetachDecision,
    Existing,
    Join,
    KeepSubscription,
    Lookup,
    NewGeneration,
    Refuse,
    RefuseDelete,
    ReplySource,
    decide_attach,
    decide_detach,
    identity_for,
    lookup_identities,
)
from sharedsub.core.subscriptions.terminus import AttachRequest, SourceSpec, source_from_json, stored_source_json

NEVER = ExpiryPolicy.NEVER
LINK_DETACH = ExpiryPolicy.LINK_DETACH
SESSION_END = ExpiryPolicy.SESSION_END
CONNECTION_CLOSE = ExpiryPolicy.CONNECTION_CLOSE
LOCKED = AmqpCondition.RESOURCE_LOCKED
CID = "client-1"
OTHER_CID = "client-2"
NEW = "plain-7f3a"  # the fresh name decide_attach is given for plain consumers
PLAIN_LINK = "qpid-jms:receiver:ID:3f2a-1:1:1:1:prices"
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

# Caps as Qpid JMS sends them (docs/wire.md §1.3).
TOPIC = ("topic",)
SHARED = ("topic", "shared")
SHARED_GLOBAL = ("topic", "shared", "global")
GLOBAL = ("topic", "global")


class InvalidSelector(SharedSubError):
    """Stand-in for the selector parser's error."""


def validate_selector(text: str) -> None:
    """Stand-in for the selector parser: 'x ==' is the one invalid selector here."""
    if text == "x ==":
        msg = f"Invalid JMS Selector: {text!r}: expected an expression at column 5"
        raise InvalidSelector(msg)


def attach(
    link: str,
    caps: tuple[str, ...] = SHARED,
    *,
    durable: int = 2,
    expiry: ExpiryPolicy = NEVER,
    address: str | None = "prices",
    selector: str | None = None,
    no_local: bool = False,
    dynamic: bool = False,
    unknown_filters: bool = False,
    cid: str = CID,
) -> AttachRequest:
    """A receiver attach with a source; defaults are a Qpid JMS shared durable consumer."""
    spec = SourceSpec(
        address=address,
        capabilities=caps,
        durable=durable,
        expiry_policy=expiry,
        selector=selector,
        no_local=no_local,
        dynamic=dynamic,
        distribution_mode="copy" if durable else None,
        has_unknown_filters=unknown_filters,
    )
    return AttachRequest(link, cid, spec)


def lookup(link: str, cid: str = CID) -> AttachRequest:
    """A null-source attach (unsubscribe / recovery, docs/wire.md §1.9)."""
    return AttachRequest(link, cid, None)


def key(name: str = "sub", *, ns: str = CID, shared: bool = True, durable: bool = True) -> SubscriptionKey:
    return SubscriptionKey(ns, name, shared, durable)


def record(
    identity: SubscriptionKey,
    *,
    topic: str = "prices",
    binding: str = "#",
    selector: str | None = None,
    no_local: bool = False,
    expiry: ExpiryPolicy = NEVER,
    source: str | None = None,
    state: SubscriptionState = SubscriptionState.ACTIVE,
) -> SubscriptionRecord:
    """A catalog record; its stored source is what the creating attach would have stored."""
    if source is None:
        caps = (("global",) if identity.namespace == "global" else ()) + (("shared",) if identity.shared else ())
        caps += ("topic",)
        source = stored_source_json(
            SourceSpec(
                address=topic if binding == "#" else f"{topic}/{binding}",
                capabilities=caps,
                durable=1 if identity.durable else 0,
                expiry_policy=expiry,
                selector=selector,
                no_local=no_local,
                distribution_mode="copy" if identity.durable or identity.shared else None,
            )
        )
    return SubscriptionRecord(
        identity=identity,
        generation=1,
        state=state,
        topic=topic,
        binding=binding,
        selector=selector,
        no_local=no_local,
        expiry_policy=expiry,
        start_seq=0,
        source=source,
        created_at=T0,
        updated_at=T0,
    )


def have(rec: SubscriptionRecord, consumers: int = 0) -> dict[SubscriptionKey, Existing]:
    return {rec.identity: Existing(rec, consumers)}


@dataclasses.dataclass(frozen=True)
class Row:
    """One rule: an attach, the catalog it meets, the decision kind and fields it must give."""

    id: str
    request: AttachRequest
    catalog: Mapping[SubscriptionKey, Existing]
    kind: type
    expect: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    # Substrings the refusal description must contain (a person can act on it).
    says: tuple[str, ...] = ()
    limit: int | None = None


def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


# ----------------------------------------------------------------------------- docs/seeds.md (seed 000) rows
# (shared, global, durable) combinations, each with the link name Qpid JMS uses for it.
COMBOS = {
    "shared-local-nondurable": ("sub|volatile1", SHARED, 0, LINK_DETACH, key(durable=False), ("shared", "topic")),
    "shared-local-durable": ("sub", SHARED, 2, NEVER, key(), ("shared", "topic")),
    "shared-global-nondurable": (
        "sub|global-volatile1", SHARED_GLOBAL, 0, LINK_DETACH, key(ns="global", durable=False),
        ("global", "shared", "topic"),
    ),
    "shared-global-durable": ("sub|global", SHARED_GLOBAL, 2, NEVER, key(ns="global"), ("global", "shared", "topic")),
}


def _seed_shared_rows() -> list[Row]:
    rows: list[Row] = []
    for combo, (link, caps, durable, expiry, ident, reply_caps) in COMBOS.items():
        req = attach(link, caps, durable=durable, expiry=expiry)
        rec = record(ident, expiry=expiry)
        reply_durable = 1 if durable else 0
        p = f"seed000/{combo}"
        rows += [
            Row(f"{p}/new -> create", req, {}, Create, {
                "identity": ident, "topic": "prices", "binding": "#", "expiry_policy": expiry,
                "reply.capabilities": reply_caps, "reply.durable": reply_durable,
                "reply.distribution_mode": "copy", "reply.address": "prices",
            }),
            Row(f"{p}/exists-same-source -> join", req, have(rec, 1), Join, {
                "record": rec, "reply.capabilities": reply_caps,
            }),
            Row(f"{p}/exists-different-selector-no-consumers -> new-generation",
                attach(link, caps, durable=durable, expiry=expiry, selector="colour = 'red'"), have(rec, 0),
                NewGeneration, {"record": rec, "selector": "colour = 'red'", "reply.selector": "colour = 'red'"}),
            Row(f"{p}/exists-different-binding-no-consumers -> new-generation",
                attach(link, caps, durable=durable, expiry=expiry, address="prices/eu.*"), have(rec, 0),
                NewGeneration, {"topic": "prices", "binding": "eu.*", "reply.address": "prices/eu.*"}),
            Row(f"{p}/exists-different-selector-with-consumers -> resource-locked",
                attach(link, caps, durable=durable, expiry=expiry, selector="colour = 'red'"), have(rec, 2),
                Refuse, {"condition": LOCKED},
                ("Subscription is already in use", "'sub'", ident.namespace, "selector")),
            Row(f"{p}/exists-lifetime-differs -> join, reply carries the stored lifetime",
                attach(link, caps, durable=durable, expiry=CONNECTION_CLOSE), have(rec, 1), Join, {
                    "reply.expiry_policy": expiry, "reply.durable": reply_durable,
                }),
        ]
    return rows


ROWS: list[Row] = [
    *_seed_shared_rows(),
    # -- docs/seeds.md (seed 000), unshared rows
    Row("seed000/unshared-local-nondurable/new -> create, random name, caps [topic]",
        attach(PLAIN_LINK, TOPIC, durable=0, expiry=LINK_DETACH), {}, Create, {
            "identity": key(NEW, shared=False, durable=False), "reply.capabilities": ("topic",),
            "reply.durable": 0, "reply.distribution_mode": None, "reply.expiry_policy": LINK_DETACH,
        }),
    Row("seed000/unshared-global-nondurable/new -> as without global (container namespace, caps [topic])",
        attach(PLAIN_LINK, GLOBAL, durable=0, expiry=LINK_DETACH), {}, Create, {
            "identity": key(NEW, shared=False, durable=False), "reply.capabilities": ("topic",),
        }),
    Row("seed000/unshared-local-durable/new -> create (wire§5.5: reply durable <= 1)",
        attach("sub", TOPIC), {}, Create, {
            "identity": key(shared=False), "reply.capabilities": ("topic",), "reply.durable": 1,
            "reply.distribution_mode": "copy", "reply.expiry_policy": NEVER,
        }),
    Row("seed000/unshared-global-durable/new -> create, caps [global, topic]",
        attach("sub", GLOBAL), {}, Create, {
            "identity": key(ns="global", shared=False), "reply.capabilities": ("global", "topic"),
        }),
    Row("seed000/unshared-local-durable/exists-inactive -> join (design§4.7 and D7 over the seed's 'resource locked')",
        attach("sub", TOPIC), have(record(key(shared=False)), 0), Join, {"record": record(key(shared=False))}),
    Row("seed000/unshared-global-durable/exists-inactive -> join",
        attach("sub", GLOBAL), have(record(key(ns="global", shared=False)), 0), Join, {
            "reply.capabilities": ("global", "topic"),
        }),
    Row("seed000/unshared-local-durable/exists-active -> resource-locked (design§4.7, wire§5.25)",
        attach("sub", TOPIC), have(record(key(shared=False)), 1), Refuse, {"condition": LOCKED},
        ("Subscription is already in use", "'sub'", CID, "only one", "close that consumer")),
    Row("seed000/unshared-global-durable/exists-active -> resource-locked",
        attach("sub", GLOBAL), have(record(key(ns="global", shared=False)), 1), Refuse, {"condition": LOCKED}),
    # -- docs/seeds.md (seed 000), null-source rows (lookup, docs/design.md §4.5)
    Row("seed000/null/unshared-local/found -> lookup with the stored source (wire§5.40)",
        lookup("sub"), have(record(key(shared=False), selector="a = 1")), Lookup, {
            "record": record(key(shared=False), selector="a = 1"), "reply.address": "prices",
            "reply.capabilities": ("topic",), "reply.durable": 1, "reply.expiry_policy": NEVER,
            "reply.distribution_mode": "copy", "reply.selector": "a = 1",
        }),
    Row("seed000/null/unshared-global/found -> lookup",
        lookup("sub|global", cid=OTHER_CID), have(record(key(ns="global", shared=False))), Lookup, {
            "record": record(key(ns="global", shared=False)), "reply.capabilities": ("global", "topic"),
        }),
    Row("seed000/null/unshared-global/found by its whole link name -> lookup",
        lookup("sub|global", cid=OTHER_CID), have(record(key("sub|global", ns="global", shared=False))), Lookup, {
            "reply.capabilities": ("global", "topic"),
        }),
    Row("wire§5.13/null/'sub' with a ClientID, only the global 'sub' exists -> not-found",
        lookup("sub"), have(record(key(ns="global"))), Refuse, {"condition": AmqpCondition.NOT_FOUND}),
    Row("seed000/null/shared-local/found -> lookup (wire§5.43)",
        lookup("sub"), have(record(key())), Lookup, {
            "record": record(key()), "reply.capabilities": ("shared", "topic"),
        }),
    Row("seed000/null/shared-global/found from a new connection -> lookup (wire§5.42)",
        lookup("sub|global", cid=OTHER_CID), have(record(key(ns="global"))), Lookup, {
            "record": record(key(ns="global")), "reply.capabilities": ("global", "shared", "topic"),
        }),
    Row("seed000/null/unshared-local/not-found -> not-found (wire§5.41)",
        lookup("sub"), {}, Refuse, {"condition": AmqpCondition.NOT_FOUND},
        ("No subscription link found", "'sub'", CID)),
    Row("seed000/null/shared-global/not-found -> not-found (wire§5.41 without ClientID)",
        lookup("sub|global", cid=OTHER_CID), {}, Refuse, {"condition": AmqpCondition.NOT_FOUND},
        ("No subscription link found", "'sub'", "'global'")),
    Row("seed000/null/shared-local/other-container-only -> not-found (namespaces are per ClientID)",
        lookup("sub"), have(record(key(ns=OTHER_CID))), Refuse, {"condition": AmqpCondition.NOT_FOUND}),
    Row("seed000/null/unshared-local/found-with-consumer -> resource-locked (seed: 'and there is no consumer')",
        lookup("sub"), have(record(key(shared=False)), 1), Refuse, {"condition": LOCKED}),
    Row("wire§5.44/null/shared-global/found-with-consumers-elsewhere -> lookup (the detach refuses)",
        lookup("sub|global", cid=OTHER_CID), have(record(key(ns="global")), 2), Lookup, {}),
    Row("design§4.7/null/shared/found-at-limit -> resource-limit-exceeded",
        lookup("sub"), have(record(key()), 3), Refuse, {"condition": AmqpCondition.RESOURCE_LIMIT_EXCEEDED}, limit=3),
    Row("wire§1.4/null/'sub|2' -> the shared durable 'sub'",
        lookup("sub|2"), have(record(key())), Lookup, {"record": record(key())}),
    Row("wire§5.12/null/'sub|volatile1' -> the shared volatile 'sub', never the durable one",
        lookup("sub|volatile1"), {**have(record(key())), **have(record(key(durable=False), expiry=LINK_DETACH), 1)},
        Lookup, {"record": record(key(durable=False), expiry=LINK_DETACH)}),
    Row("wire§5.12/null/'sub|volatile1' with only the durable 'sub' -> not-found",
        lookup("sub|volatile1"), have(record(key())), Refuse, {"condition": AmqpCondition.NOT_FOUND}),
    Row("peers-A5.72/null/found -> reply carries selector and no-local as created",
        lookup("sub"), have(record(key(shared=False), selector="x > 2", no_local=True)), Lookup, {
            "reply.selector": "x > 2", "reply.no_local": True, "reply.expiry_policy": NEVER, "reply.durable": 1,
        }),
    Row("design§4.5/null/found, stored source empty -> reply rebuilt from the record",
        lookup("sub"), have(record(key(), binding="eu.*", selector="x > 2", source="{}")), Lookup, {
            "reply.address": "prices/eu.*", "reply.capabilities": ("shared", "topic"), "reply.selector": "x > 2",
            "reply.durable": 1, "reply.distribution_mode": "copy",
        }),
    Row("design§4.5/null/found, deleted record -> not-found",
        lookup("sub"), have(record(key(), state=SubscriptionState.DELETED)), Refuse,
        {"condition": AmqpCondition.NOT_FOUND}),
    Row("wire§5.46/null/re-attach after detach closed=false -> lookup with the original address",
        lookup("sub|global"), have(record(key(ns="global"), binding="eu.#")), Lookup, {"reply.address": "prices/eu.#"}),
    # -- refusals before anything is looked up
    Row("wire§2.3/dynamic source -> not-implemented",
        attach("sub", SHARED, dynamic=True, address=None), {}, Refuse, {"condition": AmqpCondition.NOT_IMPLEMENTED},
        ("Temporary subscription is not implemented",)),
    Row("design§3/invalid address -> invalid-field",
        attach("sub", SHARED, address="no such/topic"), {}, Refuse, {"condition": AmqpCondition.INVALID_FIELD},
        ("'no such'",)),
    Row("design§3/empty address -> invalid-field",
        attach("sub", SHARED, address=""), {}, Refuse, {"condition": AmqpCondition.INVALID_FIELD}),
    Row("wire§5.27/invalid selector -> invalid-field, info field=filter, nothing created",
        attach("sub", SHARED, selector="x =="), {}, Refuse,
        {"condition": AmqpCondition.INVALID_FIELD, "field": "filter"},
        ("Invalid JMS Selector", "x ==")),
    Row("wire§5.27/invalid selector on an existing subscription -> invalid-field, not new-generation",
        attach("sub", SHARED, selector="x =="), have(record(key())), Refuse,
        {"condition": AmqpCondition.INVALID_FIELD}),
    # -- addresses, filters
    Row("design§3/address 'T/pattern' -> binding pattern",
        attach("sub", SHARED, address="prices/eu.*.#"), {}, Create, {"topic": "prices", "binding": "eu.*.#"}),
    Row("peers-A6.80/empty selector -> no selector",
        attach("sub", SHARED, selector=""), {}, Create, {"selector": None, "reply.selector": None}),
    Row("wire§1.5/blank selector -> no selector, joins a subscription without one",
        attach("sub", SHARED, selector="   "), have(record(key()), 1), Join, {"reply.selector": None}),
    Row("wire§5.26/valid selector -> kept and echoed",
        attach("sub", SHARED, selector="colour = 'red'"), {}, Create, {
            "selector": "colour = 'red'", "reply.selector": "colour = 'red'",
        }),
    Row("design§4.8/unknown filter -> attached, left out of the reply (peers-A6.75)",
        attach("sub", SHARED, selector="a = 1", unknown_filters=True), {}, Create, {
            "reply.selector": "a = 1", "reply.no_local": False,
        }),
    Row("design§4.9/no-local plain consumer -> container namespace",
        attach(PLAIN_LINK, TOPIC, durable=0, expiry=LINK_DETACH, no_local=True), {}, Create, {
            "identity": key(NEW, shared=False, durable=False), "no_local": True, "reply.no_local": True,
        }),
    # -- docs/wire.md §5 scenarios 4-20
    Row("wire§5.4/plain topic consumer -> create non-durable, caps contain topic",
        attach(PLAIN_LINK, TOPIC, durable=0, expiry=LINK_DETACH), {}, Create, {"reply.capabilities": ("topic",)}),
    Row("wire§5.6/unshared durable 'sub' under another container -> its own subscription",
        attach("sub", TOPIC), have(record(key(ns=OTHER_CID, shared=False)), 1), Create,
        {"identity": key(shared=False)}),
    Row("wire§5.7/'sub|2' joins the shared durable 'sub'",
        attach("sub|2"), have(record(key()), 1), Join, {"record": record(key())}),
    Row("wire§5.8/'sub|global' from a second connection joins the global subscription",
        attach("sub|global", SHARED_GLOBAL, cid=OTHER_CID), have(record(key(ns="global")), 1), Join, {}),
    Row("wire§5.9/'sub|volatile2' joins the volatile 'sub'",
        attach("sub|volatile2", durable=0, expiry=LINK_DETACH), have(record(key(durable=False), expiry=LINK_DETACH), 1),
        Join, {}),
    Row("wire§5.10/volatile 'sub' under another ClientID -> its own subscription",
        attach("sub|volatile1", durable=0, expiry=LINK_DETACH), have(record(key(ns=OTHER_CID, durable=False)), 1),
        Create, {"identity": key(durable=False)}),
    Row("wire§5.11/global volatile from a second connection -> join",
        attach("sub|global-volatile1", SHARED_GLOBAL, durable=0, expiry=LINK_DETACH, cid=OTHER_CID),
        have(record(key(ns="global", durable=False), expiry=LINK_DETACH), 1), Join, {}),
    Row("wire§5.12/volatile 'sub' next to durable 'sub' -> a distinct subscription",
        attach("sub|volatile1", durable=0, expiry=LINK_DETACH), have(record(key()), 1), Create,
        {"identity": key(durable=False)}),
    Row("wire§5.12/durable 'sub' next to volatile 'sub' -> a distinct subscription",
        attach("sub"), have(record(key(durable=False), expiry=LINK_DETACH), 1), Create, {"identity": key()}),
    Row("wire§5.13/ClientID-scoped 'sub' next to global 'sub' -> a distinct subscription",
        attach("sub"), have(record(key(ns="global")), 1), Create, {"identity": key()}),
    Row("wire§5.15/unshared durable exists, shared durable 'sub|1' -> resource-locked",
        attach("sub|1"), have(record(key(shared=False)), 0), Refuse, {"condition": LOCKED},
        ("Subscription is already in use", "'sub'", CID, "unshared durable", "shared durable", "unsubscribe")),
    Row("wire§5.15/shared durable exists, unshared durable 'sub' -> resource-locked",
        attach("sub", TOPIC), have(record(key()), 0), Refuse, {"condition": LOCKED},
        ("Subscription is already in use", "shared durable", "unshared durable")),
    Row("wire§5.15/global: unshared durable exists, shared global durable -> resource-locked",
        attach("sub|global", SHARED_GLOBAL), have(record(key(ns="global", shared=False)), 0), Refuse,
        {"condition": LOCKED}),
    Row("wire§5.16/join active shared durable with another selector -> resource-locked",
        attach("sub|2", selector="b = 2"), have(record(key(), selector="a = 1"), 1), Refuse, {"condition": LOCKED},
        ("selector 'a = 1' -> 'b = 2'",)),
    Row("wire§5.17/join active shared durable on another topic -> resource-locked",
        attach("sub|2", address="orders"), have(record(key()), 1), Refuse, {"condition": LOCKED},
        ("topic 'prices' -> 'orders'",)),
    Row("wire§5.18/all consumers gone, another topic -> new-generation",
        attach("sub", address="orders"), have(record(key()), 0), NewGeneration, {"topic": "orders", "binding": "#"}),
    Row("wire§5.19/re-attach after detach closed=false with a new address -> new-generation, new source stored",
        attach("sub", address="prices/eu.#"), have(record(key())), NewGeneration, {
            "binding": "eu.#", "reply.address": "prices/eu.#",
        }),
    Row("wire§5.20/unshared durable resubscribed with another selector -> new-generation",
        attach("sub", TOPIC, selector="b = 2"), have(record(key(shared=False), selector="a = 1")), NewGeneration, {
            "selector": "b = 2",
        }),
    Row("wire§5.20/unshared durable resubscribed with no-local toggled -> new-generation (peers-A7.83)",
        attach("sub", TOPIC, no_local=True), have(record(key(shared=False))), NewGeneration, {"no_local": True}),
    Row("wire§5.20/unshared durable changed to have no selector -> new-generation",
        attach("sub", TOPIC), have(record(key(shared=False), selector="a = 1")), NewGeneration, {"selector": None}),
    Row("wire§5.20/new generation takes the new lifetime",
        attach("sub", TOPIC, expiry=SESSION_END, selector="a = 1"), have(record(key(shared=False))), NewGeneration, {
            "expiry_policy": SESSION_END, "reply.expiry_policy": SESSION_END,
        }),
    # -- docs/peers.md A2-A5 decisions
    Row("peers-A2.17/shared durable without ClientID -> global create",
        attach("sub|global", SHARED_GLOBAL, cid="ID:generated:1"), {}, Create, {"identity": key(ns="global")}),
    Row("peers-A2.22/active subscription without selector, join with one -> resource-locked",
        attach("sub|2", selector="b = 2"), have(record(key()), 1), Refuse, {"condition": LOCKED}),
    Row("peers-A2.22/active subscription with selector, join without -> resource-locked",
        attach("sub|2"), have(record(key(), selector="a = 1"), 1), Refuse, {"condition": LOCKED}),
    Row("peers-A2.24/no consumers, other selector and topic -> new-generation",
        attach("sub", address="orders", selector="b = 2"), have(record(key(), selector="a = 1")), NewGeneration, {}),
    Row("peers-A2.25/raw AMQP: change while another link is attached -> resource-locked",
        attach("mySub|2", address="prices/x", durable=1), have(record(key("mySub")), 1), Refuse, {"condition": LOCKED},
        ("binding '#' -> 'x'",)),
    Row("peers-A2.26/shared durable: many consumers, no limit -> join",
        attach("sub|40"), have(record(key()), 39), Join, {}),
    Row("peers-A2.30/raw AMQP: durability configuration joins the durable subscription",
        attach("mySub|2", durable=1), have(record(key("mySub")), 1), Join, {"reply.durable": 1}),
    Row("peers-A2.31/reconnect with the full source -> join, not recreated",
        attach("sub"), have(record(key()), 0), Join, {}),
    Row("peers-A3.42/volatile with no consumers left, another topic -> new-generation",
        attach("sub|volatile1", durable=0, expiry=LINK_DETACH, address="orders"),
        have(record(key(durable=False), expiry=LINK_DETACH), 0), NewGeneration, {"topic": "orders"}),
    Row("peers-A3.41/volatile, active, another selector -> resource-locked",
        attach("sub|volatile2", durable=0, expiry=LINK_DETACH, selector="b = 2"),
        have(record(key(durable=False), expiry=LINK_DETACH), 1), Refuse, {"condition": LOCKED}),
    Row("peers-A4.52/unshared durable re-attach -> join",
        attach("sub", TOPIC), have(record(key(shared=False))), Join, {}),
    Row("peers-A4.55/unshared durable on a new topic -> new-generation",
        attach("sub", TOPIC, address="orders"), have(record(key(shared=False))), NewGeneration, {"topic": "orders"}),
    Row("peers-A5.65/unsubscribe inactive durable -> lookup (the close then deletes)",
        lookup("sub"), have(record(key(shared=False))), Lookup, {}),
    Row("peers-A5.67/unsubscribe twice -> not-found",
        lookup("sub"), {}, Refuse, {"condition": AmqpCondition.NOT_FOUND}),
    # -- docs/design.md §4.7 limits
    Row("design§4.7/shared at the limit -> resource-limit-exceeded",
        attach("sub|3"), have(record(key()), 2), Refuse, {"condition": AmqpCondition.RESOURCE_LIMIT_EXCEEDED},
        ("'sub'", "2 consumers", "limit"), limit=2),
    Row("design§4.7/shared below the limit -> join",
        attach("sub|2"), have(record(key()), 1), Join, {}, limit=2),
    Row("design§4.7/limit does not block a new generation", attach("sub", address="orders"), have(record(key())),
        NewGeneration, {}, limit=1),
    Row("design§4.4/deleted record -> create",
        attach("sub"), have(record(key(), state=SubscriptionState.DELETED)), Create, {"identity": key()}),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_attach_table(row: Row) -> None:
    decision = decide_attach(
        row.request,
        row.catalog.get,
        shared_consumer_limit=row.limit,
        new_name=NEW,
        validate_selector=validate_selector,
    )
    assert type(decision) is row.kind, decision
    for path, value in row.expect.items():
        assert _get(decision, path) == value, path
    for words in row.says:
        assert words in decision.description, (words, decision.description)  # type: ignore[union-attr]


def test_ids_are_unique() -> None:
    ids = [r.id for r in ROWS] + [r.id for r in DETACH_ROWS]
    assert len(ids) == len(set(ids))


def test_every_attach_decision_is_produced() -> None:
    produced = {
        type(decide_attach(r.request, r.catalog.get, shared_consumer_limit=r.limit, new_name=NEW,
                           validate_selector=validate_selector))
        for r in ROWS
    }
    assert produced == set(typing.get_args(Decision))


# ----------------------------------------------------------------------------- properties


def test_invalid_selector_is_refused_before_the_catalog_is_read() -> None:
    def no_catalog(_key: SubscriptionKey) -> Existing | None:
        raise AssertionError("catalog read")

    decision = decide_attach(
        attach("sub", selector="x =="), no_catalog, shared_consumer_limit=None, new_name=NEW,
        validate_selector=validate_selector,
    )
    assert isinstance(decision, Refuse)


def test_selector_validation_errors_other_than_sharedsub_propagate() -> None:
    def broken(_text: str) -> None:
        raise RuntimeError("bug")

    with pytest.raises(RuntimeError):
        decide_attach(attach("sub", selector="a = 1"), {}.get, shared_consumer_limit=None, new_name=NEW,
                      validate_selector=broken)


def test_limit_below_one_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="shared_consumer_limit must be None"):
        decide_attach(attach("sub"), {}.get, shared_consumer_limit=0, new_name=NEW, validate_selector=validate_selector)


@pytest.mark.parametrize(
    "request_",
    [
        attach("sub"),
        attach("sub|global", SHARED_GLOBAL),
        attach("sub", TOPIC, selector="x > 2", no_local=True),
        attach("sub", GLOBAL, address="prices/eu.#"),
    ],
    ids=["shared", "shared-global", "unshared-selector-no-local", "unshared-global-binding"],
)
def test_created_source_is_what_the_lookup_answers(request_: AttachRequest) -> None:
    # docs/design.md §4.5: create, then an unsubscribe lookup (maybe after a restart) answers the same source.
    created = decide_attach(
        request_, {}.get, shared_consumer_limit=None, new_name=NEW, validate_selector=validate_selector
    )
    assert isinstance(created, Create)
    rec = dataclasses.replace(
        record(created.identity, topic=created.topic, binding=created.binding, selector=created.selector,
               no_local=created.no_local, expiry=created.expiry_policy),
        source=created.stored_source,
    )
    name = "sub|global" if created.identity.namespace == "global" else "sub"
    found = decide_attach(lookup(name), have(rec).get, shared_consumer_limit=None, new_name=NEW,
                          validate_selector=validate_selector)
    assert isinstance(found, Lookup)
    assert found.reply == created.reply


def test_reply_source_round_trips_through_json() -> None:
    reply = ReplySource("prices/eu.#", ("global", "shared", "topic"), 1, NEVER, "copy", "a = 'x'", True)
    assert ReplySource.from_spec(source_from_json(stored_source_json(reply.to_spec()))) == reply


@pytest.mark.parametrize("text", ["not json", "[]", '{"durable": "lots"}', '{"expiry_policy": "sometimes"}',
                                  '{"address": 5}'])
def test_source_from_json_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError, match="stored source|must be a string"):
        source_from_json(text)


# docs/wire.md §5.14: every namespace combination on one base name is a distinct subscription,
# except unshared durable vs shared durable in one container (which clash, §5.15).
NAMESPACE_COMBOS = {
    "unshared-durable": attach("sub", TOPIC),
    "unshared-durable-global": attach("sub", GLOBAL),
    "shared-durable": attach("sub"),
    "shared-durable-global": attach("sub|global", SHARED_GLOBAL),
    "shared-volatile": attach("sub|volatile1", durable=0, expiry=LINK_DETACH),
    "shared-volatile-global": attach("sub|global-volatile1", SHARED_GLOBAL, durable=0, expiry=LINK_DETACH),
    "plain": attach(PLAIN_LINK, TOPIC, durable=0, expiry=LINK_DETACH),
}


def test_separate_subscription_namespaces() -> None:
    identities = {kind: identity_for(req, new_name=f"new-{kind}") for kind, req in NAMESPACE_COMBOS.items()}
    assert len(set(identities.values())) == len(identities)
    a, b = identities["unshared-durable"], identities["shared-durable"]
    assert (a.namespace, a.name, a.durable) == (b.namespace, b.name, b.durable)  # the clash of §5.15
    ga, gb = identities["unshared-durable-global"], identities["shared-durable-global"]
    assert (ga.namespace, ga.name) == (gb.namespace, gb.name)


def test_identity_needs_a_new_name_for_a_plain_consumer() -> None:
    with pytest.raises(ValueError, match="needs new_name"):
        identity_for(attach(PLAIN_LINK, TOPIC, durable=0))


@pytest.mark.parametrize(
    ("link", "cid", "expected"),
    [
        ("sub", CID, (key(shared=False), key())),
        ("sub|global", OTHER_CID,
         (key("sub|global", ns="global", shared=False), key(ns="global", shared=False), key(ns="global"))),
        ("sub|global2", OTHER_CID,
         (key("sub|global2", ns="global", shared=False), key(ns="global", shared=False), key(ns="global"))),
        ("sub|2", CID, (key("sub|2", shared=False), key())),
        ("sub|volatile1", CID, (key("sub|volatile1", shared=False), key(durable=False))),
    ],
    ids=["sub", "sub|global", "sub|global2", "sub|2", "sub|volatile1"],
)
def test_lookup_identities(link: str, cid: str, expected: tuple[SubscriptionKey, ...]) -> None:
    request = lookup(link, cid)
    assert lookup_identities(request) == expected
    assert identity_for(request) == expected[0]


# ----------------------------------------------------------------------------- detach table


@dataclasses.dataclass(frozen=True)
class DetachRow:
    id: str
    closed: bool
    record: SubscriptionRecord
    remaining: int
    kind: type
    reply_closed: bool
    ends_with: str | None = None
    session_ending: bool = False
    connection_closing: bool = False
    says: tuple[str, ...] = ()


SHARED_DURABLE = record(key())
GLOBAL_DURABLE = record(key(ns="global"))
UNSHARED_DURABLE = record(key(shared=False))
VOLATILE = record(key(durable=False), expiry=LINK_DETACH)
PLAIN = record(key(NEW, shared=False, durable=False), expiry=LINK_DETACH)

DETACH_ROWS = [
    DetachRow("wire§5.33 shared durable close (closed=false) -> kept, reply not closed",
              False, SHARED_DURABLE, 0, KeepSubscription, reply_closed=False),
    DetachRow("wire§5.33 shared durable, one of two detaches (closed=false) -> kept",
              False, GLOBAL_DURABLE, 1, KeepSubscription, reply_closed=False),
    DetachRow("wire§5.34 shared volatile, first of two closes -> kept, reply closed",
              True, VOLATILE, 1, KeepSubscription, reply_closed=True),
    DetachRow("wire§5.34 shared volatile, last closes -> deleted",
              True, VOLATILE, 0, DeleteSubscription, reply_closed=True),
    DetachRow("wire§5.35 link-detach expiry, detach closed=false -> answered closed=true, deleted",
              False, VOLATILE, 0, DeleteSubscription, reply_closed=True),
    DetachRow("wire§5.35 link-detach expiry, closed=false, others remain -> answered closed=true",
              False, VOLATILE, 2, KeepSubscription, reply_closed=True),
    DetachRow("wire§5.36 close a durable link, no other consumer -> deleted (unsubscribe)",
              True, UNSHARED_DURABLE, 0, DeleteSubscription, reply_closed=True),
    DetachRow("wire§5.37 close-with-active-link -> resource-locked",
              True, GLOBAL_DURABLE, 1, RefuseDelete, reply_closed=True,
              says=("There are active consumers on the shared subscription 'sub'", "1 other", "kept")),
    DetachRow("wire§5.38 session ends under a durable consumer -> kept",
              False, SHARED_DURABLE, 0, KeepSubscription, reply_closed=False, session_ending=True),
    DetachRow("wire§5.38 connection closes under a durable consumer -> kept",
              False, UNSHARED_DURABLE, 0, KeepSubscription, reply_closed=False, connection_closing=True),
    DetachRow("wire§5.40 unsubscribe: close after the lookup -> deleted",
              True, SHARED_DURABLE, 0, DeleteSubscription, reply_closed=True),
    DetachRow("wire§5.44 unsubscribe while consumers elsewhere -> resource-locked",
              True, GLOBAL_DURABLE, 3, RefuseDelete, reply_closed=True, says=("3 other",)),
    DetachRow("wire§5.4 plain consumer closes -> deleted, reply closed",
              True, PLAIN, 0, DeleteSubscription, reply_closed=True),
    DetachRow("peers-A3.48 plain consumer (session-end) detaches closed=false -> deleted: unreachable",
              False, record(key(NEW, shared=False, durable=False), expiry=SESSION_END), 0, DeleteSubscription,
              reply_closed=True),
    DetachRow("peers-A3.39 connection closed without closing the receivers -> volatile deleted",
              False, VOLATILE, 0, DeleteSubscription, reply_closed=True, connection_closing=True),
    DetachRow("peers-A4.50 unshared durable detach closed=false -> kept, reply not closed",
              False, UNSHARED_DURABLE, 0, KeepSubscription, reply_closed=False),
    DetachRow("peers-A4.51 unshared durable detach closed=true -> deleted",
              True, UNSHARED_DURABLE, 0, DeleteSubscription, reply_closed=True),
    DetachRow("peers-A9 unshared durable close with another consumer (not normally possible) -> resource-locked",
              True, UNSHARED_DURABLE, 1, RefuseDelete, reply_closed=True,
              says=("There are active consumers on the subscription 'sub'",)),
    DetachRow("seed000 lifetime session-end, last consumer closes, session goes on -> kept until session end",
              True, record(key(durable=False), expiry=SESSION_END), 0, KeepSubscription, reply_closed=True,
              ends_with="session"),
    DetachRow("seed000 lifetime session-end, session ends -> deleted",
              False, record(key(durable=False), expiry=SESSION_END), 0, DeleteSubscription, reply_closed=True,
              session_ending=True),
    DetachRow("seed000 lifetime session-end, detach closed=false -> kept, reply not closed",
              False, record(key(durable=False), expiry=SESSION_END), 0, KeepSubscription, reply_closed=False,
              ends_with="session"),
    DetachRow("seed000 lifetime session-end, session ends, others remain -> kept",
              False, record(key(durable=False), expiry=SESSION_END), 1, KeepSubscription, reply_closed=True,
              session_ending=True),
    DetachRow("seed000 lifetime connection-close, session ends -> kept until the connection closes",
              False, record(key(durable=False), expiry=CONNECTION_CLOSE), 0, KeepSubscription, reply_closed=False,
              ends_with="connection", session_ending=True),
    DetachRow("seed000 lifetime connection-close, connection closes -> deleted",
              False, record(key(durable=False), expiry=CONNECTION_CLOSE), 0, DeleteSubscription, reply_closed=True,
              connection_closing=True),
    DetachRow("seed000 lifetime never, non-durable shared, last closes -> permanent",
              True, record(key(durable=False), expiry=NEVER), 0, KeepSubscription, reply_closed=True),
    DetachRow("seed000 lifetime link-detach on a durable subscription, last detaches -> deleted",
              False, record(key(), expiry=LINK_DETACH), 0, DeleteSubscription, reply_closed=True),
    DetachRow("seed000 lifetime session-end on a durable subscription, detach closed=false -> kept until session end",
              False, record(key(), expiry=SESSION_END), 0, KeepSubscription, reply_closed=False, ends_with="session"),
    DetachRow("design§4.6 durable closed=true beats its lifetime (session-end) -> unsubscribe",
              True, record(key(), expiry=SESSION_END), 0, DeleteSubscription, reply_closed=True),
]


@pytest.mark.parametrize("row", DETACH_ROWS, ids=[r.id for r in DETACH_ROWS])
def test_detach_table(row: DetachRow) -> None:
    decision = decide_detach(
        row.closed, row.record, row.remaining,
        session_ending=row.session_ending, connection_closing=row.connection_closing,
    )
    assert type(decision) is row.kind, decision
    assert decision.record == row.record
    assert decision.reply_closed is row.reply_closed
    if isinstance(decision, KeepSubscription):
        assert decision.ends_with == row.ends_with
    if isinstance(decision, RefuseDelete):
        assert decision.condition is LOCKED
        for words in row.says:
            assert words in decision.description, (words, decision.description)


def test_every_detach_decision_is_produced() -> None:
    produced = {
        type(decide_detach(r.closed, r.record, r.remaining, session_ending=r.session_ending,
                           connection_closing=r.connection_closing))
        for r in DETACH_ROWS
    }
    assert produced == set(typing.get_args(DetachDecision))


def test_unsubscribe_sequence_with_a_consumer_elsewhere() -> None:
    # docs/wire.md §5.44 end to end: lookup succeeds, the close is refused, the subscription stays.
    rec = record(key(ns="global"))
    found = decide_attach(lookup("sub|global", OTHER_CID), have(rec, 1).get, shared_consumer_limit=None,
                          new_name=NEW, validate_selector=validate_selector)
    assert isinstance(found, Lookup)
    assert isinstance(decide_detach(True, found.record, 1), RefuseDelete)
    assert isinstance(decide_detach(True, found.record, 0), DeleteSubscription)
