"""Secure by default: a service open to anonymous clients listens on loopback only.

While the users file holds no user and ``[security] anonymous`` is ``"auto"`` (the default),
every client gets in without credentials; such a service may listen on a loopback address only.
On any other ``[server] host`` (``0.0.0.0``, ``::``, ``""``, a LAN address, a name that resolves
to one) ``serve``/``frontend`` refuse to start (exit 2) with :func:`refusal`'s one line, naming
the three ways out: keep the host on loopback, add a user, or accept the risk with
``anonymous = "true"``. With ``"true"`` the service starts and :func:`open_warning` is logged.
``"false"`` with no user lets nobody in, so it is not refused.

Pure: the caller resolves host names (:func:`is_loopback` takes the addresses).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable


def is_loopback(host: str, addresses: Iterable[str] = ()) -> bool:
    """True when ``host`` is a loopback address (127.0.0.0/8, ::1) or ``localhost``, or when it is
    a name whose resolved ``addresses`` are all loopback. ``""`` (every address) is not."""
    text = host.strip().strip("[]")
    if not text:
        return False
    if text.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        pass
    resolved = [a.split("%", 1)[0] for a in addresses]
    try:
        return bool(resolved) and all(ipaddress.ip_address(a).is_loopback for a in resolved)
    except ValueError:
        return False


def refusal(host: str, loopback: bool, have_users: bool, anonymous_mode: str, users_path: str) -> str | None:
    """Why the service must not start as configured (one line), or None when it may."""
    if loopback or have_users or anonymous_mode != "auto":
        return None
    shown = host or '""'
    return (
        f"{shown} is not a loopback address and the users file {users_path} holds no user, so anonymous "
        "clients could connect from the network; keep [server] host on loopback (127.0.0.1), add a user "
        "(`sharedsub users add NAME`, [security] users_file), or set [security] anonymous = \"true\" to "
        "accept the risk"
    )


def open_warning(host: str, loopback: bool, anonymous_allowed: bool, urls: Iterable[str]) -> str | None:
    """The start-up warning of a service that lets anonymous clients in from the network, or None."""
    if loopback or not anonymous_allowed:
        return None
    shown = host or '""'
    return (
        f"anonymous clients may connect from the network on {' and '.join(urls)} ([server] host {shown} "
        "is not loopback; [security] anonymous lets them in): anyone who reaches it may publish and consume"
    )
