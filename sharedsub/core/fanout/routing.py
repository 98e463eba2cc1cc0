"""Routing plan: which topic rows go to which subscription; pure (pyarrow, no pyspark, no I/O).

:func:`build_plan` turns the active catalog records into one :class:`Route` per subscription;
:meth:`RoutingPlan.route` takes a batch of topic rows (Arrow, the fan-out source's columns:
``topic`` and ``schemas.ROUTING_COLUMNS``) and returns one row per (row, subscription it
matches), tagged with the route's index. A row goes to a subscription when all of these hold:

* ``topic`` is the subscription's topic and ``seq`` is at or above the generation's start in
  the row's partition (``SubscriptionRecord.start_in``: a generation receives only what was
  committed after it was created, docs/design.md §5; a topic's partitions number their seqs
  apart, sharedsub.core.layout);
* the routing key matches the binding pattern (:func:`sharedsub.core.fanout.binding.matches`; a null key
  counts as the empty key). Keys are matched once per distinct key in the batch, in Python;
* no-local: the publisher is not the subscription's namespace (docs/design.md §4.9; a null publisher is
  never the namespace);
* the JMS selector is true (:mod:`sharedsub.core.selector.arrow`; unknown routes nothing). A blank
  selector is no selector.

Why Arrow and not one Spark SQL expression: the first fan-out built a CASE per subscription into
one projection, and Spark re-analysed and re-optimised it on every micro-batch, in time growing
faster than the number of subscriptions (100 distinct selectors: 20–50 s a batch; 1,000 never
finished one). Evaluating compiled selectors over Arrow batches costs a few vectorised kernels
per subscription and batch, and the compiled plan is reused for as long as the catalog does not
change. The fan-out evaluates on the driver, where the micro-batch is collected anyway for the
Delta commits: ``mapInArrow`` in Spark's Python workers was tried and measured 3–4 times slower
for 1,000 subscriptions on this 2-core machine (a second Python hop for every row, and each
worker compiling the plan). Per batch, what subscriptions share is computed once: each topic's
rows, each binding pattern's mask, each no-local namespace's mask, each distinct selector's
result, each property's typed columns.

:func:`condition` still gives one subscription's condition as Spark SQL, for querying a topic
table in Spark for what a subscription receives (notebooks, diagnostics); it has the same
meaning (tests/spark/test_binding_spark.py, tests/spark/test_selector_parity.py).

String literals in that SQL are escaped for Spark SQL's default parser mode
(``spark.sql.parser.escapedStringLiterals=false``, where backslash is an escape character).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from sharedsub.core import layout
from sharedsub.core.fanout import binding
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.selector import Selector, SelectorError, parse_selector, to_spark_sql
from sharedsub.core.selector.arrow import ArrowSelector, Rows, compile_arrow

# Re-exported: routing is where callers have always found it; it lives with the selector's SQL
# generation, which needs it too and which routing depends on.
from sharedsub.core.selector.sparksql import sql_string

# The key as the binding regex expects it: '.' + key without trailing dots (binding.normalise_key).
# ``\z`` (Java: the very end) rather than ``$``, which in Java also matches before a final line
# terminator and would strip "a.\n" to "a\n".
NORMALISED_KEY_SQL = r"concat('.', regexp_replace(coalesce(`routing_key`, ''), '\\.+\\z', ''))"

ROUTE_COLUMN = "_route"
"""Column of :meth:`RoutingPlan.route`'s output: the index of the route the row goes to."""


def java_regex(pattern: str) -> str:
    r"""The binding regex for Java (Spark ``RLIKE``): ``binding.to_regex`` anchored with ``\z``.

    ``to_regex`` ends in ``$``, which Java also matches before a final line terminator (``\n``,
    ``\r``, ``\u2028``, ...); ``\z`` matches only at the end, which is what "exact" means.
    """
    regex = binding.to_regex(pattern)
    if regex.endswith("$") and not regex.endswith("\\$"):
        regex = regex[:-1] + "\\z"
    return regex


class UnsupportedSubscription(ValueError):
    """A record the fan-out cannot route yet (it is skipped, with this reason, and logged)."""


