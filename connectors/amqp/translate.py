"""proton ↔ sharedsub translation of link termini and of a redelivered message's header.

* An attach's remote source read into the core's :class:`~sharedsub.core.subscriptions.terminus.AttachRequest`
  (filters matched by descriptor, docs/design.md §3), and a decision's
  :class:`~sharedsub.core.subscriptions.attach.ReplySource` written back as the reply source.
* :func:`with_delivery_count`: a stored message with its header saying it was delivered before.

Published messages are read by sharedsub.core.publish.amqp_message, not here.
"""

from __future__ import annotations

from typing import Any

import proton
from proton import Described, Terminus, symbol, ulong

from sharedsub.core.conditions import (
    NO_LOCAL_FILTER_CODE,
    NO_LOCAL_FILTER_SYMBOLS,
    SELECTOR_FILTER_CODE,
    SELECTOR_FILTER_SYMBOLS,
)
from sharedsub.core.model import ExpiryPolicy
from sharedsub.core.subscriptions.attach import ReplySource
from sharedsub.core.subscriptions.terminus import AttachRequest, SourceSpec

# --------------------------------------------------------------------------- termini

_EXPIRY_IN = {
    Terminus.EXPIRE_WITH_LINK: ExpiryPolicy.LINK_DETACH,
    Terminus.EXPIRE_WITH_SESSION: ExpiryPolicy.SESSION_END,
    Terminus.EXPIRE_WITH_CONNECTION: ExpiryPolicy.CONNECTION_CLOSE,
    Terminus.EXPIRE_NEVER: ExpiryPolicy.NEVER,
}
_EXPIRY_OUT = {v: k for k, v in _EXPIRY_IN.items()}


def read_symbols(data: proton.Data | None) -> tuple[str, ...]:
    """Symbols of a capabilities field (array, single symbol, or nothing)."""
    if data is None:
        return ()
    data.rewind()
    if data.next() is None:
        return ()
    obj = data.get_object()
    if obj is None:
        return ()
    if isinstance(obj, proton.Array):
        return tuple(str(e) for e in obj.elements)
    if isinstance(obj, (list, tuple)):
        return tuple(str(e) for e in obj)
    return (str(obj),)


def write_symbols(data: proton.Data, values: tuple[str, ...] | list[str]) -> None:
    """Replace a capabilities field with a symbol array."""
    data.clear()
    data.put_array(False, proton.Data.SYMBOL)
    data.enter()
    for v in values:
        data.put_symbol(v)
    data.exit()


def _filters(source: Terminus) -> tuple[str | None, bool, bool]:
    """(selector, no_local, unknown filters present), filters matched by descriptor (docs/design.md §3)."""
    selector: str | None = None
    no_local = False
    unknown = False
    data = source.filter
    entries = None
    if data is not None:
        data.rewind()
        if data.next() is not None:
            entries = data.get_object()
    for value in (entries or {}).values() if isinstance(entries, dict) else ():
        descriptor = getattr(value, "descriptor", None)
        if descriptor == SELECTOR_FILTER_CODE or descriptor in SELECTOR_FILTER_SYMBOLS:
            if selector is None and isinstance(value.value, str):
                selector = value.value if value.value.strip() else None
        elif descriptor == NO_LOCAL_FILTER_CODE or descriptor in NO_LOCAL_FILTER_SYMBOLS:
            no_local = True
        else:
            unknown = True
    return selector, no_local, unknown


def source_spec(source: Terminus) -> SourceSpec | None:
    """The remote source of a receiver attach; None for a null source (a lookup)."""
    if source.type == Terminus.UNSPECIFIED or (source.address is None and not source.dynamic):
        return None
    selector, no_local, unknown = _filters(source)
    mode = source.distribution_mode
    return SourceSpec(
        address=source.address,
        capabilities=read_symbols(source.capabilities),
        durable=int(source.durability),
        expiry_policy=_EXPIRY_IN.get(source.expiry_policy, ExpiryPolicy.SESSION_END),
        selector=selector,
        no_local=no_local,
        dynamic=bool(source.dynamic),
        distribution_mode={Terminus.DIST_MODE_COPY: "copy", Terminus.DIST_MODE_MOVE: "move"}.get(mode),
        has_unknown_filters=unknown,
    )


def attach_request(link: proton.Link) -> AttachRequest:
    """Protocol-neutral view of a consumer's attach."""
    return AttachRequest(link.name, link.connection.remote_container or "", source_spec(link.remote_source))


def apply_reply(link: proton.Link, reply: ReplySource) -> None:
    """Write the reply source of a successful subscription attach (docs/wire.md §2.7)."""
    src = link.source
    src.type = Terminus.SOURCE
    src.address = reply.address  # type: ignore[assignment]  # None: a null address; proton takes it, its stub says str
    src.durability = reply.durable
    src.expiry_policy = _EXPIRY_OUT[reply.expiry_policy]
    if reply.distribution_mode == "copy":
        src.distribution_mode = Terminus.DIST_MODE_COPY
    write_symbols(src.capabilities, list(reply.capabilities))
    filters: dict[symbol, Described] = {}
    if reply.selector is not None:
        filters[symbol("jms-selector")] = Described(ulong(SELECTOR_FILTER_CODE), reply.selector)
    if reply.no_local:
        filters[symbol("no-local")] = Described(ulong(NO_LOCAL_FILTER_CODE), [])
    src.filter.clear()
    if filters:
        src.filter.put_object(filters)
    link.target.copy(link.remote_target)


# --------------------------------------------------------------------------- redelivery

_HEADER_CODE = 0x70
_HEADER_SYMBOL = "amqp:header:list"


def with_delivery_count(raw: bytes, delivery_count: int) -> bytes:
    """``raw`` with its header saying ``delivery_count`` and first-acquirer false.

    Only the header section changes (it is the one section an intermediary may modify); the
    bare message (properties through footer) stays byte for byte. A message without a header
    gets one that states only these two fields (the others keep their defaults).
    """
    data = proton.Data()
    consumed = data.decode(raw)
    data.rewind()
    data.next()
    first = data.get_object()
    fields: list[Any]  # Any: proton's Described takes PythonAMQPData, a type proton keeps private (proton._data)
    rest = raw
    if isinstance(first, Described) and first.descriptor in (_HEADER_CODE, _HEADER_SYMBOL):
        fields = list(first.value) if isinstance(first.value, list) else []
        rest = raw[consumed:]
    else:
        fields = []
    fields += [None] * (5 - len(fields))
    fields[3] = False  # first-acquirer
    fields[4] = proton.uint(delivery_count)
    out = proton.Data()
    out.put_object(Described(ulong(_HEADER_CODE), fields))
    return out.encode() + rest
