"""Settings: the packaged defaults, then a ``--config`` file, SHAREDSUB_* environment overrides, flags.

The defaults have one source: ``defaults.toml`` beside this module (shipped with the package,
every key documented there). The dataclasses below declare the keys and their types only; a key
the file lacks is an error of the package, caught by tests/unit/test_config.py.

``parse_settings`` is pure; ``load_settings`` reads files and is called only by entry points.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import os
import tomllib
from collections.abc import Mapping
from typing import Any

from sharedsub.core import layout
from sharedsub.core.errors import ConfigError
from sharedsub.core.fanout.routing_place import ROUTING_MODES
from sharedsub.core.ops.console_access import parse_access
from sharedsub.core.publish.commit_pace import Company, slot_period

DEFAULTS_RESOURCE = "defaults.toml"
"""The packaged defaults file, a resource of this package (``sharedsub/core/defaults.toml``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ServerSettings:
    """[server]: the AMQP listener."""

    host: str
    port: int
    auto_create_topics: bool
    shared_consumer_limit: int  # 0 = unlimited
    max_message_size: int  # bytes of one published message; 0 = unlimited
    max_transaction_messages: int  # messages one transaction may publish; 0 = unlimited
    max_transaction_bytes: int  # bytes one transaction may publish; 0 = unlimited
    idle_timeout: float  # seconds without a frame before a connection is dropped; 0 = never
    max_connections: int  # 0 = unlimited
    max_sessions_per_connection: int  # 0 = unlimited
    max_links_per_connection: int  # 0 = unlimited
    # HTTP endpoint (metrics, health, admin calls): connectors/http.
    # Loopback unless set: the endpoint's GETs need no token ("" = 127.0.0.1 too).
    http_host: str
    http_port: int  # 0 = a free port (recorded in <data>/_service.json); -1 = off
    http_request_timeout: float  # seconds one HTTP request may take (slow clients are cut off)
    http_max_connections: int  # HTTP connections served at once; more are answered 503
    metrics_backlog_interval: float  # seconds a computed backlog serves scrapes
    console: str  # read-only | token | off (sharedsub.core.ops.console_access)
    console_refresh: float  # seconds between the console's updates and chart samples
    console_window: float  # seconds of chart samples kept
    gc_tuning: bool  # collector thresholds raised and start-up frozen (sharedsub.core.ops.gc_tuning)


@dataclasses.dataclass(frozen=True, slots=True)
class StorageSettings:
    """[storage]: where the tables live."""

    data_dir: str
    fsync: bool  # force each topic, catalog and ack-log commit to disk before settling
    # Seconds a write the data dir cannot take (no space, quota, read-only) is held and retried
    # before publishes waiting on it are refused (sharedsub.core.publish.write_faults); 0 = refuse at once.
    full_disk_timeout: float
    append_process: bool  # commit the front end's appends in a child process (sharedsub.storage.commits.append_process)
    # Settings of object storage for a data dir s3://... (endpoint, credentials, ...), as delta-rs
    # takes storage options; the AWS variables are read as well. Never logged or shown.
    options: dict[str, str] = dataclasses.field(repr=False)
    # Seconds between probes for new commits on a data dir on object storage (the tailer's polls,
    # the fan-out's shortest trigger): each probe is a request there (sharedsub.core.config.tail_poll_interval).
    object_poll_interval: float
    # The longest of those intervals while nothing new comes (sharedsub.core.ops.poll_backoff).
    object_idle_poll_interval: float
    # The least seconds between group commits on object storage (group_commit_interval).
    object_commit_interval: float
    # The least seconds between two commits of one acknowledgement log on object storage (ack_commit_interval).
    object_ack_interval: float


@dataclasses.dataclass(frozen=True, slots=True)
class PublishSettings:
    """[publish]: publisher credit and group commit."""

    credit: int
    max_batch_messages: int
    max_batch_bytes: int
    max_uncommitted_bytes: int  # over all publishers; 0 = unlimited
    min_commit_interval: float  # seconds from one group commit's start to the next one's; 0 = back to back
    sync_send_gap: float  # seconds: a publisher sending again this soon after its last settlement is not held (commit_pace)
    commit_lead: float  # seconds a group commit starts before the fan-out's trigger (commit_pace.next_slot); 0 = off


@dataclasses.dataclass(frozen=True, slots=True)
class DeliverySettings:
    """[delivery]: tailing subscription tables."""

    poll_interval: float
    payload_cache_bytes: int
    max_delivery_count: int  # failed deliveries before the dead-letter table; 0 = unlimited


@dataclasses.dataclass(frozen=True, slots=True)
class FanoutSettings:
    """[fanout]: the Spark job."""

    spark_master: str
    # Spark settings of the embedded job's session ("spark.*" keys, string values), given as
    # spark-submit's --conf would give them (jobs/session.py); never logged (they may hold secrets).
    spark_conf: dict[str, str] = dataclasses.field(repr=False)
    trigger_interval: float
    max_commits_per_batch: int
    startup_timeout: float
    # Seconds between commit attempts on a subscription table whose commit failed (its rows are
    # parked meanwhile; jobs/fanout.py, sharedsub.core.fanout.fanout_faults).
    table_retry_interval: float
    # /health lists a topic as stalled once a commit of it has waited this long to be routed.
    stalled_after: float
    # A topic without subscriptions starts a micro-batch at most this often (seconds; 0 = with
    # every commit): sharedsub.core.fanout.fanout_pacing.
    unsubscribed_topic_interval: float
    # Under light traffic a micro-batch waits for company: at most this many seconds (0 = never),
    # unless batch_min_rows rows wait (sharedsub.core.fanout.batch_admission; local data dirs).
    batch_max_wait: float
    batch_min_rows: int
    # On a local data dir a micro-batch starts at a front end's commit (its signal ends the
    # source's wait), at most once per trigger_interval, not on the trigger's fixed grid
    # (sharedsub.core.fanout.batch_hold); false: Spark's processing-time trigger.
    start_on_commit: bool
    # On the trigger grid on a local data dir, once nothing came for a second, the source holds
    # an ask that found nothing up to this many seconds, until a front end's commit signal (0 =
    # never): sharedsub.core.fanout.idle_hold.
    idle_hold: float
    # Where the job reads topics: "deltars" (delta-rs through a Python data source) or "delta"
    # (Delta Lake's streaming source; needs the connector's jars: jobs/sources/delta_streaming.py).
    source: str
    # With "deltars": read each micro-batch on the driver (jobs/sources/deltars_topics.py DriverBatchReader).
    driver_reads: bool
    # Where micro-batches are routed: "driver", "executors" or "auto" (sharedsub.core.fanout.routing_place).
    routing: str
    # With "auto" on a cluster: a batch of at least this much work (source rows × routes of their
    # topics) is routed on the executors (sharedsub.core.fanout.routing_place).
    executor_min_work: int
    # Batches routed on the executors that wrote at least this many healthy subscription tables
    # commit them in Spark tasks, one per table (0 = always on the driver; routing_place).
    task_commit_min_tables: int
    # The Spark checkpoint's directory; "" = <data_dir>/_checkpoints/fanout for a local data dir,
    # a directory of the driver host for one on object storage (sharedsub.core.layout.fanout_checkpoint_dir).
    checkpoint_dir: str


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterSettings:
    """[cluster]: several front ends on one data dir on object storage (docs/design.md §8)."""

    max_members: int  # member slots of the data dir: front ends that may serve it at once
    interval: float  # seconds between a member's readings of who has consumers and who dispatches
    drain_timeout: float  # seconds a member waits for a released partition's deliveries to settle


@dataclasses.dataclass(frozen=True, slots=True)
class MaintenanceSettings:
    """[maintenance]: compaction, vacuum and history retention (sharedsub.runtime.maintenance)."""

    interval: float  # seconds between runs; 0 = maintenance off
    history_retention_hours: int  # time travel and replay reach this far back
    compact_min_files: int  # compact a table once it has this many data files
    min_acked_rows: int  # delete acknowledged rows once at least this many can go
    # A topic row is kept at least this long after it was published (hours); -1 = the history
    # retention. Routing, open subscriptions and replays hold rows longer (sharedsub.core.ops.retention).
    topic_retention_hours: int

    @property
    def topic_retention(self) -> int:
        """Hours a topic row is kept at least: ``topic_retention_hours``, or the history
        retention when that is -1."""
        return self.history_retention_hours if self.topic_retention_hours < 0 else self.topic_retention_hours


@dataclasses.dataclass(frozen=True, slots=True)
class LogSettings:
    """[log]: what serve, frontend and the fan-out job write to stderr (sharedsub.runtime.process.logformat)."""

    format: str  # text | json (one JSON object per line)
    level: str  # DEBUG | INFO | WARNING | ERROR


@dataclasses.dataclass(frozen=True, slots=True)
class SecuritySettings:
    """[security]: SASL and TLS of the AMQP listeners (connectors/amqp/secure_listener.py)."""

    # Offered to clients with a user name and password (checked against the users file).
    mechanisms: str
    # "auto": allowed while the users file holds no user (the behaviour before users existed);
    # "true": always allowed; "false": never. Anonymous = SASL ANONYMOUS or no SASL layer at all.
    anonymous: str
    users_file: str  # "" = <data_dir>/_users.json
    # TOML grants of publish/consume/manage on topic patterns (sharedsub.core.security.permissions); "" = none:
    # every connection may publish and consume everywhere, nobody manages over AMQP.
    permissions_file: str
    tls_port: int  # amqps listener on [server] host: -1 = off, 0 = a free port
    tls_cert: str  # PEM certificate chain of the amqps listener
    tls_key: str  # PEM private key ("" = in tls_cert)
    tls_ca: str  # PEM CA certificates that client certificates are checked against ("" = none asked)
    require_client_cert: bool  # refuse TLS clients without a certificate the CA verified
    external: bool  # offer SASL EXTERNAL: the client certificate's subject CN is the user
    auth_timeout: float  # seconds a connection may take for TLS and SASL before it is closed
    max_authenticating: int  # connections in TLS or SASL at once; more are closed at accept

    @property
    def anonymous_mode(self) -> str:
        """``anonymous`` in lower case: auto, true or false."""
        return self.anonymous.lower()

    @property
    def mechanism_list(self) -> tuple[str, ...]:
        """``mechanisms`` split on spaces and commas."""
        return tuple(m for m in self.mechanisms.replace(",", " ").split() if m)


SASL_PASSWORD_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
# Member slots of one data dir at most: each writes a partition of every topic, a table each.
MAX_MEMBERS = 64
ANONYMOUS_MODES = ("auto", "true", "false")

LOG_FORMATS = ("text", "json")
FANOUT_SOURCES = ("deltars", "delta")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# [fanout] spark_conf keys the service sets itself and a user must not override: why, each.
SPARK_CONF_REFUSED = {
    "spark.master": "the master is [fanout] spark_master",
    "spark.sql.extensions": "the service sets it to the Delta connector's extension when its jars are there",
    "spark.sql.catalog.spark_catalog": "the service sets it to the Delta connector's catalog when its jars are there",
}


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """All settings; frozen, passed down from the entry point."""

    server: ServerSettings
    storage: StorageSettings
    publish: PublishSettings
    delivery: DeliverySettings
    fanout: FanoutSettings
    maintenance: MaintenanceSettings
    log: LogSettings
    security: SecuritySettings
    cluster: ClusterSettings

    @property
    def data_dir(self) -> str:
        """Absolute data dir (URIs are kept as they are)."""
        d = self.storage.data_dir
        return d if "://" in d else os.path.abspath(d)


_SECTIONS: dict[str, type] = {
    "server": ServerSettings,
    "storage": StorageSettings,
    "publish": PublishSettings,
    "delivery": DeliverySettings,
    "fanout": FanoutSettings,
    "maintenance": MaintenanceSettings,
    "log": LogSettings,
    "security": SecuritySettings,
    "cluster": ClusterSettings,
}


# ``value`` is what tomllib (its documents are dict[str, Any]), the environment or a flag gave; int() and
# float() are the check (their TypeError or ValueError is the ConfigError), so no narrower type fits.
# Any: tomllib's untyped values, tried with int() / float()
def _coerce(key: str, value: Any, kind: type | str) -> bool | int | float | str | dict[str, str]:
    kind_name = kind if isinstance(kind, str) else kind.__name__
    if kind_name == "dict[str, str]":
        return _string_table(key, value)
    try:
        if kind_name == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if kind_name == "int":
            if isinstance(value, bool):
                raise ValueError(value)
            return int(value)
        if kind_name == "float":
            return float(value)
        if isinstance(value, bool):  # e.g. anonymous = true in TOML
            return "true" if value else "false"
        if isinstance(value, list):  # e.g. mechanisms = ["PLAIN", "SCRAM-SHA-256"]
            return " ".join(str(v) for v in value)
        return str(value)
    except (TypeError, ValueError):
        msg = f"expected {kind_name}, got {value!r}"
        raise ConfigError(key, msg) from None


def on_object_store(settings: Settings) -> bool:
    """True when the data dir is on object storage (a URI other than ``file://``)."""
    return layout.local_path(settings.storage.data_dir) is None


def several_members(settings: Settings) -> bool:
    """Several front ends may share the data dir: it is on object storage and ``[cluster]
    max_members`` allows more than one (docs/design.md §8)."""
    return on_object_store(settings) and settings.cluster.max_members > 1


def tail_poll_interval(settings: Settings) -> float:
    """The tailer's poll interval: ``[delivery] poll_interval``, at least ``[storage]
    object_poll_interval`` on object storage (a poll there is a request, not a ``stat``)."""
    poll = settings.delivery.poll_interval
    return max(poll, settings.storage.object_poll_interval) if on_object_store(settings) else poll


def group_commit_interval(settings: Settings) -> float:
    """Seconds from one group commit's start to the next one's: ``[publish] min_commit_interval``,
    at least ``[storage] object_commit_interval`` on object storage (a commit there is two
    billed requests of 10-30 ms each)."""
    interval = settings.publish.min_commit_interval
    return max(interval, settings.storage.object_commit_interval) if on_object_store(settings) else interval


def ack_commit_interval(settings: Settings) -> float:
    """The least seconds between two commits of one acknowledgement log: ``[storage]
    object_ack_interval`` on object storage (each commit is two billed requests there), 0
    locally (acknowledgement logs are paced by the group commit alone)."""
    return settings.storage.object_ack_interval if on_object_store(settings) else 0.0


def tail_idle_poll_interval(settings: Settings) -> float:
    """The longest the tailer waits between polls while nothing comes: ``[storage]
    object_idle_poll_interval`` on object storage (sharedsub.core.ops.poll_backoff), the poll
    interval itself locally (no back-off)."""
    base = tail_poll_interval(settings)
    return max(base, settings.storage.object_idle_poll_interval) if on_object_store(settings) else base


def fanout_idle_probe_interval(settings: Settings) -> float:
    """The longest the fan-out's source waits between probes of the topics while nothing comes:
    ``[storage] object_idle_poll_interval`` on object storage, 0 (every trigger probes) locally."""
    if not on_object_store(settings):
        return 0.0
    return max(fanout_trigger_interval(settings), settings.storage.object_idle_poll_interval)


def commit_slots(settings: Settings) -> tuple[float, float] | None:
    """``(period, lead)`` of the group commits' slots (sharedsub.core.publish.commit_pace.next_slot)
    when ``[publish] commit_lead`` is set and the embedded fan-out runs on Spark's trigger grid: a
    local data dir, ``[fanout] start_on_commit`` off, both intervals above 0. None otherwise."""
    lead, interval = settings.publish.commit_lead, group_commit_interval(settings)
    trigger = fanout_trigger_interval(settings)
    if lead <= 0 or interval <= 0 or trigger <= 0 or on_object_store(settings) or fanout_starts_on_commit(settings):
        return None
    return slot_period(interval, trigger), lead


def group_company(settings: Settings) -> Company | None:
    """The company a group commit waits for under light traffic (sharedsub.core.publish.commit_pace.Company):
    ``[fanout] batch_min_rows`` and ``batch_max_wait`` when the fan-out starts a micro-batch at
    each commit (:func:`fanout_starts_on_commit`), where a group is a batch; None otherwise (on
    the trigger grid the fan-out's source waits for company: :func:`fanout_batch_max_wait`), or
    with ``batch_max_wait`` 0."""
    if not fanout_starts_on_commit(settings) or settings.fanout.batch_max_wait <= 0:
        return None
    return Company(publishes=settings.fanout.batch_min_rows, wait=settings.fanout.batch_max_wait)


def fanout_batch_max_wait(settings: Settings) -> float:
    """Seconds the fan-out's source holds commits for company (sharedsub.core.fanout.batch_admission):
    ``[fanout] batch_max_wait`` on the trigger grid; 0 when batches start at commits, whose
    groups waited for it already (:func:`group_company`)."""
    return 0.0 if fanout_starts_on_commit(settings) else settings.fanout.batch_max_wait


def fanout_starts_on_commit(settings: Settings) -> bool:
    """Whether the fan-out's batches start at the front ends' commit signals
    (``[fanout] start_on_commit``; a local data dir only: on object storage the writers' change
    notes and ``object_poll_interval`` pace it)."""
    return settings.fanout.start_on_commit and not on_object_store(settings)


def fanout_idle_hold(settings: Settings) -> float:
    """Seconds the fan-out's source holds an ask that found nothing once traffic stopped
    (``[fanout] idle_hold``, sharedsub.core.fanout.idle_hold): on a local data dir only (on object
    storage no signal comes, and the writers' change notes pace the source), and not on a
    trigger grid of 0 (batches started at commits hold every ask for a trigger interval, and
    this much once idle)."""
    if on_object_store(settings) or (fanout_trigger_interval(settings) <= 0 and not fanout_starts_on_commit(settings)):
        return 0.0
    return settings.fanout.idle_hold


def commit_signals(settings: Settings) -> bool:
    """Whether the front ends signal each topic commit to the fan-out's source on this host
    (sharedsub.runtime.commit_wake): when batches start at commits, or idle asks are held."""
    return fanout_starts_on_commit(settings) or fanout_idle_hold(settings) > 0


def fanout_trigger_interval(settings: Settings) -> float:
    """The fan-out's trigger interval: ``[fanout] trigger_interval``, at least ``[storage]
    object_poll_interval`` on object storage (each trigger probes every topic's log)."""
    trigger = settings.fanout.trigger_interval
    return max(trigger, settings.storage.object_poll_interval) if on_object_store(settings) else trigger


def _string_table(key: str, value: object) -> dict[str, str]:
    """A TOML table of strings, or (from an environment variable or a flag) ``k=v,k=v``."""
    if isinstance(value, str):
        pairs = [p for p in (part.strip() for part in value.split(",")) if p]
        if any("=" not in p for p in pairs):
            raise ConfigError(key, "expected key=value pairs separated by commas")
        return {k.strip(): v.strip() for k, _, v in (p.partition("=") for p in pairs)}
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        for k, v in value.items():
            if isinstance(v, Mapping):  # [fanout.spark_conf] spark.executor.memory = ... is a nested table in TOML
                dotted = k
                while isinstance(v, Mapping) and v:
                    inner = next(iter(v))
                    dotted, v = f"{dotted}.{inner}", v[inner]
                raise ConfigError(f"{key}.{k}", f'is a table: quote a dotted key ("{dotted}" = ...)')
        return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}
    raise ConfigError(key, "expected a table of strings")


