"""Who is on the other end of a connection, as the listener established it (for authorization).

The AMQP listener (connectors/amqp/secure_listener.py) records an :class:`Identity` for each
connection it hands to the application, keyed by the proton Connection, and removes it when the
connection's socket is closed. Proton's own ``transport.user`` is not it: proton does no SASL for
these connections and reports ``anonymous``. A connection accepted by proton's stock listener
(no users, no TLS: the open default) has no entry: :meth:`Identities.get` gives
:data:`ANONYMOUS` for it.

Pure: no I/O; keys are any hashable (the proton Connection wrapper hashes by its C object).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable


@dataclasses.dataclass(frozen=True, slots=True)
class Identity:
    """``user`` None = anonymous; ``mechanism`` None = no SASL layer (bare AMQP header or the
    stock listener); ``tls_subject`` the verified client certificate's subject DN, if any."""

    user: str | None
    mechanism: str | None
    tls: bool = False
    tls_subject: str | None = None


ANONYMOUS = Identity(None, None)


class Identities:
    """Identity per connection."""

    def __init__(self) -> None:
        self._by_connection: dict[Hashable, Identity] = {}

    def set(self, connection: Hashable, identity: Identity) -> None:
        """Record ``connection``'s identity (the listener, when it creates the connection)."""
        self._by_connection[connection] = identity

    def get(self, connection: Hashable) -> Identity:
        """``connection``'s identity; :data:`ANONYMOUS` when none was recorded."""
        return self._by_connection.get(connection, ANONYMOUS)

    def discard(self, connection: Hashable) -> None:
        """Forget ``connection`` (its socket closed)."""
        self._by_connection.pop(connection, None)

    def __len__(self) -> int:
        return len(self._by_connection)
