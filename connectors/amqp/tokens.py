"""What a request to another thread leaves behind on the front end's thread, typed per use.

Proton objects must only ever be touched, and released, on the front end's thread: a proton
wrapper dropped on the committer thread runs ``pn_decref`` there, racing the loop (seen as heap
corruption under load). So a committer request carries an int (sharedsub.runtime.commit_requests
``Token``) and what it stands for stays here, in one registry per kind of thing kept:

* :class:`PublishContext` of a published message waiting for its commit (the transfer to settle,
  its link, the publisher's state), in ``Tokens[PublishContext]``;
* a :data:`Continuation` of any other request (an attach waiting for its catalog revision, a
  transaction for its commit, a replay for its barrier...), in ``Tokens[Continuation]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Generic, TypeVar

import proton

from connectors.amqp.endpoint_state import PublisherLink
from connectors.amqp.wire.proton_events import DeliveryTransfer, Transfer
from sharedsub.runtime.commit_requests import Result, Token

_T = TypeVar("_T")

Continuation = Callable[[Result], None]
"""What runs on the front end's thread with a request's result."""


@dataclasses.dataclass(frozen=True, slots=True)
class PublishContext:
    """A published message waiting for its commit: accepted (or rejected) when it is done."""

    transfer: Transfer | DeliveryTransfer
    link: proton.Receiver  # the link's kept wrapper: ``transfer.delivery.link`` would wrap it again
    state: PublisherLink


class Tokens(Generic[_T]):
    """Objects kept under int handles while their requests go through other threads (front end's
    thread only)."""

    def __init__(self) -> None:
        self._objects: dict[Token, _T] = {}
        self._next = 0

    def put(self, obj: _T) -> Token:
        """Keep ``obj``; return its handle."""
        self._next += 1
        self._objects[self._next] = obj
        return self._next

    def pop(self, handle: Token | None) -> _T | None:
        """The object of ``handle``, forgotten (None for a None or unknown handle)."""
        return None if handle is None else self._objects.pop(handle, None)

    def __len__(self) -> int:
        return len(self._objects)