def _check(settings: Settings) -> None:
    """Every setting is in its range (a ConfigError names the first that is not)."""
    s = settings
    for key, value in (
        ("server.shared_consumer_limit", s.server.shared_consumer_limit),
        ("server.max_message_size", s.server.max_message_size),
        ("server.max_transaction_messages", s.server.max_transaction_messages),
        ("server.max_transaction_bytes", s.server.max_transaction_bytes),
        ("publish.max_uncommitted_bytes", s.publish.max_uncommitted_bytes),
        ("server.max_connections", s.server.max_connections),
        ("server.max_sessions_per_connection", s.server.max_sessions_per_connection),
        ("server.max_links_per_connection", s.server.max_links_per_connection),
        ("delivery.max_delivery_count", s.delivery.max_delivery_count),
    ):
        if value < 0:
            raise ConfigError(key, "must be 0 (unlimited) or positive")
    if not 0 <= s.server.port <= 65535:
        raise ConfigError("server.port", f"must be 0..65535, got {s.server.port}")
    for key, value in (
        ("publish.credit", s.publish.credit),
        ("publish.max_batch_messages", s.publish.max_batch_messages),
        ("publish.max_batch_bytes", s.publish.max_batch_bytes),
        ("delivery.payload_cache_bytes", s.delivery.payload_cache_bytes),
        ("fanout.max_commits_per_batch", s.fanout.max_commits_per_batch),
    ):
        if value <= 0:
            raise ConfigError(key, f"must be positive, got {value}")
    _check_intervals(s)
    if not s.storage.data_dir:
        raise ConfigError("storage.data_dir", "must not be empty")
    _check_observability(s)
    _check_security(s)
    _check_cluster(s)


