"""Topic tables: creating and listing them, their highest seq, their files' seq ranges."""

from __future__ import annotations

import dataclasses
import os

import pyarrow as pa
from deltalake import DeltaTable

from sharedsub.core import layout
from sharedsub.core.errors import TopicExists
from sharedsub.storage import schemas
from sharedsub.storage.delta import log_snapshot
from sharedsub.storage.delta.table_reads import read_files
from sharedsub.storage.delta.tables import DEFAULT_TABLE_CONFIG, delta_table, remove_table, table_exists
from sharedsub.storage.objects.locations import locate, storage_options
from sharedsub.storage.owner_only import ensure_data_dir


def create_topic(root: str, name: str, partition: int = 0) -> str:
    """Create the empty Delta table of topic ``name`` (its partition 0), or of its partition
    ``partition``, made by that partition's writer at its first publish; raise TopicExists if it
    is there."""
    path = layout.topic_partition_table(root, name, partition)
    if table_exists(path):
        raise TopicExists(name)
    local = layout.local_path(path)
    if local is not None:
        ensure_data_dir(root)  # 0700 when this creates it
        os.makedirs(local, exist_ok=True)
    try:
        DeltaTable.create(
            path, schemas.TOPIC, mode="error", name=name, configuration=DEFAULT_TABLE_CONFIG,
            storage_options=storage_options(path),
        )
    except Exception as exc:  # delta-rs reports an existing table with a generic error
        if table_exists(path):
            raise TopicExists(name) from exc
        raise
    return path


def list_topics(root: str) -> list[str]:
    """Names of every topic under ``root``, sorted (a topic with several partitions once)."""
    return sorted(list_topic_partitions(root))


def list_topic_partitions(root: str) -> dict[str, list[int]]:
    """``{topic: its partitions, ascending}`` of every topic table under ``root``
    (sharedsub.core.layout, "Partitions"). A partition k >= 1 whose partition 0 is gone (a
    dropped topic whose removal was cut short) is listed too: its rows are still there."""
    found: dict[str, list[int]] = {}
    for name in _table_dirs(layout.join(root, layout.TOPICS_DIR)):
        parsed = layout.parse_topic_dir(name)
        if parsed is not None:
            found.setdefault(parsed[0], []).append(parsed[1])
    return {topic: sorted(parts) for topic, parts in sorted(found.items())}


def topic_partitions(root: str, topic: str) -> list[int]:
    """The partitions of ``topic`` that have a table, ascending (empty: no such topic)."""
    base = layout.local_path(layout.join(root, layout.TOPICS_DIR))
    if base is None:
        return list_topic_partitions(root).get(topic, [])
    try:  # a local dir: one listing, and a check of this topic's names only
        names = [n for n in os.listdir(base) if n == topic or n.startswith(topic + "~p")]
    except FileNotFoundError:
        return []
    parsed = [layout.parse_topic_dir(n) for n in names if table_exists(os.path.join(base, n))]
    return sorted(p[1] for p in parsed if p is not None and p[0] == topic)


def partition_starts(root: str, topic: str, *, besides: int) -> dict[int, int]:
    """``{partition: its next seq}`` of every partition of ``topic`` but ``besides`` that has a
    table: where a subscription saved now starts in them (SubscriptionRecord.start_seqs). Reads
    their snapshots, never writes them (other front ends own them)."""
    return {
        p: last_seq(layout.topic_partition_table(root, topic, p), p) + 1
        for p in topic_partitions(root, topic)
        if p != besides
    }


def _table_dirs(topics: str) -> list[str]:
    """The names of the directories under ``topics`` that hold a Delta table."""
    base = layout.local_path(topics)
    if base is None:  # one LIST of every topic's log files (a directory listing does not exist there)
        store, key = locate(topics)
        names = set()
        for meta in store.list(f"{key}/"):
            name, _, rest = meta.key[len(key) + 1 :].partition("/")
            if rest.startswith("_delta_log/") and rest.endswith((".json", ".parquet")):
                names.add(name)
        return sorted(names)
    if not os.path.isdir(base):
        return []
    return sorted(n for n in os.listdir(base) if table_exists(os.path.join(base, n)))


def remove_topic(root: str, name: str) -> str:
    """Remove every partition of topic ``name`` with its files (nothing when there is none);
    return the path of its partition 0, removed last: while it is there the topic exists, and a
    removal cut short is finished by the next one."""
    for partition in sorted(topic_partitions(root, name), reverse=True):
        remove_table(layout.topic_partition_table(root, name, partition))
    return layout.topic_table(root, name)


def topic_exists(root: str, name: str) -> bool:
    """True when topic ``name`` exists under ``root``."""
    return layout.is_valid_topic_name(name) and table_exists(layout.topic_table(root, name))


def last_seq(path: str, partition: int = 0) -> int:
    """Highest ``seq`` stored in a topic table of partition ``partition``, or the seq before its
    first (-1 for partition 0) when it holds no rows: the next seq is this + 1."""
    floor = layout.partition_seq_base(partition) - 1
    table = delta_table(path)
    actions = pa.table(table.get_add_actions(flatten=True))
    if actions.num_rows == 0:
        return floor
    stats = [int(v) for v in actions.column("max.seq").to_pylist() if v is not None]
    if stats:
        return max(floor, *stats)
    # No stats: fall back to reading the seq column.
    data = read_files(table.file_uris(), ["seq"])
    if data is not None and data.num_rows:
        return max(floor, int(pa.compute.max(data.column("seq")).as_py()))
    return floor


@dataclasses.dataclass(frozen=True, slots=True)
class SeqFile:
    """One data file of a topic table's snapshot, from its add action's statistics."""

    path: str  # absolute
    first_seq: int | None  # None when the file has no statistics
    last_seq: int | None
    newest_published_ms: int | None  # max ``published_at``, ms since the epoch


def topic_files(table: str) -> tuple[int, list[SeqFile]]:
    """``(version, files)`` of ``table``'s latest snapshot, with their seq and publish-time ranges.

    Files in delta-rs's order (sharedsub.storage.delta.log_snapshot). A local table's snapshot is read
    from its log through the process's snapshot cache (no table load); other storage, and what
    that reader does not handle, through delta-rs.
    """
    local = layout.local_path(table) is not None
    snapshot = log_snapshot.latest_snapshot(table) if local else log_snapshot.delta_rs_snapshot(table)
    return snapshot.version, [SeqFile(f.path, f.first_seq, f.last_seq, f.newest_published_ms) for f in snapshot.files]
