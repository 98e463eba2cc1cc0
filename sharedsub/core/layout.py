"""Where every table lives under a data dir; the only module that spells paths.

Layout (all Delta tables unless noted)::

    <data>/topics/<topic>                    a topic's partition 0 (the one table of a single front end):
                                             the published messages
    <data>/topics/<topic>~p<k>               partition k of the topic, written only by the front end
                                             holding member slot k (k >= 1; see "Partitions" below)
    <data>/catalog/subscriptions             the subscription catalog (append-only revisions)
    <data>/catalog/links                     consumer link attach/detach events
    <data>/subscriptions/<key>/g<gen>        one table per subscription generation (references)
    <data>/subscriptions/<key>/acks-g<gen>   acknowledgement log of that generation
    <data>/subscriptions/<key>/dlq-g<gen>    dead-letter table of that generation
    <data>/_checkpoints/fanout               Spark checkpoint of the fan-out query (not Delta)
    <data>/_checkpoints/fanout-stats.json    the fan-out job's batch statistics (JSON, replaced per batch)
    <data>/_fanout/progress.json             the fan-out's progress, for retention, on object storage only
                                             (JSON; sharedsub.core.ops.fanout_progress)
    <data>/_fanout/pending/<sub table>/      rows the fan-out could not commit to that subscription
                                             table yet, kept until it can (Parquet; storage/parked_rows.py)
    <data>/_cluster/members/<k>              the lease of member slot k: the front end writing topic
                                             partition k (object storage only; JSON;
                                             sharedsub.core.ownership.members)
    <data>/_cluster/fanout                   the lease of the fan-out job (object storage only; JSON)
    <data>/_cluster/dispatch/<key>/g<gen>/p<k>
                                             who dispatches topic partition k of a subscription
                                             generation (several members; JSON;
                                             sharedsub.core.ownership.partition_owners)
    <data>/_cluster/consumers/<key>/g<gen>/<slot>
                                             member <slot> has consumers of that generation
                                             (several members; JSON)
    <data>/_cluster/containers/<hex of a name>
    <data>/_cluster/subscriptions/<hex of a name>
                                             the member holding a JMS ClientID, an unshared durable
                                             subscription's one consumer (several members; JSON;
                                             sharedsub.runtime.cluster.member_claims)
    <data>/_cluster/probe/<uuid>             the start-up check of a store (sharedsub.storage.objects.probe)
    <data>/_cluster/write-probe              the committer's check that a store takes writes again
    <data>/_service.json                     the running service: pid, AMQP (amqps) and HTTP addresses (JSON)
    <data>/_users.json                       users and their SCRAM keys, mode 0600 (JSON; sharedsub.runtime.users),
                                             unless [security] users_file names another path

Partitions: a topic is one Delta table per writer (one writer per table, never two: shared
writers lower a table's commit rate, docs/design.md §8). The front end in member slot ``k``
writes partition ``k`` of every topic it takes publishes for; a single front end is slot 0, whose
table is today's ``topics/<topic>``. A partition's table is a sibling, never nested in another
table's directory (VACUUM of the parent would delete it), and ``~`` cannot appear in a topic name,
so a directory name parses back to (topic, partition) without ambiguity. Seqs are per partition
and keep one int64 space per topic: partition ``k`` numbers its messages from ``k << 40``
(:func:`partition_seq_base`), so every seq-keyed structure (acks, dispatch, payload index,
app transactions per partition) stays unique per topic and :func:`partition_of_seq` finds a row's
partition from its seq alone. 2**40 messages per partition, 2**23 partitions.

Every ``_cluster/`` key is spelled here and nowhere else in the shipped code
(tests/unit/test_cluster_keys.py).

Pure: no I/O besides string handling.
"""

from __future__ import annotations

import hashlib
import re