def _check_object_intervals(s: Settings) -> None:
    """[storage]'s pacing of commits on object storage is in range."""
    if not 0 <= s.storage.object_ack_interval <= 60:  # NaN fails too
        raise ConfigError("storage.object_ack_interval", f"must be 0..60 seconds, got {s.storage.object_ack_interval}")
    if not 0 <= s.storage.object_commit_interval <= 1:  # NaN fails too
        raise ConfigError(
            "storage.object_commit_interval", f"must be 0..1 seconds, got {s.storage.object_commit_interval}"
        )


def _check_fanout_intervals(s: Settings) -> None:
    """[fanout]'s times and batch bounds are in range."""
    if s.fanout.trigger_interval < 0:
        raise ConfigError("fanout.trigger_interval", "must not be negative")
    if not 0 <= s.fanout.unsubscribed_topic_interval < float("inf"):  # NaN fails too
        raise ConfigError("fanout.unsubscribed_topic_interval", "must be 0 (off) or positive seconds")
    if not 0 <= s.fanout.batch_max_wait <= 10:  # NaN fails too
        raise ConfigError("fanout.batch_max_wait", f"must be 0 (off) to 10 seconds, got {s.fanout.batch_max_wait}")
    if not 0 <= s.fanout.idle_hold <= 10:  # NaN fails too
        raise ConfigError("fanout.idle_hold", f"must be 0 (off) to 10 seconds, got {s.fanout.idle_hold}")
    if s.fanout.batch_min_rows < 1:
        raise ConfigError("fanout.batch_min_rows", f"must be at least 1, got {s.fanout.batch_min_rows}")
    for key, seconds in (
        ("fanout.table_retry_interval", s.fanout.table_retry_interval),
        ("fanout.stalled_after", s.fanout.stalled_after),
    ):
        if seconds <= 0:
            raise ConfigError(key, f"must be positive, got {seconds}")


