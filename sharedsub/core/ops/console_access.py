"""Who may read and do what in the web console (``/console``): a pure decision, tested as a table.

``[server] console`` sets the console's access (docs/console.md):

* ``read-only`` (the default): the figures the endpoint's ``/metrics`` and ``/health`` already
  show to anyone who reaches the port (topics, subscriptions, backlog, consumers, the fan-out,
  storage, members, connections, a subscription's Delta history) are readable without the admin
  token; message contents (browsing a backlog) and every action (replay, unsubscribe, topic
  create and drop) need it. Message bodies and properties are application data that
  ``/metrics`` never exposes, so they sit behind the token with the actions.
* ``token``: nothing but the page itself (which asks for the token) without the token.
* ``off``: no console; ``/console`` is 404.

The token is the service's admin token (``<data_dir>/_service.json``, mode 0600), sent by the
page as ``Authorization: Bearer``; a cross-site form cannot set that header, which is what keeps
the actions safe from request forgery (connectors/http/admin.py).
"""

from __future__ import annotations

import enum

from sharedsub.core.errors import ConfigError


class ConsoleAccess(enum.StrEnum):
    """``[server] console``."""

    READ_ONLY = "read-only"
    TOKEN = "token"
    OFF = "off"


class Need(enum.StrEnum):
    """What a console request reads or does."""

    PAGE = "page"  # the page and its assets (it asks for the token itself)
    FIGURES = "figures"  # counts, rates, states, histories: what /metrics and /health show
    CONTENTS = "contents"  # message contents: a backlog's messages and their properties
    ACTION = "action"  # replay, unsubscribe, topic create and drop


def parse_access(text: str) -> ConsoleAccess:
    """``[server] console`` as a :class:`ConsoleAccess`.

    Raises:
        ConfigError: not one of the three values.
    """
    try:
        return ConsoleAccess(text.strip().lower())
    except ValueError:
        choices = ", ".join(repr(a.value) for a in ConsoleAccess)
        raise ConfigError("server.console", f"must be one of {choices}, got {text!r}") from None


def allowed(access: ConsoleAccess, need: Need, authorized: bool) -> bool:
    """Whether a console request that needs ``need`` is answered (module docstring)."""
    if access is ConsoleAccess.OFF:
        return False
    if authorized or need is Need.PAGE:
        return True
    return access is ConsoleAccess.READ_ONLY and need is Need.FIGURES
