"""Payload lookup: which files of a topic table hold given seqs, and reading their messages."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sharedsub.core import layout
from sharedsub.storage.topics import topic_files


class TopicIndex:
    """Finds the files that may hold a seq of a topic, in whichever of its partitions' tables it
    was numbered (sharedsub.core.layout, "Partitions"): one :class:`TableIndex` per partition,
    made when a seq of that partition is first asked for."""

    def __init__(self, root: str, topic: str) -> None:
        self.root, self.topic = root, topic
        self._tables: dict[int, TableIndex] = {}

    def _table(self, partition: int) -> TableIndex:
        index = self._tables.get(partition)
        if index is None:
            index = self._tables[partition] = TableIndex(layout.topic_partition_table(self.root, self.topic, partition))
        return index

    def refresh(self) -> None:
        """Reload the file ranges of partition 0 and of every partition asked for so far."""
        self._table(0)
        for index in self._tables.values():
            index.refresh()

    def files_for(self, seqs: Iterable[int]) -> dict[str, list[int]]:
        """Map each candidate file to the wanted seqs it may hold; reloads a partition's ranges
        once if a seq is unknown there."""
        by_partition: dict[int, list[int]] = {}
        for seq in seqs:
            by_partition.setdefault(layout.partition_of_seq(seq), []).append(seq)
        out: dict[str, list[int]] = {}
        for partition, wanted in sorted(by_partition.items()):
            out.update(self._table(partition).files_for(wanted))
        return out


class TableIndex:
    """Finds the files of one topic table that may hold a seq, from the add actions' ``seq`` statistics.

    Appends give files with disjoint seq ranges, but compaction (sharedsub.runtime.maintenance) may bin
    files that were not neighbours, so ranges can overlap: a seq then has several candidate
    files, and the reader keeps the one that holds it.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._ranges: list[tuple[int, int, str]] = []
        self._starts: list[int] = []  # first seq of each range, for bisect
        self._reach: list[int] = []  # highest last seq of the ranges up to each one

    def refresh(self) -> None:
        """Reload the file ranges from the latest snapshot."""
        _, files = topic_files(self.path)
        ranges = sorted(
            (int(f.first_seq), int(f.last_seq), f.path) for f in files if f.first_seq is not None and f.last_seq is not None
        )
        reach, highest = [], -1
        for _, hi, _ in ranges:
            highest = max(highest, hi)
            reach.append(highest)
        self._ranges = ranges
        self._starts = [r[0] for r in ranges]
        self._reach = reach

    def files_for(self, seqs: Iterable[int]) -> dict[str, list[int]]:
        """Map each candidate file to the wanted seqs it may hold; reloads once if a seq is unknown."""
        wanted = sorted(set(seqs))
        out, missing = self._assign(wanted)
        if missing:
            self.refresh()
            out, missing = self._assign(wanted)
        return out

    def _assign(self, wanted: list[int]) -> tuple[dict[str, list[int]], list[int]]:
        out: dict[str, list[int]] = {}
        missing = []
        for s in wanted:
            i = bisect.bisect_right(self._starts, s) - 1
            hit = False
            # Ranges starting at or below s, newest start first, while one of them may reach s.
            while i >= 0 and self._reach[i] >= s:
                lo, hi, path = self._ranges[i]
                if lo <= s <= hi:
                    out.setdefault(path, []).append(s)
                    hit = True
                i -= 1
            if not hit:
                missing.append(s)
        return out, missing


def _leaf_column(metadata: pq.FileMetaData, name: str) -> int | None:
    """Index of the Parquet leaf column ``name`` (leaf indices differ from the Arrow schema's
    once a nested column, such as ``application_properties``, comes before it)."""
    if metadata.num_row_groups == 0:
        return None
    group = metadata.row_group(0)
    for i in range(group.num_columns):
        if group.column(i).path_in_schema == name:
            return i
    return None


def _read_seqs(path: str, wanted: list[int], also: Sequence[int] = ()) -> pa.Table:
    """``seq`` and ``message`` of the rows of one topic file whose seq is in ``wanted`` (ascending)
    or in ``also``.

    Reads only the row groups whose ``seq`` statistics overlap ``wanted`` (compacted files hold
    many small row groups), without the dataset layer (a filtered ``pq.read_table`` builds a
    dataset per call: most of the cost of resolving a few hundred payloads, profiled). Rows of
    ``also`` come only from those row groups: they cost no further read (none on object storage,
    where the filtered read fetches the wanted rows alone)."""
    if "://" in path:
        return pq.read_table(path, columns=["seq", "message"], filters=[("seq", "in", wanted)])
    pf = pq.ParquetFile(path)
    meta = pf.metadata
    leaf = _leaf_column(meta, "seq")
    lo, hi = wanted[0], wanted[-1]
    groups = []
    for i in range(meta.num_row_groups):
        stats = meta.row_group(i).column(leaf).statistics if leaf is not None else None
        if stats is None or not stats.has_min_max or (stats.max >= lo and stats.min <= hi):
            groups.append(i)
    data = pf.read_row_groups(groups, columns=["seq", "message"])
    keep = pa.array([*wanted, *also], pa.int64()) if also else pa.array(wanted, pa.int64())
    return data.filter(pc.is_in(data.column("seq"), value_set=keep))


def read_messages(index: TopicIndex | TableIndex, seqs: Iterable[int], also: Sequence[int] = ()) -> dict[int, bytes]:
    """Encoded messages for the given seqs of one topic (a seq the topic no longer holds is left out),
    and those of ``also`` found in the row groups read for them (a reader reading ahead: the rows
    it will ask for next often share a file with these; reading them now saves reading it again).

    The index may name a file that compaction or topic retention removed from the table and
    vacuum then deleted (sharedsub.runtime.maintenance): the seqs it was asked for are looked up again
    in a refreshed index, once. Only the row groups whose ``seq`` statistics cover a wanted seq
    are read (compacted topic files hold many small row groups for this).
    """
    found: dict[int, bytes] = {}
    wanted = sorted(set(seqs))
    for attempt in range(2):
        vanished: list[int] = []
        for path, part in index.files_for(wanted).items():
            try:
                data = _read_seqs(path, part, also)
            except FileNotFoundError:
                vanished.extend(part)
                continue
            found.update(zip(data.column("seq").to_pylist(), data.column("message").to_pylist(), strict=True))
        if not vanished or attempt:
            break
        index.refresh()
        wanted = vanished
    return found