def _check_intervals(s: Settings) -> None:
    """Times and retention settings (seconds or hours) are in range; [fanout]'s choices are known."""
    if not 0 <= s.publish.min_commit_interval <= 1:  # NaN fails too
        raise ConfigError("publish.min_commit_interval", f"must be 0..1 seconds, got {s.publish.min_commit_interval}")
    _check_object_intervals(s)
    if not 0 <= s.publish.sync_send_gap <= 1:  # NaN fails too
        raise ConfigError("publish.sync_send_gap", f"must be 0..1 seconds, got {s.publish.sync_send_gap}")
    if not 0 <= s.publish.commit_lead <= 1:  # NaN fails too
        raise ConfigError("publish.commit_lead", f"must be 0..1 seconds, got {s.publish.commit_lead}")
    if s.server.idle_timeout < 0:
        raise ConfigError("server.idle_timeout", "must be 0 (never) or positive")
    if not 0 <= s.storage.full_disk_timeout < float("inf"):  # NaN fails too
        raise ConfigError(
            "storage.full_disk_timeout", f"must be 0 (refuse at once) or positive seconds, got {s.storage.full_disk_timeout}"
        )
    if s.delivery.poll_interval <= 0:
        raise ConfigError("delivery.poll_interval", "must be positive")
    _check_fanout_intervals(s)
    _check_fanout_choices(s)
    if s.maintenance.interval < 0:
        raise ConfigError("maintenance.interval", "must be 0 (off) or positive")
    for key, value in (
        ("maintenance.history_retention_hours", s.maintenance.history_retention_hours),
        ("maintenance.compact_min_files", s.maintenance.compact_min_files),
        ("maintenance.min_acked_rows", s.maintenance.min_acked_rows),
    ):
        if value < 0:
            raise ConfigError(key, f"must not be negative, got {value}")
    if s.maintenance.topic_retention_hours < -1:
        raise ConfigError(
            "maintenance.topic_retention_hours",
            f"must be -1 (the history retention) or hours >= 0, got {s.maintenance.topic_retention_hours}",
        )


