"""Protocol-neutral views of a receiver attach and its source terminus; pure.

The AMQP front end translates a proton attach into an :class:`AttachRequest` (filters matched
by descriptor, docs/design.md §3; a missing expiry policy read as ``session-end``, docs/wire.md §3) and
hands it to :mod:`sharedsub.core.subscriptions.attach`. The catalog stores the source a null-source lookup must
answer with (docs/design.md §4.5) as the JSON of :func:`stored_source_json`, in
``SubscriptionRecord.source``.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping

from sharedsub.core.conditions import Capability
from sharedsub.core.model import ExpiryPolicy


class TerminusDurability(enum.IntEnum):
    """AMQP 1.0 terminus durability (the ``durable`` field of a source)."""

    NONE = 0
    CONFIGURATION = 1
    UNSETTLED_STATE = 2


DISTRIBUTION_COPY = "copy"
"""Distribution mode of a topic subscription's reply source (docs/wire.md §2.7)."""


@dataclasses.dataclass(frozen=True, slots=True)
class SourceSpec:
    """A source terminus as sharedsub needs it.

    Attributes:
        address: the source address (``T`` or ``T/pattern``), None when absent.
        capabilities: the source capabilities, as sent (symbols as strings).
        durable: terminus durability, 0 none, 1 configuration, 2 unsettled-state.
        expiry_policy: the source expiry policy (``session-end`` when absent).
        selector: the JMS selector of the first selector filter, None when there is none.
        no_local: a no-local filter is present.
        dynamic: the peer asked for a dynamic (temporary) node.
        distribution_mode: ``copy``, ``move`` or None.
        has_unknown_filters: the filter map held filters other than selector and no-local;
            they are not applied and are left out of the reply (docs/design.md §4.8).
    """

    address: str | None
    capabilities: tuple[str, ...] = ()
    durable: int = TerminusDurability.NONE
    expiry_policy: ExpiryPolicy = ExpiryPolicy.SESSION_END
    selector: str | None = None
    no_local: bool = False
    dynamic: bool = False
    distribution_mode: str | None = None
    has_unknown_filters: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class AttachRequest:
    """A receiver link attach: the peer wants to consume.

    Attributes:
        link_name: the attach's link name.
        container_id: the remote container-id of the connection (the JMS ClientID).
        source: the source terminus; None for a null source (or one with no address and
            dynamic=false, which Proton-C cannot tell apart, docs/wire.md §3): a lookup.
    """

    link_name: str
    container_id: str
    source: SourceSpec | None


def is_shared(spec: SourceSpec) -> bool:
    """The source asks for a shared subscription (capability ``shared``)."""
    return Capability.SHARED in spec.capabilities


def is_global(spec: SourceSpec) -> bool:
    """The source asks for the global namespace (capability ``global``)."""
    return Capability.GLOBAL in spec.capabilities


def stored_source_json(spec: SourceSpec) -> str:
    """JSON of the fields a null-source lookup answers with (docs/design.md §4.5).

    Address, capabilities, durable, expiry policy, distribution mode, selector and no-local;
    not ``dynamic`` (always false for a subscription) nor unknown filters (never applied).
    Keys are sorted so equal sources give equal text.
    """
    return json.dumps(
        {
            "address": spec.address,
            "capabilities": list(spec.capabilities),
            "durable": int(spec.durable),
            "expiry_policy": str(spec.expiry_policy),
            "distribution_mode": spec.distribution_mode,
            "selector": spec.selector,
            "no_local": spec.no_local,
        },
        sort_keys=True,
        separators=(",", ":"),
    )


def source_from_json(text: str) -> SourceSpec:
    """Inverse of :func:`stored_source_json`. Missing keys take :class:`SourceSpec`'s defaults.

    Raises:
        ValueError: the text is not a JSON object of that shape.
    """
    try:
        data: object = json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"stored source is not JSON: {exc}"
        raise ValueError(msg) from exc
    if not isinstance(data, dict):
        msg = f"stored source must be a JSON object, not {type(data).__name__}"
        raise ValueError(msg)
    try:
        return SourceSpec(
            address=_optional_str(data, "address"),
            capabilities=tuple(str(c) for c in data.get("capabilities", ())),
            durable=TerminusDurability(int(data.get("durable", 0))),
            expiry_policy=ExpiryPolicy(data.get("expiry_policy", ExpiryPolicy.SESSION_END)),
            selector=_optional_str(data, "selector"),
            no_local=bool(data.get("no_local", False)),
            distribution_mode=_optional_str(data, "distribution_mode"),
        )
    except (TypeError, ValueError) as exc:
        msg = f"stored source {text!r} is invalid: {exc}"
        raise ValueError(msg) from exc


def _optional_str(data: Mapping[str, object], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        msg = f"{key} must be a string or null, not {value!r}"
        raise ValueError(msg)
    return value