TOPICS_DIR = "topics"
SUBSCRIPTIONS_DIR = "subscriptions"
CATALOG_TABLE = "catalog/subscriptions"
LINKS_TABLE = "catalog/links"
FANOUT_CHECKPOINT = "_checkpoints/fanout"
FANOUT_STATS = "_checkpoints/fanout-stats.json"
FANOUT_PENDING = "_fanout/pending"
FANOUT_PROGRESS = "_fanout/progress.json"
# The topic writers' change notes on object storage (sharedsub.core.fanout.change_notes).
CHANGES_DIR = "_changes"
SERVICE_FILE = "_service.json"
USERS_FILE = "_users.json"
# The objects members of a data dir on object storage share (leases, claims, presence, owners);
# the first segment of every key below that starts with it.
CLUSTER_DIR = "_cluster"
# The lease objects of the member slots of a data dir on object storage, one per front end
# (sharedsub.core.ownership.members; slot k writes topic partition k).
MEMBERS_DIR = "_cluster/members"
# The lease of the fan-out job that writes a data dir's subscription tables on object storage.
FANOUT_LEASE = "_cluster/fanout"
# What the committer puts and deletes to learn whether a store takes writes again during an outage.
WRITE_PROBE = "_cluster/write-probe"
# Where the start-up check of a store writes its objects, one ``<uuid>`` each
# (sharedsub.storage.objects.probe).
STORE_PROBE_PREFIX = "_cluster/probe/"

# Topic names double as directory names and as the first segment of an AMQP address, so
# they may not contain '/' and are kept to a portable character set.
_TOPIC_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def is_valid_topic_name(name: str) -> bool:
    """Return True when ``name`` can be a topic: ``[A-Za-z0-9][A-Za-z0-9._-]*``, at most 200 chars."""
    return bool(_TOPIC_NAME.match(name))


