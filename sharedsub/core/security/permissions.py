"""Who may publish, consume and manage on which topics, and whose subscription is whose; pure.

The rules (docs/security.md, "Permissions"):

* A **policy** comes from the permissions file (``[security] permissions_file``, TOML, read by
  :mod:`sharedsub.runtime.permissions_file`). Without one the policy is :data:`OPEN`: every connection,
  authenticated or anonymous, may publish and consume on every topic, and nobody manages over
  AMQP (the operator does, with the service's admin token over HTTP).
* With a file, a connection may do only what a ``[[grant]]`` gives it. A grant names principals
  (a user name, ``group:NAME`` from the ``[groups]`` table, ``*`` for every authenticated user,
  ``anonymous`` for connections without a user) and lists topic patterns per permission.
  A pattern is a topic name in which ``*`` stands for any run of characters (``orders-*``, ``*``).
* **publish** on T: attach a publisher to T, or send a message to T on an anonymous relay.
* **consume** on T: subscribe to T (create a subscription on it, or attach to one of one's own).
* **manage** on T: use, re-create and unsubscribe subscriptions on T that another user created.
* **Ownership**: each subscription records the user whose attach created it
  (:attr:`~sharedsub.core.model.SubscriptionRecord.owner`). Another user may attach to it (which
  includes the JMS unsubscribe, a null-source attach then a closing detach) or change it only
  with manage on its topic. One made by an anonymous connection, or before owners were recorded,
  has no owner: any connection with consume may use it.

Each refusal is an :class:`~sharedsub.core.errors.Unauthorized` naming the permission, the topic and
the user; it maps to ``amqp:unauthorized-access``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping

from sharedsub.core.errors import ConfigError, Unauthorized

ANYONE_AUTHENTICATED = "*"
ANONYMOUS = "anonymous"
GROUP_PREFIX = "group:"


class Permission(enum.StrEnum):
    """What a grant may allow."""

    PUBLISH = "publish"
    CONSUME = "consume"
    MANAGE = "manage"


def topic_matches(pattern: str, topic: str) -> bool:
    """True when ``topic`` matches ``pattern`` (``*`` = any run of characters, possibly empty).

    Time is linear in ``len(topic)`` times the number of ``*`` (no backtracking): each literal
    piece between stars is matched at its leftmost place, which is enough for a pattern whose
    only wildcard is ``*``.
    """
    pieces = pattern.split("*")
    if len(pieces) == 1:
        return pattern == topic
    first, *middle, last = pieces
    if not topic.startswith(first) or len(topic) < len(first) + len(last):
        return False
    pos = len(first)
    end = len(topic) - len(last)
    for piece in middle:
        found = topic.find(piece, pos, end)
        if found < 0:
            return False
        pos = found + len(piece)
    return topic.endswith(last) and pos <= end


@dataclasses.dataclass(frozen=True, slots=True)
class Grant:
    """Principals and the topic patterns each permission covers for them."""

    principals: frozenset[str]
    topics: Mapping[Permission, tuple[str, ...]]


@dataclasses.dataclass(frozen=True, slots=True)
class Policy:
    """A parsed permissions file; ``open`` = no file (see module docstring)."""

    grants: tuple[Grant, ...] = ()
    groups: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    open: bool = False

    def principals_of(self, user: str | None) -> frozenset[str]:
        """The principal names a connection of ``user`` (None: anonymous) answers to."""
        if user is None:
            return frozenset({ANONYMOUS})
        return frozenset(
            {user, ANYONE_AUTHENTICATED, *(GROUP_PREFIX + g for g, members in self.groups.items() if user in members)}
        )

    def allows(self, user: str | None, permission: Permission, topic: str) -> bool:
        """True when ``user`` has ``permission`` on ``topic``."""
        if self.open:
            return permission is not Permission.MANAGE
        names = self.principals_of(user)
        return any(
            grant.principals & names and any(topic_matches(p, topic) for p in grant.topics.get(permission, ()))
            for grant in self.grants
        )

    def check(self, user: str | None, permission: Permission, topic: str) -> None:
        """Return when allowed.

        Raises:
            Unauthorized: ``user`` lacks ``permission`` on ``topic``.
        """
        if not self.allows(user, permission, topic):
            raise Unauthorized(user, permission, topic)

    def check_subscription(self, user: str | None, owner: str | None, topic: str, name: str) -> None:
        """Return when ``user`` may use (attach to, change, unsubscribe) a subscription created
        by ``owner`` on ``topic`` (consume is checked separately).

        Raises:
            Unauthorized: it belongs to another user and ``user`` lacks manage on ``topic``.
        """
        if owner is None or owner == user or self.allows(user, Permission.MANAGE, topic):
            return
        raise Unauthorized(user, Permission.MANAGE, topic, subscription=name)


OPEN = Policy(open=True)
"""No permissions file: publish and consume for every connection, manage for nobody."""


def _strings(value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError("security.permissions_file", f"{where} must be a string or a list of non-empty strings")
    return tuple(value)


def parse_policy(document: Mapping[str, object], *, source: str = "permissions file") -> Policy:
    """The policy of a permissions file's TOML document (``[groups]`` and ``[[grant]]``).

    Raises:
        ConfigError: an unknown table or key, a grant without principals, a group reference that
            names no group, a permission that is not publish/consume/manage.
    """
    unknown = set(document) - {"groups", "grant"}
    if unknown:
        raise ConfigError(
            "security.permissions_file", f"{source}: unknown table(s) {', '.join(sorted(unknown))} (known: groups, grant)"
        )
    raw_groups = document.get("groups", {})
    if not isinstance(raw_groups, Mapping):
        raise ConfigError("security.permissions_file", f"{source}: [groups] must be a table of lists of user names")
    groups = {str(g): frozenset(_strings(m, f"{source}: groups.{g}")) for g, m in raw_groups.items()}
    raw_grants = document.get("grant", [])
    if not isinstance(raw_grants, list):
        raise ConfigError("security.permissions_file", f"{source}: grant must be an array of tables ([[grant]])")
    grants = []
    for i, raw in enumerate(raw_grants, start=1):
        where = f"{source}: grant #{i}"
        if not isinstance(raw, Mapping):
            raise ConfigError("security.permissions_file", f"{where} must be a table")
        extra = set(raw) - {"to", *Permission}
        if extra:
            raise ConfigError(
                "security.permissions_file",
                f"{where}: unknown key(s) {', '.join(sorted(extra))} (known: to, publish, consume, manage)",
            )
        if "to" not in raw:
            raise ConfigError("security.permissions_file", f"{where} needs 'to' (user names, group:NAME, '*' or 'anonymous')")
        principals = frozenset(_strings(raw["to"], f"{where}.to"))
        for p in principals:
            if p.startswith(GROUP_PREFIX) and p[len(GROUP_PREFIX):] not in groups:
                raise ConfigError("security.permissions_file", f"{where}: {p!r} names no group of [groups]")
        topics = {Permission(k): _strings(v, f"{where}.{k}") for k, v in raw.items() if k != "to"}
        grants.append(Grant(principals, topics))
    return Policy(tuple(grants), groups)

