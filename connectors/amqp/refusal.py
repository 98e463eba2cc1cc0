"""Refusing a link: the attach answered with a null source, then a detach carrying the condition.

Reactor thread only (it touches the link: connectors/amqp/tokens.py). The handler refuses
publisher and coordinator attaches with it; the consumer side (connectors/amqp/consumers.py and
its parts) refuses consumer attaches.
"""

from __future__ import annotations

import logging
from typing import Any

import proton
from proton import Condition, Endpoint

log = logging.getLogger(__name__)


# Any: proton's Condition takes ``info`` as PythonAMQPData, a type proton keeps in a private module (proton._data)
def refuse(link: proton.Link, condition: str, description: str, info: dict[Any, Any] | None = None) -> None:
    """Refuse an attach: null source in the reply, then detach closed=true with the condition."""
    try:
        name: str = link.name
    except UnicodeDecodeError:  # proton decodes the name when it is read; a refusal must not fail on it
        name = "<name not valid UTF-8>"
    log.info("refusing link %r: %s %s", name, condition, description)
    if link.state & Endpoint.LOCAL_UNINIT:
        # A fresh proton link's local termini are typed SOURCE/TARGET with no address and would
        # go out as an empty source, which the Qpid JMS client reads as "found"/"opened".
        # UNSPECIFIED encodes as null (docs/wire.md §3, D13: both termini null on a refusal).
        link.source.type = proton.Terminus.UNSPECIFIED
        link.target.type = proton.Terminus.UNSPECIFIED
        link.open()
    link.condition = Condition(condition, description, info)
    link.close()