def _check_fanout_choices(s: Settings) -> None:
    """[fanout]'s source and routing are known, its executor threshold in range."""
    if s.fanout.source not in FANOUT_SOURCES:
        raise ConfigError("fanout.source", f"must be one of {', '.join(FANOUT_SOURCES)}, got {s.fanout.source!r}")
    if s.fanout.routing not in ROUTING_MODES:
        raise ConfigError("fanout.routing", f"must be one of {', '.join(ROUTING_MODES)}, got {s.fanout.routing!r}")
    for key, count in (
        ("fanout.executor_min_work", s.fanout.executor_min_work),
        ("fanout.task_commit_min_tables", s.fanout.task_commit_min_tables),
    ):
        if count < 0:
            raise ConfigError(key, f"must not be negative, got {count}")
    _check_spark_conf(s.fanout.spark_conf)


def _check_spark_conf(conf: Mapping[str, str]) -> None:
    """[fanout] spark_conf: Spark's own keys only (``spark.``), none the service sets itself
    (:data:`SPARK_CONF_REFUSED`); the ConfigError names the key."""
    for key in conf:
        if not key.startswith("spark.") or key == "spark.":
            raise ConfigError(f"fanout.spark_conf.{key}", "not a Spark setting: keys start with 'spark.'")
        if key in SPARK_CONF_REFUSED:
            raise ConfigError(f"fanout.spark_conf.{key}", f"may not be set here: {SPARK_CONF_REFUSED[key]}")


