"""Routing plan: which topic rows go to which subscription, as Spark SQL text; pure (no pyspark).

:func:`build_plan` turns the active catalog records into one :class:`Route` per subscription,
each with a boolean Spark SQL expression over the fan-out source's columns (``topic`` and
``schemas.ROUTING_COLUMNS``):

* ``topic = '<T>'`` and ``seq >= start_seq`` (a generation receives only what was committed after
  it was created, DESIGN §5);
* the binding pattern as a regex over ``'.' + routing key without trailing dots``
  (:func:`sharedsub.binding.to_regex`); left out for ``#``, which matches every key;
* no-local: ``publisher IS DISTINCT FROM '<namespace>'`` (DESIGN §4.9);
* the JMS selector, compiled by :func:`sharedsub.selector.to_spark_sql` (DESIGN §3): true
  only when the selector matches, so an unknown result routes nothing. A blank selector is no
  selector.

A null routing key counts as the empty key. :meth:`RoutingPlan.route_expression` combines the
routes into one ``array<int>`` expression (the indexes of every matching route), so one pass over a
micro-batch serves all subscriptions. ``CASE WHEN`` yields null for false *and* unknown, so rows
are routed only where a condition is true, as SQL's (and JMS's) three-valued logic wants.

String literals are escaped for Spark SQL's default parser mode
(``spark.sql.parser.escapedStringLiterals=false``, where backslash is an escape character): the
job pins that setting.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from sharedsub import binding
from sharedsub.model import SubscriptionRecord
from sharedsub.selector import SelectorError, parse_selector, to_spark_sql

# Re-exported: routing is where callers have always found it; it lives with the selector's SQL
# generation, which needs it too and which routing depends on.
from sharedsub.selector.sparksql import sql_string

# The key as the binding regex expects it: '.' + key without trailing dots (binding.normalise_key).
# ``\z`` (Java: the very end) rather than ``$``, which in Java also matches before a final line
# terminator and would strip "a.\n" to "a\n".
NORMALISED_KEY_SQL = r"concat('.', regexp_replace(coalesce(`routing_key`, ''), '\\.+\\z', ''))"

# Name of the lambda variable in route_expression; no source column has this name.
_LAMBDA_VAR = "_route"


def java_regex(pattern: str) -> str:
    """The binding regex for Java (Spark ``RLIKE``): ``binding.to_regex`` anchored with ``\\z``.

    ``to_regex`` ends in ``$``, which Java also matches before a final line terminator (``\\n``,
    ``\\r``, ``\\u2028``, ...); ``\\z`` matches only at the end, which is what "exact" means.
    """
    regex = binding.to_regex(pattern)
    if regex.endswith("$") and not regex.endswith("\\$"):
        regex = regex[:-1] + "\\z"
    return regex


class UnsupportedSubscription(ValueError):
    """A record the fan-out cannot route yet (it is skipped, with this reason, and logged)."""


def condition(record: SubscriptionRecord) -> str:
    """Boolean Spark SQL expression: true exactly for the source rows ``record`` must receive.

    Raises:
        UnsupportedSubscription: the record's selector does not parse. The front end validates
            selectors at attach (DESIGN §4.8), so only a damaged catalog or an older/newer
            grammar gets here; the subscription then receives nothing rather than everything.
    """
    parts = [f"`topic` = {sql_string(record.topic)}", f"`seq` >= {int(record.start_seq)}"]
    if binding.normalise_pattern(record.binding) != "#":
        parts.append(f"{NORMALISED_KEY_SQL} RLIKE {sql_string(java_regex(record.binding))}")
    if record.no_local:
        parts.append(f"`publisher` IS DISTINCT FROM {sql_string(record.identity.namespace)}")
    if record.selector is not None:
        try:
            selector = parse_selector(record.selector)
        except SelectorError as exc:
            raise UnsupportedSubscription(
                f"subscription {record.key!r} has an invalid JMS selector, so it receives nothing: {exc.description}"
            ) from exc
        if selector is not None:
            parts.append(to_spark_sql(selector))
    return " AND ".join(f"({p})" for p in parts)


@dataclasses.dataclass(frozen=True, slots=True)
class Route:
    """One subscription of the plan: its position ``index`` and the rows it takes."""

    index: int
    record: SubscriptionRecord
    condition: str


@dataclasses.dataclass(frozen=True, slots=True)
class Skipped:
    """A record left out of the plan, and why."""

    record: SubscriptionRecord
    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class RoutingPlan:
    """The routes for one micro-batch; ``routes[i].index == i``."""

    routes: tuple[Route, ...]
    skipped: tuple[Skipped, ...] = ()

    @property
    def topics(self) -> frozenset[str]:
        """Topics at least one route reads."""
        return frozenset(r.record.topic for r in self.routes)

    def route_expression(self) -> str:
        """Spark SQL ``array<int>``: indexes of the routes whose condition is true for a row.

        Explode it to get one row per (source row, matching route). Only meaningful when the plan
        has routes (Spark's ``array()`` of nothing has another type).
        """
        if not self.routes:
            raise ValueError("a plan without routes has no route expression")
        cases = ", ".join(f"CASE WHEN {r.condition} THEN {r.index} END" for r in self.routes)
        return f"filter(array({cases}), {_LAMBDA_VAR} -> {_LAMBDA_VAR} IS NOT NULL)"


def build_plan(records: Iterable[SubscriptionRecord]) -> RoutingPlan:
    """Routes for the active ``records`` (in the given order), skipping those not routable yet."""
    routes: list[Route] = []
    skipped: list[Skipped] = []
    for record in records:
        if not record.active:
            continue
        try:
            cond = condition(record)
        except UnsupportedSubscription as exc:
            skipped.append(Skipped(record, str(exc)))
            continue
        routes.append(Route(len(routes), record, cond))
    return RoutingPlan(tuple(routes), tuple(skipped))