def parsed_selector(record: SubscriptionRecord) -> Selector | None:
    """The record's selector, parsed; None when it has none (or a blank one).

    Raises:
        UnsupportedSubscription: the record's selector does not parse. The front end validates
            selectors at attach (docs/design.md §4.8), so only a damaged catalog or an older/newer
            grammar gets here; the subscription then receives nothing rather than everything.
    """
    if record.selector is None:
        return None
    try:
        return parse_selector(record.selector)
    except SelectorError as exc:
        raise UnsupportedSubscription(
            f"subscription {record.key!r} has an invalid JMS selector, so it receives nothing: {exc.description}"
        ) from exc


def condition(record: SubscriptionRecord) -> str:
    """Boolean Spark SQL expression: true exactly for the topic rows ``record`` receives.

    Raises:
        UnsupportedSubscription: as :func:`parsed_selector`.
    """
    parts = [f"`topic` = {sql_string(record.topic)}", _start_sql(record)]
    if binding.normalise_pattern(record.binding) != "#":
        parts.append(f"{NORMALISED_KEY_SQL} RLIKE {sql_string(java_regex(record.binding))}")
    if record.no_local:
        parts.append(f"`publisher` IS DISTINCT FROM {sql_string(record.identity.namespace)}")
    selector = parsed_selector(record)
    if selector is not None:
        parts.append(to_spark_sql(selector))
    return " AND ".join(f"({p})" for p in parts)


def _start_sql(record: SubscriptionRecord) -> str:
    """``seq`` at or above ``record``'s start in the row's partition, as Spark SQL."""
    own = layout.partition_of_seq(record.start_seq)
    known = [(own, record.start_seq), *[(p, s) for p, s in record.start_seqs if p != own]]
    if len(known) == 1 and own == 0:
        # Only partition 0 was known: a later partition's seqs are all above its start already.
        return f"`seq` >= {int(record.start_seq)}"
    part = f"shiftright(`seq`, {layout.PARTITION_BITS})"
    cases = " OR ".join(f"({part} = {p} AND `seq` >= {int(s)})" for p, s in known)
    others = ", ".join(str(p) for p, _ in known)
    return f"{cases} OR {part} NOT IN ({others})"


def _start_mask(record: SubscriptionRecord, seq: pa.Array, shared: dict[object, pa.Array]) -> pa.Array:
    """True where ``seq`` is at or above ``record``'s start in its partition (never null)."""
    if not record.start_seqs and layout.partition_of_seq(record.start_seq) == 0:
        # A record saved when its topic had partition 0 only: every later partition's seqs are
        # above its start, so one comparison holds for all (a single front end's case).
        return pc.greater_equal(seq, record.start_seq)
    if "partitions" not in shared:
        shared["partitions"] = pc.shift_right(seq, layout.PARTITION_BITS)
    partitions = shared["partitions"]
    present = pc.unique(partitions).to_pylist()
    starts = pa.array([record.start_in(int(p)) for p in present], pa.int64())
    threshold = pc.take(starts, pc.index_in(partitions, value_set=pa.array(present, partitions.type)))
    return pc.greater_equal(seq, threshold)


@dataclasses.dataclass(frozen=True, slots=True)
class Route:
    """One subscription of the plan: its position ``index``, record and compiled selector."""

    index: int
    record: SubscriptionRecord
    selector: ArrowSelector | None = None

    @property
    def pattern(self) -> str | None:
        """The normalised binding pattern; None for ``#`` (every key)."""
        pattern = binding.normalise_pattern(self.record.binding)
        return None if pattern == "#" else pattern