def topic_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a topic, as ``topics create`` and its admin call say it; None when
    it can (:func:`is_valid_topic_name`)."""
    return None if is_valid_topic_name(name) else f"invalid topic name {name!r}: use [A-Za-z0-9][A-Za-z0-9._-]*"


def join(root: str, *parts: str) -> str:
    """Join a data-dir root (local path or URI) with relative parts using '/'."""
    return "/".join([root.rstrip("/"), *parts])


def local_path(location: str) -> str | None:
    """The file-system path of a table or directory location: ``file://`` stripped, a plain
    path as it is; None for any other URI (``s3://``, ``abfss://``, ...), which only delta-rs
    and Spark can reach."""
    if location.startswith("file://"):
        return location[len("file://") :]
    return None if "://" in location else location


def topic_table(root: str, topic: str) -> str:
    """Location of partition 0 of topic ``topic`` (the only table of a single front end)."""
    return join(root, TOPICS_DIR, topic)


PARTITION_BITS = 40
_PARTITION_SUFFIX = "~p"
_PARTITION_DIR = re.compile(r"^(.+)~p([1-9][0-9]{0,6})$")


def partition_seq_base(partition: int) -> int:
    """The first seq of ``partition`` (module docstring: partition in the high bits)."""
    return partition << PARTITION_BITS


def partition_of_seq(seq: int) -> int:
    """The partition a topic seq was numbered in."""
    return seq >> PARTITION_BITS


def topic_partition_dir(topic: str, partition: int) -> str:
    """The directory name under ``topics/`` of a topic's partition: the topic's name for 0,
    ``<topic>~p<k>`` for k >= 1."""
    return topic if partition == 0 else f"{topic}{_PARTITION_SUFFIX}{partition}"


def topic_partition_table(root: str, topic: str, partition: int) -> str:
    """Location of partition ``partition`` of topic ``topic``."""
    return join(root, TOPICS_DIR, topic_partition_dir(topic, partition))


def parse_topic_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a directory name under ``topics/``; None for a name that is
    neither a topic nor a topic's partition."""
    match = _PARTITION_DIR.match(name)
    topic, partition = (match.group(1), int(match.group(2))) if match else (name, 0)
    return (topic, partition) if is_valid_topic_name(topic) else None


def catalog_table(root: str) -> str:
    """Location of the subscription catalog table."""
    return join(root, CATALOG_TABLE)


DISPATCH_DIR = "_cluster/dispatch"


def dispatch_owners_dir(key: str, generation: int) -> str:
    """Where the dispatch owners of a subscription generation's partitions are, relative to the data dir."""
    return f"{DISPATCH_DIR}/{key}/g{generation}"


def dispatch_owner(key: str, generation: int, partition: int) -> str:
    """The dispatch owner record of one partition of a subscription generation."""
    return f"{dispatch_owners_dir(key, generation)}/p{partition}"


def consumer_presence_dir(key: str, generation: int) -> str:
    """Where the members with consumers of a subscription generation say so, relative to the data dir."""
    return f"_cluster/consumers/{key}/g{generation}"


def consumer_presence(key: str, generation: int, slot: int) -> str:
    """Member ``slot``'s presence object for a subscription generation."""
    return f"{consumer_presence_dir(key, generation)}/{slot}"


def claim_key(kind: str, name: str) -> str:
    """The claim object of ``name`` among ``kind``'s (``containers``: a JMS ClientID;
    ``subscriptions``: an unshared durable subscription's key), relative to the data dir; the
    name in hex, so any name is a safe key (sharedsub.runtime.cluster.member_claims)."""
    return f"{CLUSTER_DIR}/{kind}/{name.encode().hex()}"


def member_lease(slot: int) -> str:
    """The lease object of member slot ``slot``, relative to the data dir."""
    return f"{MEMBERS_DIR}/{slot}"


def fanout_checkpoint(root: str) -> str:
    """Location of the fan-out query's Spark checkpoint."""
    return join(root, FANOUT_CHECKPOINT)


def fanout_checkpoint_dir(root: str, configured: str, state_home: str) -> str:
    """The fan-out's Spark checkpoint: ``configured`` when set; else :func:`fanout_checkpoint`
    for a local data dir, and ``<host_state_dir>/checkpoints/fanout`` for one on object storage
    (Spark's checkpoint needs atomic renames, which S3 has not)."""
    if configured:
        return configured
    if local_path(root) is not None:
        return fanout_checkpoint(root)
    return host_state_dir(root, state_home) + "/checkpoints/fanout"


def host_state_dir(root: str, state_home: str) -> str:
    """This host's directory for what a data dir on object storage keeps locally (the fan-out's
    Spark checkpoint, the ``_service.json`` of the front end running here):
    ``<state_home>/sharedsub/stores/<scheme>/<bucket>/<prefix>``."""
    scheme, _, rest = root.partition("://")
    safe = "/".join(_UNSAFE.sub("_", part) for part in rest.strip("/").split("/") if part not in ("", ".", ".."))
    return f"{state_home.rstrip('/')}/sharedsub/stores/{scheme}/{safe}"


def fanout_stats_file(root: str) -> str:
    """Location of the fan-out job's batch statistics (sharedsub.storage.fanout_stats)."""
    return join(root, FANOUT_STATS)


def fanout_progress(root: str) -> str:
    """Location of the fan-out's progress record (sharedsub.core.ops.fanout_progress)."""
    return join(root, FANOUT_PROGRESS)


def changes_dir(root: str) -> str:
    """Location of the directory of the change notes (sharedsub.core.fanout.change_notes)."""
    return join(root, CHANGES_DIR)


def fanout_pending(root: str) -> str:
    """Directory of the rows parked for subscription tables whose commits failed (sharedsub.storage.parked_rows)."""
    return join(root, FANOUT_PENDING)


def service_file(root: str) -> str:
    """Location of the running service's discovery file (sharedsub.runtime.discovery)."""
    return join(root, SERVICE_FILE)


def subscription_key(namespace: str, name: str, *, shared: bool, durable: bool) -> str:
    """Stable, readable, filesystem-safe key for a subscription identity.

    The identity is ``(namespace, name, shared, durable)`` (docs/design.md §4.2). The key keeps a
    readable prefix for people browsing the data dir and a hash so distinct identities never
    collide after sanitising.
    """
    kind = ("shared-" if shared else "") + ("durable" if durable else "volatile")
    digest = hashlib.sha256(f"{namespace}\x00{name}\x00{shared}\x00{durable}".encode()).hexdigest()[:10]
    ns = _UNSAFE.sub("_", namespace)[:32] or "_"
    nm = _UNSAFE.sub("_", name)[:48] or "_"
    return f"{kind}~{ns}~{nm}~{digest}"


def generation_table_rel(key: str, generation: int) -> str:
    """Relative location (under the data dir) of one generation of a subscription."""
    return f"{SUBSCRIPTIONS_DIR}/{key}/g{generation}"


def ack_table_rel(key: str, generation: int) -> str:
    """Relative location of the acknowledgement log of one subscription generation."""
    return f"{SUBSCRIPTIONS_DIR}/{key}/acks-g{generation}"


def dead_letter_table_rel(key: str, generation: int) -> str:
    """Relative location of the dead-letter table of one subscription generation."""
    return f"{SUBSCRIPTIONS_DIR}/{key}/dlq-g{generation}"
