"""Retention rules: which topic rows and which catalog revisions maintenance may remove. Pure.

sharedsub.runtime.maintenance does the I/O (sharedsub.storage.retention reads what these rules need);
the rules are tested as tables (tests/unit/test_retention_rules.py).

**Topic rows** (:func:`topic_cut`). A topic table is the only place a message's payload lives,
so a row may go only when nothing can deliver it again:

* the fan-out has routed it: its file belongs to a topic version at or below the one the
  fan-out's last committed micro-batch read (:class:`FanoutProgress`);
* no active subscription of the topic holds it (:func:`subscription_hold`, per topic partition:
  each partition is a table of its own, sharedsub.core.layout "Partitions"): a non-durable one
  holds from its first routed row not settled for good as the front end consuming it vouches
  (its acknowledgements are in that memory only; sharedsub.runtime.maintenance), else its lowest row;
  a durable one from the lowest seq any data file of its table still holds, because a replay
  (sharedsub.core.ops.replay) re-delivers what the table held at any version inside the history
  retention, and vacuum keeps exactly the files those versions read;
* it was published at least the topic retention ago.

Rows go by whole files, from the oldest: the cut is the last seq of the last file that may go,
so the delete removes files and rewrites none (a rewritten file would be a commit that adds
files, which the fan-out's source must never take for new rows). The newest file of a topic
always stays: the front end numbers the next message after the highest seq it finds.

**Catalog revisions** (:func:`catalog_revisions_to_drop`): a revision superseded by a newer one of
its key goes once that newer one is older than the history retention. The newest revision of a
key stays (readers keep the row with the highest revision per key, and the front end numbers
generations after it), except a deleted *plain* consumer's (unshared, non-durable: its name was
made unique for one link, nothing can come back to it) once its tables are gone and the deletion
is older than the retention. The catalog's highest revision always stays: the front end numbers
new revisions after the highest one it finds, and readers that tail the catalog ignore a
revision that is not above the one they hold for its key.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from sharedsub.core import layout

# --------------------------------------------------------------------------- fan-out progress


@dataclasses.dataclass(frozen=True, slots=True)
class FanoutProgress:
    """What the fan-out query's checkpoint says (sharedsub.storage.retention reads it).

    ``versions``/``ids``: per topic, the last table version (and the table's Delta id) read by
    the newest *committed* micro-batch: every row of those versions is in the subscription
    tables it routes to. ``planned_ms``: when the newest planned batch's offsets were written,
    None when that batch is committed (nothing in flight) or nothing was ever planned.
    ``found``: a checkpoint exists at all. ``as_of_ms``: when what this says was true, for a
    progress record the job wrote (sharedsub.core.ops.fanout_progress: no batch was in the job's
    hands then, ``planned_ms`` is None); None when read live from the checkpoint.
    """

    versions: Mapping[str, int] = dataclasses.field(default_factory=dict)
    ids: Mapping[str, str] = dataclasses.field(default_factory=dict)
    planned_ms: int | None = None
    found: bool = False
    as_of_ms: int | None = None

    def routed_version(self, topic: str, table_id: str | None) -> int:
        """Last version of ``topic``'s table ``table_id`` the fan-out has routed (-1: none).

        A table the checkpoint knows under another id (the topic was dropped and created
        again) has had nothing routed yet, and neither has one whose id is unknown.
        """
        known = self.ids.get(topic)
        if table_id is None or known is None or known != table_id:
            return -1
        return int(self.versions.get(topic, -1))

    def writes_follow(self, catalog_written_ms: int) -> bool:
        """True when whatever the fan-out writes from now on is decided on a catalog read made
        after ``catalog_written_ms`` (the time of a catalog commit): no batch is in flight, or
        the one in flight was planned after it (a batch reads the catalog after it is planned).
        False when there is no checkpoint: the fan-out may run with one elsewhere. A record
        written ``as_of_ms`` vouches only for batches planned after that moment: it must be newer
        than the catalog commit."""
        if not self.found:
            return False
        if self.planned_ms is not None:
            return self.planned_ms > catalog_written_ms
        return self.as_of_ms is None or self.as_of_ms > catalog_written_ms


def parse_offset_file(text: str) -> dict[str, Any] | None:  # Any: json.loads's document, read by key
    """The source offset of a Spark ``offsets/<batch>`` file (``v1``, the batch metadata, then one
    JSON line per source: the fan-out has one); None when it has none."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 3 or lines[2].strip() == "-":
        return None
    value = json.loads(lines[2])
    if isinstance(value, str):  # a source offset serialised as a JSON string
        value = json.loads(value)
    return value if isinstance(value, dict) else None


# --------------------------------------------------------------------------- topic rows


@dataclasses.dataclass(frozen=True, slots=True)
class TopicFile:
    """One data file of a topic's snapshot, as the cut sees it."""

    first_seq: int | None  # None: no statistics (the cut stops there)
    last_seq: int | None
    newest_published_ms: int | None
    routed: bool  # the fan-out read it in a committed micro-batch


Holds = dict[int, int]
"""Per topic partition, the lowest seq held in it (a partition that is not a key: nothing held)."""


def lowest_by_partition(seqs: np.ndarray) -> Holds:
    """The lowest of ``seqs`` in each partition they were numbered in (sharedsub.core.layout)."""
    if seqs.size == 0:
        return {}
    ordered = np.sort(seqs.astype(np.int64, copy=False))
    parts = ordered >> layout.PARTITION_BITS
    starts = np.flatnonzero(np.r_[True, parts[1:] != parts[:-1]])
    return {int(parts[i]): int(ordered[i]) for i in starts}


def first_unsettled(routed: np.ndarray, settled: np.ndarray) -> Holds:
    """Per partition, the lowest routed seq not in ``settled``; a partition whose routed seqs
    are all settled (or that has none) is not a key."""
    return lowest_by_partition(np.setdiff1d(routed, settled, assume_unique=False))


def parked_hold(firsts: Iterable[int], partitions: Iterable[int]) -> Holds:
    """What rows the fan-out parked hold, from their files' first seqs: a file holds its first
    seq's partition from that seq, and may hold rows of any later partition of the topic (a
    micro-batch reads every partition), which it holds whole (from their first seq)."""
    lows = list(firsts)
    if not lows:
        return {}
    low = min(lows)
    first_partition = layout.partition_of_seq(low)
    held = {p: layout.partition_seq_base(p) for p in partitions if p > first_partition}
    for seq in lows:
        p = layout.partition_of_seq(seq)
        held[p] = min(held.get(p, seq), seq)
    return held


def subscription_hold(*, durable: bool, first_open: Mapping[int, int], lowest_retained: Mapping[int, int]) -> Holds:
    """Per partition, the lowest topic seq a subscription generation may still deliver.

    ``first_open``: its first routed seq not settled for good, per partition. ``lowest_retained``:
    the lowest seq in any data file its table keeps, per partition (durable: replays inside the
    history retention read those files; everything open is in the current snapshot, so it is
    never above ``first_open``).
    """
    if not durable:
        return dict(first_open)
    return topic_hold([first_open, lowest_retained])


def topic_hold(holds: Iterable[Mapping[int, int]]) -> Holds:
    """Per partition, the lowest of the holds (a partition nothing holds is not a key)."""
    lowest: Holds = {}
    for hold in holds:
        for p, seq in hold.items():
            lowest[p] = min(lowest.get(p, seq), seq)
    return lowest


def topic_cut(files: Sequence[TopicFile], *, hold: int | None, published_before_ms: int) -> int | None:
    """Highest seq ``c`` such that the rows ``seq <= c`` may go, as whole files; None: nothing.

    Walks the files by first seq and stops at the first one that must stay: not routed, holding
    a seq at or above ``hold``, with a row published at or after ``published_before_ms``, or
    the newest file (the one holding the highest seq). Compaction may leave files whose seq
    ranges overlap, so the cut is only ever placed where no file reaches over it: every file
    holding a seq at or below the cut goes entirely. A file without statistics could hold any
    seq: there is no cut then.
    """
    if not files or any(f.first_seq is None or f.last_seq is None for f in files):
        return None
    ordered = sorted(files, key=lambda f: (f.first_seq, f.last_seq))
    top = max(int(f.last_seq) for f in ordered)  # type: ignore[arg-type]
    cut: int | None = None
    reach: int | None = None
    for index, f in enumerate(ordered):
        last = int(f.last_seq)  # type: ignore[arg-type]
        if last == top:
            break  # the newest file stays: the front end numbers new messages after it
        if not f.routed or f.newest_published_ms is None or f.newest_published_ms >= published_before_ms:
            break
        if hold is not None and last >= hold:
            break
        reach = last if reach is None else max(reach, last)
        following = ordered[index + 1].first_seq if index + 1 < len(ordered) else None
        if following is None or following > reach:
            cut = reach  # no file left reaches down to the cut
    return cut


# --------------------------------------------------------------------------- catalog revisions


@dataclasses.dataclass(frozen=True, slots=True)
class Revision:
    """One catalog row, as the trim sees it."""

    key: str
    revision: int
    deleted: bool
    plain: bool  # unshared and non-durable: a plain topic consumer's subscription
    updated_at: dt.datetime


def catalog_revisions_to_drop(
    rows: Iterable[Revision], *, keys_with_tables: Iterable[str], now: dt.datetime, retention: dt.timedelta
) -> list[int]:
    """Revisions (ascending) that may leave the catalog; see the module docstring."""
    by_key: dict[str, list[Revision]] = {}
    top = None
    for row in rows:
        by_key.setdefault(row.key, []).append(row)
        top = row.revision if top is None else max(top, row.revision)
    with_tables = set(keys_with_tables)
    cutoff = now - retention
    drop: list[int] = []
    for key, revisions in by_key.items():
        revisions.sort(key=lambda r: r.revision)
        for older, newer in zip(revisions, revisions[1:], strict=False):
            if newer.updated_at < cutoff:
                drop.append(older.revision)
        newest = revisions[-1]
        if newest.deleted and newest.plain and key not in with_tables and newest.updated_at < cutoff:
            drop.append(newest.revision)
    return sorted(r for r in drop if r != top)