def _check_cluster(s: Settings) -> None:
    """[cluster]: slots within the fence tokens' range, positive intervals."""
    if not 1 <= s.cluster.max_members <= MAX_MEMBERS:
        raise ConfigError("cluster.max_members", f"must be 1..{MAX_MEMBERS}, got {s.cluster.max_members}")
    for key, seconds in (("cluster.interval", s.cluster.interval), ("cluster.drain_timeout", s.cluster.drain_timeout)):
        if seconds <= 0:
            raise ConfigError(key, f"must be positive seconds, got {seconds}")


def _check_security(s: Settings) -> None:
    """[security]."""
    sec = s.security
    for mech in sec.mechanism_list:
        if mech not in SASL_PASSWORD_MECHANISMS:
            raise ConfigError(
                "security.mechanisms",
                f"unknown mechanism {mech!r} (known: {', '.join(SASL_PASSWORD_MECHANISMS)}; "
                "ANONYMOUS and EXTERNAL have their own keys)",
            )
    if sec.anonymous_mode not in ANONYMOUS_MODES:
        raise ConfigError("security.anonymous", f"must be auto, true or false, got {sec.anonymous!r}")
    if not -1 <= sec.tls_port <= 65535:
        raise ConfigError("security.tls_port", f"must be -1 (off), 0 (a free port) or 1..65535, got {sec.tls_port}")
    if sec.tls_port >= 0 and not sec.tls_cert:
        raise ConfigError("security.tls_cert", "must name a PEM certificate when tls_port is set")
    if (sec.require_client_cert or sec.external) and not sec.tls_ca:
        key = "security.require_client_cert" if sec.require_client_cert else "security.external"
        raise ConfigError(key, "needs security.tls_ca (the CA client certificates are checked against)")
    if not 0 < sec.auth_timeout < float("inf"):
        raise ConfigError("security.auth_timeout", f"must be positive seconds, got {sec.auth_timeout}")
    if sec.max_authenticating <= 0:
        raise ConfigError("security.max_authenticating", f"must be positive, got {sec.max_authenticating}")


