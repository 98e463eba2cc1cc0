"""One page of a subscription's backlog as the console browses it: which messages, in which
order, and where the next page starts. Pure; the reads are sharedsub.runtime.backlog_browse's.

A backlog is the subscription generation's routed seqs that the ack log does not settle for good
(sharedsub.core.delivery.acklog), oldest seq first. A page is the first ``limit`` of them after
the cursor ``after`` (exclusive; None: from the start) whose topic row the selector matches
(sharedsub.core.selector.evaluate: only True matches; no selector: every message). Rows are
looked at in seq order; the page ends when it is full and one more match proves a next page, or
when ``max_scan`` rows were looked at (a rare selector over a long backlog): the cursor then
points past the last row looked at, so each request does bounded work and the next one goes on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Sequence

from sharedsub.core.selector import Selector, evaluate
from sharedsub.core.selector.evaluate import TopicRow


@dataclasses.dataclass(frozen=True, slots=True)
class Page:
    """A page: its rows, where the next one starts (None: this is the last), rows looked at."""

    rows: list[TopicRow]
    next_after: int | None
    scanned: int


def pending_after(routed: Iterable[int], settled: Collection[int], after: int | None) -> list[int]:
    """The routed seqs not settled for good, above ``after``, ascending (duplicates once)."""
    return sorted({s for s in routed if s not in settled and (after is None or s > after)})


def take_page(rows: Sequence[TopicRow], selector: Selector | None, limit: int, max_scan: int, more_after: bool) -> Page:
    """The page of ``rows`` (topic rows of pending seqs, ascending ``seq``; see the module
    docstring). ``more_after``: pending seqs exist beyond the last of ``rows`` (they were not
    read), so a page that runs out of rows still has a next one."""
    if limit <= 0:
        raise ValueError(f"a page holds at least one message, got limit {limit}")
    found: list[TopicRow] = []
    scanned = 0
    for row in rows:
        if scanned >= max_scan:
            return Page(found, found[-1]["seq"] if found and len(found) == limit else rows[scanned - 1]["seq"], scanned)
        scanned += 1
        if selector is not None and evaluate(selector, row) is not True:
            continue
        if len(found) == limit:  # one match more than a page: there is a next page
            return Page(found, found[-1]["seq"], scanned)
        found.append(row)
    if more_after and rows:
        return Page(found, found[-1]["seq"] if len(found) == limit else rows[-1]["seq"], scanned)
    return Page(found, None, scanned)
