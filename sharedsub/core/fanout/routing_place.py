"""Where the fan-out routes a micro-batch, and which executor-written files a commit takes; pure.

**Placement** (``[fanout] routing``). On the driver, a batch's routing columns are read and
routed in the driver's Python with Arrow, and each subscription table gets one commit: the
lowest latency, and the only sensible path on one host, where executor routing measured 3–4
times slower (sharedsub/core/fanout/routing.py). On the executors, Spark tasks read the topic
files, route, and write each subscription's rows as Parquet files into its table; the driver
commits only file names (jobs/executor_routing.py). That pays a Spark job per batch (task
scheduling, Python workers, the catalog shipped once per revision) and wins when the routing
work is large and the executors have cores of their own:

    routing      executors   batch work (rows × routes)            placement
    ---------    ---------   ------------------------------------  ---------
    driver       any         any                                   driver
    executors    any         any                                   executors
    auto         none        any                                   driver   (a local master)
    auto         ≥ 1         unknown (the driver does not read)    executors
    auto         ≥ 1         < executor_min_work                   driver
    auto         ≥ 1         ≥ executor_min_work                   executors

"Executors" counts the cluster's executors (0 for ``local[…]``, whose tasks share the driver's
cores); ``local-cluster[…]`` and ``spark://…`` have them. Work is the batch's source rows times
the routes of their topics: routing cost grows with both (one mask per route and row). It is
known only when the driver planned the batch's files and knows the rows of each
(:func:`batch_work`).

**Who commits.** The driver commits the tables a batch wrote from a few threads; each commit
is several store requests (a bucket: about ten, tens of ms), so a batch that wrote many tables
spends its time there, one table after another. From ``task_commit_min_tables`` tables on,
the commits go into Spark tasks instead, one task per table and batch
(jobs/executor_routing.CommitTask), as many at once as the executors have cores; a table that is
failing (its rows parked) stays with the driver, which parks and retries as always:

    tables written (healthy)    task_commit_min_tables    who commits
    ------------------------    ----------------------    ------------------------
    any                         0                         the driver (off)
    < min                       min > 0                   the driver
    ≥ min                       min > 0                   tasks, one per table

**Files of a commit.** A task writes one file per (subscription table, task) with the seq range
it holds; the driver commits a table's files in one commit whose app transaction is their
highest seq. Rows at or below the table's recorded app-transaction version (``done``) are in
the table already (a replayed batch, or a job that crashed after some tables committed), so:

    file's seqs vs done          what the commit does with the file
    ---------------------------  ----------------------------------------------------------
    no done (never committed)    commit it
    min_seq > done               commit it
    max_seq ≤ done               drop it (an orphan: removed, never named by a commit)
    min_seq ≤ done < max_seq     trim it: rewrite its rows with seq > done, drop the original
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence

ROUTING_MODES = ("driver", "executors", "auto")


class Placement(enum.Enum):
    """Where one micro-batch is routed."""

    DRIVER = "driver"
    EXECUTORS = "executors"


def placement(mode: str, *, executors: int, work: int | None, executor_min_work: int) -> Placement:
    """Where to route a batch (the table of the module docstring).

    ``mode``: ``[fanout] routing``; ``executors``: the cluster's executors (0 for a local master);
    ``work``: source rows × routes of their topics, None when unknown before reading;
    ``executor_min_work``: ``[fanout] executor_min_work``.
    """
    if mode == "driver":
        return Placement.DRIVER
    if mode == "executors":
        return Placement.EXECUTORS
    if mode != "auto":
        raise ValueError(f"routing mode must be one of {', '.join(ROUTING_MODES)}, got {mode!r}")
    if executors < 1:
        return Placement.DRIVER
    if work is None or work >= executor_min_work:
        return Placement.EXECUTORS
    return Placement.DRIVER


def batch_work(parts: Sequence[tuple[str, int | None]] | None, routes: Mapping[str, int]) -> int | None:
    """A batch's routing work: the sum over its planned ``parts`` (``(topic, rows)``) of rows
    times the ``routes`` of that topic (a topic no route reads counts 0). None when unknown:
    the driver did not plan the batch (``parts`` None) or a part's rows are unknown."""
    if parts is None or any(rows is None for _, rows in parts):
        return None
    return sum((rows or 0) * routes.get(topic, 0) for topic, rows in parts)


def commits_in_tasks(tables: int, *, min_tables: int) -> bool:
    """Whether a batch's ``tables`` healthy tables with files are committed in Spark tasks (the
    second table of the module docstring; ``min_tables``: ``[fanout] task_commit_min_tables``)."""
    return min_tables > 0 and tables >= min_tables


@dataclasses.dataclass(frozen=True, slots=True)
class FilePlan:
    """What a commit does with each of a table's files (indexes into the ranges given)."""

    commit: tuple[int, ...]  # commit as written
    trim: tuple[int, ...]  # rewrite with only the rows above done, then commit the new file
    drop: tuple[int, ...]  # never commit (rows already in the table)


def plan_files(ranges: Sequence[tuple[int, int]], done: int | None) -> FilePlan:
    """Sort a table's files by what the commit does with them (the module docstring's second
    table); ``ranges``: each file's ``(min_seq, max_seq)``; ``done``: the table's app-transaction
    version, None when it has none."""
    commit: list[int] = []
    trim: list[int] = []
    drop: list[int] = []
    for index, (low, high) in enumerate(ranges):
        if done is None or low > done:
            commit.append(index)
        elif high <= done:
            drop.append(index)
        else:
            trim.append(index)
    return FilePlan(tuple(commit), tuple(trim), tuple(drop))