@dataclasses.dataclass(frozen=True, slots=True)
class Skipped:
    """A record left out of the plan, and why."""

    record: SubscriptionRecord
    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class RoutingPlan:
    """The routes for a catalog state; ``routes[i].index == i``. Reusable across batches."""

    routes: tuple[Route, ...]
    skipped: tuple[Skipped, ...] = ()

    @property
    def topics(self) -> frozenset[str]:
        """Topics at least one route reads."""
        return frozenset(r.record.topic for r in self.routes)

    def routes_per_topic(self) -> dict[str, int]:
        """How many routes read each topic (a batch's routing work is its rows times these)."""
        counts: dict[str, int] = {}
        for r in self.routes:
            counts[r.record.topic] = counts.get(r.record.topic, 0) + 1
        return counts

    def matches(self, batch: pa.RecordBatch) -> tuple[pa.Array, pa.Array]:
        """Every (row, route) pair where a row of ``batch`` goes to a route: two parallel arrays,
        row positions (uint64) and route indexes (int32), grouped by route in route order, each
        group in ``batch`` order.

        ``batch`` must hold ``topic`` and ``schemas.ROUTING_COLUMNS`` (what selectors read).
        """
        picked: list[pa.Array] = []
        routes: list[pa.Array] = []
        if batch.num_rows and self.routes:
            topics = batch.column("topic")
            for topic, topic_routes in _by_topic(self.routes).items():
                where = pc.indices_nonzero(pc.fill_null(pc.equal(topics, topic), False))
                if len(where) == 0:
                    continue
                rows = Rows(batch.take(where))
                shared: dict[object, pa.Array] = {}
                for route in topic_routes:
                    hits = pc.indices_nonzero(_route_mask(route, rows, shared))
                    if len(hits):
                        picked.append(where.take(hits))
                        routes.append(pa.repeat(pa.scalar(route.index, pa.int32()), len(hits)))
        if not picked:
            return pa.array([], pa.uint64()), pa.array([], pa.int32())
        return pa.concat_arrays(picked), pa.concat_arrays(routes)

    def route(self, batch: pa.RecordBatch, columns: Sequence[str]) -> pa.Table:
        """One row per (row of ``batch``, route it goes to): ``columns`` of the row, then
        :data:`ROUTE_COLUMN` (int32, the route's index); grouped by route in route order, each
        group in ``batch`` order."""
        positions, indexes = self.matches(batch)
        taken = pa.Table.from_batches([batch.select(list(columns))]).take(positions)
        return taken.append_column(ROUTE_COLUMN, indexes)


def _by_topic(routes: tuple[Route, ...]) -> dict[str, list[Route]]:
    grouped: dict[str, list[Route]] = {}
    for route in routes:
        grouped.setdefault(route.record.topic, []).append(route)
    return grouped


def _route_mask(route: Route, rows: Rows, shared: dict[object, pa.Array]) -> pa.Array:
    """True where the rows of ``route``'s topic go to ``route`` (never null)."""
    record = route.record
    mask = _start_mask(record, rows.column("seq"), shared)
    pattern = route.pattern
    if pattern is not None:
        key = ("binding", pattern)
        if key not in shared:
            shared[key] = _binding_mask(pattern, rows.column("routing_key"))
        mask = pc.and_(mask, shared[key])
    if record.no_local:
        key = ("no-local", record.identity.namespace)
        if key not in shared:
            # IS DISTINCT FROM: a null publisher is nobody's.
            shared[key] = pc.fill_null(pc.not_equal(rows.column("publisher"), record.identity.namespace), True)
        mask = pc.and_(mask, shared[key])
    if route.selector is not None:
        mask = pc.and_(mask, pc.fill_null(rows.selector_result(route.selector), False))
    return mask


def _binding_mask(pattern: str, keys: pa.Array) -> pa.Array:
    """True where the routing key matches ``pattern``: each distinct key is matched once."""
    keys = pc.fill_null(keys, "")
    distinct = pc.unique(keys).to_pylist()
    matching = pa.array([k for k in distinct if _matches(pattern, k)], pa.string())
    return pc.is_in(keys, value_set=matching)


@functools.lru_cache(maxsize=65_536)
def _matches(pattern: str, key: str) -> bool:
    return binding.matches(pattern, key)


def build_plan(records: Iterable[SubscriptionRecord]) -> RoutingPlan:
    """Routes for the active ``records`` (in the given order), skipping those not routable."""
    routes: list[Route] = []
    skipped: list[Skipped] = []
    compiled: dict[str, ArrowSelector] = {}  # identical selector texts share one compilation
    for record in records:
        if not record.active:
            continue
        try:
            selector = parsed_selector(record)
        except UnsupportedSubscription as exc:
            skipped.append(Skipped(record, str(exc)))
            continue
        arrow = None
        if selector is not None:
            arrow = compiled.get(selector.text)
            if arrow is None:
                arrow = compiled[selector.text] = compile_arrow(selector)
        routes.append(Route(len(routes), record, arrow))
    return RoutingPlan(tuple(routes), tuple(skipped))


@functools.lru_cache(maxsize=4)
def plan_for(records: tuple[SubscriptionRecord, ...]) -> RoutingPlan:
    """:func:`build_plan` of ``records``, remembered: a catalog state is compiled once per process.

    The fan-out calls this for each micro-batch; while the catalog does not change, the records
    (and so the key) are the same.
    """
    return build_plan(records)