def _check_observability(s: Settings) -> None:
    """[server] http_*, metrics_backlog_interval and [log]."""
    if not -1 <= s.server.http_port <= 65535:
        raise ConfigError("server.http_port", f"must be -1 (off), 0 (a free port) or 1..65535, got {s.server.http_port}")
    if s.server.metrics_backlog_interval < 0:
        raise ConfigError("server.metrics_backlog_interval", "must not be negative")
    if not 0 < s.server.http_request_timeout < float("inf"):
        raise ConfigError("server.http_request_timeout", f"must be positive seconds, got {s.server.http_request_timeout}")
    if s.server.http_max_connections <= 0:
        raise ConfigError("server.http_max_connections", f"must be positive, got {s.server.http_max_connections}")
    parse_access(s.server.console)
    if not 0 < s.server.console_refresh <= 3600:
        raise ConfigError("server.console_refresh", f"must be seconds in (0, 3600], got {s.server.console_refresh}")
    if not s.server.console_refresh <= s.server.console_window <= 7 * 86400:
        raise ConfigError(
            "server.console_window", f"must be at least console_refresh and at most 7 days, got {s.server.console_window}"
        )
    if s.log.format not in LOG_FORMATS:
        raise ConfigError("log.format", f"must be one of {', '.join(LOG_FORMATS)}, got {s.log.format!r}")
    if s.log.level.upper() not in LOG_LEVELS:
        raise ConfigError("log.level", f"must be one of {', '.join(LOG_LEVELS)}, got {s.log.level!r}")


def parse_settings(
    document: Mapping[str, object],
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> Settings:
    """Build Settings from a TOML document, SHAREDSUB_SECTION_KEY variables and ``section.key`` overrides.

    Raises:
        ConfigError: an unknown section or key, or a value of the wrong type or range.
    """
    values: dict[str, dict[str, object]] = {name: dict(body) for name, body in default_document().items()}
    for section, body in document.items():
        if section not in _SECTIONS:
            raise ConfigError(section, f"unknown section (known: {', '.join(_SECTIONS)})")
        if not isinstance(body, Mapping):
            raise ConfigError(section, "must be a table")
        for key, value in body.items():
            values[section][key] = value
    for name, value in (environ or {}).items():
        if not name.startswith("SHAREDSUB_"):
            continue
        rest = name[len("SHAREDSUB_") :].lower()
        section, _, key = rest.partition("_")
        if section in _SECTIONS and key:
            values[section][key] = value
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        section, _, key = dotted.partition(".")
        values.setdefault(section, {})[key] = value
    built: dict[str, Any] = {}  # Any: Settings(**built) takes a different class per key, picked by the loop
    for section, cls in _SECTIONS.items():
        fields = {f.name: f for f in dataclasses.fields(cls)}
        kwargs = {}
        for key, value in values[section].items():
            if key not in fields:
                raise ConfigError(f"{section}.{key}", f"unknown key (known: {', '.join(fields)})")
            kwargs[key] = _coerce(f"{section}.{key}", value, fields[key].type)
        for key in fields.keys() - kwargs.keys():
            raise ConfigError(f"{section}.{key}", f"no value: the packaged {DEFAULTS_RESOURCE} must give every key one")
        built[section] = cls(**kwargs)
    settings = Settings(**built)
    _check(settings)
    return settings


@functools.cache
def default_document() -> Mapping[str, Mapping[str, object]]:
    """The packaged defaults as a TOML document (read once; the single source of every default).

    Raises:
        ConfigError: the packaged file is missing a section table or is not valid TOML.
    """
    text = importlib.resources.files(__package__).joinpath(DEFAULTS_RESOURCE).read_text(encoding="utf-8")
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(DEFAULTS_RESOURCE, f"not valid TOML: {exc}") from None
    for section in _SECTIONS:
        if not isinstance(document.get(section), dict):
            raise ConfigError(DEFAULTS_RESOURCE, f"has no [{section}] table")
    return document


def defaults() -> Settings:
    """The settings with nothing overridden: the packaged ``defaults.toml`` alone."""
    return parse_settings({})


def load_settings(
    path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> Settings:
    """Read ``path`` (a TOML file of overrides) over the packaged defaults, then apply environment
    and flag overrides.

    Raises:
        ConfigError: ``path`` does not exist or is not valid TOML, or a value is invalid.
    """
    document: dict[str, object] = {}
    if path is not None:
        if not os.path.exists(path):
            raise ConfigError("--config", f"file {str(path)!r} does not exist")
        with open(path, "rb") as fh:
            try:
                document = tomllib.load(fh)
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(str(path), f"not valid TOML: {exc}") from None
    return parse_settings(document, environ if environ is not None else os.environ, overrides)
