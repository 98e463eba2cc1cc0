"""Settings: defaults, environment and flag overrides, and refusal of bad values by key."""

from __future__ import annotations

import dataclasses
import tomllib
from importlib.resources import files
from pathlib import Path

import pytest

from sharedsub.core import config
from sharedsub.core.config import (
    ack_commit_interval,
    defaults,
    fanout_trigger_interval,
    group_commit_interval,
    load_settings,
    parse_settings,
    tail_poll_interval,
)
from sharedsub.core.errors import ConfigError


def test_defaults_file_loads() -> None:
    s = load_settings(environ={})
    assert s.server.port == 5672
    assert s.server.auto_create_topics is False
    assert s.publish.credit > 0


def test_the_packaged_file_is_the_one_source_of_defaults() -> None:
    """Every key has its default in sharedsub/core/defaults.toml and nowhere in the code: the
    dataclasses declare types only, and the file holds no key the code does not know."""
    packaged = tomllib.loads(files("sharedsub.core").joinpath("defaults.toml").read_text())
    for section, cls in config._SECTIONS.items():
        fields = dataclasses.fields(cls)
        assert all(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING for f in fields), cls
        assert set(packaged[section]) == {f.name for f in fields}, section
    assert set(packaged) == set(config._SECTIONS)
    assert all(f.default is dataclasses.MISSING for f in dataclasses.fields(config.Settings))
    assert defaults() == load_settings(environ={})


def test_a_file_overrides_only_the_keys_it_names(tmp_path: Path) -> None:
    path = tmp_path / "site.toml"
    path.write_text("[server]\nport = 5673\n")
    s = load_settings(path, environ={})
    assert (s.server.port, s.server.host, s.publish.credit) == (5673, defaults().server.host, defaults().publish.credit)
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "missing.toml", environ={})
    (tmp_path / "bad.toml").write_text("[server\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(tmp_path / "bad.toml", environ={})


def test_the_setup_ships_the_defaults_with_the_package() -> None:
    setup = (Path(__file__).resolve().parents[2] / "setup.py").read_text()
    assert '"sharedsub.core": ["defaults.toml"]' in setup and '"jobs": ["spark-defaults.conf"]' in setup


def test_maintenance_defaults_and_environment() -> None:
    s = parse_settings({}, {"SHAREDSUB_MAINTENANCE_HISTORY_RETENTION_HOURS": "24", "SHAREDSUB_MAINTENANCE_INTERVAL": "0"})
    assert (s.maintenance.history_retention_hours, s.maintenance.interval) == (24, 0.0)
    assert parse_settings({}).maintenance.compact_min_files == 16


def test_topic_retention_defaults_to_the_history_retention() -> None:
    assert load_settings(environ={}).maintenance.topic_retention == 168
    s = parse_settings({}, {"SHAREDSUB_MAINTENANCE_HISTORY_RETENTION_HOURS": "24"})
    assert (s.maintenance.topic_retention_hours, s.maintenance.topic_retention) == (-1, 24)
    s = parse_settings({}, {"SHAREDSUB_MAINTENANCE_TOPIC_RETENTION_HOURS": "0"})
    assert s.maintenance.topic_retention == 0


def test_precedence_env_then_flags() -> None:
    s = parse_settings({"server": {"port": 1}}, {"SHAREDSUB_SERVER_PORT": "2"}, {"server.port": 3})
    assert s.server.port == 3
    s = parse_settings({"server": {"port": 1}}, {"SHAREDSUB_SERVER_PORT": "2"}, {"server.port": None})
    assert s.server.port == 2
    s = parse_settings({}, {"SHAREDSUB_SERVER_AUTO_CREATE_TOPICS": "yes"})
    assert s.server.auto_create_topics is True


@pytest.mark.parametrize(
    ("doc", "key"),
    [
        ({"server": {"port": "abc"}}, "server.port"),
        ({"server": {"port": 70000}}, "server.port"),
        ({"server": {"nope": 1}}, "server.nope"),
        ({"nosuch": {}}, "nosuch"),
        ({"publish": {"credit": 0}}, "publish.credit"),
        ({"delivery": {"poll_interval": -1}}, "delivery.poll_interval"),
        ({"server": {"auto_create_topics": "maybe"}}, "server.auto_create_topics"),
        ({"maintenance": {"interval": -1}}, "maintenance.interval"),
        ({"maintenance": {"history_retention_hours": -5}}, "maintenance.history_retention_hours"),
        ({"maintenance": {"min_acked_rows": "many"}}, "maintenance.min_acked_rows"),
        ({"maintenance": {"topic_retention_hours": -2}}, "maintenance.topic_retention_hours"),
        ({"server": {"http_port": -2}}, "server.http_port"),
        ({"server": {"http_port": 65536}}, "server.http_port"),
        ({"server": {"http_port": "web"}}, "server.http_port"),
        ({"server": {"metrics_backlog_interval": -1}}, "server.metrics_backlog_interval"),
        ({"server": {"idle_timeout": -1}}, "server.idle_timeout"),
        ({"storage": {"full_disk_timeout": -1}}, "storage.full_disk_timeout"),
        ({"storage": {"full_disk_timeout": "nan"}}, "storage.full_disk_timeout"),
        ({"storage": {"full_disk_timeout": "inf"}}, "storage.full_disk_timeout"),
        ({"server": {"max_connections": -1}}, "server.max_connections"),
        ({"publish": {"max_uncommitted_bytes": -1}}, "publish.max_uncommitted_bytes"),
        ({"publish": {"min_commit_interval": 2}}, "publish.min_commit_interval"),
        ({"publish": {"sync_send_gap": -0.001}}, "publish.sync_send_gap"),
        ({"publish": {"sync_send_gap": "nan"}}, "publish.sync_send_gap"),
        ({"server": {"max_transaction_messages": -1}}, "server.max_transaction_messages"),
        ({"server": {"max_transaction_bytes": -1}}, "server.max_transaction_bytes"),
        ({"log": {"format": "xml"}}, "log.format"),
        ({"log": {"level": "LOUD"}}, "log.level"),
        ({"log": {"colour": True}}, "log.colour"),
        ({"fanout": {"source": "kafka"}}, "fanout.source"),
        ({"fanout": {"unsubscribed_topic_interval": -1}}, "fanout.unsubscribed_topic_interval"),
        ({"fanout": {"unsubscribed_topic_interval": "nan"}}, "fanout.unsubscribed_topic_interval"),
        ({"fanout": {"batch_max_wait": -0.1}}, "fanout.batch_max_wait"),
        ({"fanout": {"batch_max_wait": "nan"}}, "fanout.batch_max_wait"),
        ({"fanout": {"batch_max_wait": 11}}, "fanout.batch_max_wait"),
        ({"fanout": {"batch_min_rows": 0}}, "fanout.batch_min_rows"),
    ],
)
def test_invalid_values_name_the_key(doc: dict, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_settings(doc, {})
    assert info.value.key == key
    assert key in str(info.value)


def test_observability_defaults_and_overrides() -> None:
    s = load_settings(environ={})
    assert (s.server.http_host, s.server.http_port, s.server.metrics_backlog_interval) == ("127.0.0.1", 0, 5.0)
    assert (s.log.format, s.log.level) == ("text", "INFO")
    s = parse_settings({}, {"SHAREDSUB_LOG_FORMAT": "json", "SHAREDSUB_SERVER_HTTP_PORT": "-1"}, {"log.level": "debug"})
    assert (s.log.format, s.server.http_port, s.log.level) == ("json", -1, "debug")
    assert parse_settings({}, {}, {"server.http_port": 8161, "server.http_host": "0.0.0.0"}).server.http_port == 8161


def test_full_disk_timeout_default_and_zero() -> None:
    assert load_settings(environ={}).storage.full_disk_timeout == 60.0  # sharedsub/core/defaults.toml
    assert parse_settings({}, {"SHAREDSUB_STORAGE_FULL_DISK_TIMEOUT": "0"}).storage.full_disk_timeout == 0.0


def test_security_defaults_keep_todays_open_listener() -> None:
    sec = load_settings(environ={}).security
    assert (sec.anonymous_mode, sec.tls_port, sec.users_file) == ("auto", -1, "")
    assert sec.mechanism_list == ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")


def test_security_from_environment_and_toml_types() -> None:
    s = parse_settings(
        {"security": {"anonymous": True, "mechanisms": ["PLAIN", "SCRAM-SHA-256"]}},
        {"SHAREDSUB_SECURITY_TLS_PORT": "0", "SHAREDSUB_SECURITY_TLS_CERT": "/c.pem"},
    )
    assert (s.security.anonymous_mode, s.security.mechanism_list) == ("true", ("PLAIN", "SCRAM-SHA-256"))
    assert (s.security.tls_port, s.security.tls_cert) == (0, "/c.pem")
    assert parse_settings({}, {"SHAREDSUB_SECURITY_ANONYMOUS": "False"}).security.anonymous_mode == "false"


@pytest.mark.parametrize(
    ("doc", "key"),
    [
        ({"security": {"mechanisms": "PLAIN CRAM-MD5"}}, "security.mechanisms"),
        ({"security": {"mechanisms": "ANONYMOUS"}}, "security.mechanisms"),
        ({"security": {"anonymous": "sometimes"}}, "security.anonymous"),
        ({"security": {"tls_port": -2}}, "security.tls_port"),
        ({"security": {"tls_port": 0}}, "security.tls_cert"),
        ({"security": {"external": True}}, "security.external"),
        ({"security": {"require_client_cert": True}}, "security.require_client_cert"),
        ({"security": {"auth_timeout": 0}}, "security.auth_timeout"),
        ({"security": {"max_authenticating": 0}}, "security.max_authenticating"),
    ],
)
def test_security_refusals(doc: dict[str, dict[str, object]], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_settings(doc)
    assert info.value.key == key


def test_synchronous_senders_are_told_apart_within_2_ms_by_default_and_can_be_turned_off() -> None:
    assert load_settings(None, {}, {}).publish.sync_send_gap == 0.002
    assert load_settings(None, {"SHAREDSUB_PUBLISH_SYNC_SEND_GAP": "0"}, {}).publish.sync_send_gap == 0.0


def test_fanout_source_defaults_to_delta_rs_and_takes_delta() -> None:
    assert load_settings(None, {}, {}).fanout.source == "deltars"
    assert load_settings(None, {"SHAREDSUB_FANOUT_SOURCE": "delta"}, {}).fanout.source == "delta"


def test_storage_options_from_a_table_or_the_environment_and_never_shown(tmp_path: Path) -> None:
    path = tmp_path / "s3.toml"
    path.write_text('[storage]\ndata_dir = "s3://lake/ss"\noptions = { AWS_REGION = "eu-west-1", AWS_ALLOW_HTTP = true }\n')
    s = load_settings(path, environ={})
    assert s.storage.options == {"AWS_REGION": "eu-west-1", "AWS_ALLOW_HTTP": "true"}
    env = load_settings(environ={"SHAREDSUB_STORAGE_OPTIONS": "AWS_SECRET_ACCESS_KEY=s3cr3t, AWS_REGION=x"})
    assert env.storage.options == {"AWS_SECRET_ACCESS_KEY": "s3cr3t", "AWS_REGION": "x"}
    assert "s3cr3t" not in repr(env) and "s3cr3t" not in str(env.storage)
    assert defaults().storage.options == {}
    with pytest.raises(ConfigError, match="'storage.options': expected key=value pairs"):
        load_settings(environ={"SHAREDSUB_STORAGE_OPTIONS": "AWS_REGION"})
    path.write_text("[storage]\noptions = 3\n")
    with pytest.raises(ConfigError, match="'storage.options': expected a table of strings"):
        load_settings(path, environ={})


def test_probes_on_object_storage_are_spaced_by_object_poll_interval() -> None:
    local = load_settings(environ={"SHAREDSUB_DELIVERY_POLL_INTERVAL": "0.005", "SHAREDSUB_FANOUT_TRIGGER_INTERVAL": "0"})
    assert (tail_poll_interval(local), fanout_trigger_interval(local)) == (0.005, 0.0)
    s3 = load_settings(
        environ={
            "SHAREDSUB_DELIVERY_POLL_INTERVAL": "0.005",
            "SHAREDSUB_FANOUT_TRIGGER_INTERVAL": "0",
            "SHAREDSUB_STORAGE_DATA_DIR": "s3://lake/ss",
        }
    )
    assert tail_poll_interval(s3) == fanout_trigger_interval(s3) == s3.storage.object_poll_interval == 0.1
    slow = load_settings(environ={"SHAREDSUB_STORAGE_DATA_DIR": "s3://lake/ss", "SHAREDSUB_FANOUT_TRIGGER_INTERVAL": "2"})
    assert fanout_trigger_interval(slow) == 2.0
    assert fanout_trigger_interval(load_settings(environ={"SHAREDSUB_STORAGE_DATA_DIR": "file:///x"})) == 0.07  # the default


def test_group_commits_on_object_storage_are_spaced_by_object_commit_interval() -> None:
    assert group_commit_interval(load_settings(environ={})) == 0.07  # [publish] min_commit_interval, locally
    s3 = {"SHAREDSUB_STORAGE_DATA_DIR": "s3://lake/ss"}
    assert group_commit_interval(load_settings(environ=s3)) == 0.1  # [storage] object_commit_interval
    faster = load_settings(environ={**s3, "SHAREDSUB_STORAGE_OBJECT_COMMIT_INTERVAL": "0.08"})
    assert group_commit_interval(faster) == 0.08
    below = load_settings(environ={**s3, "SHAREDSUB_STORAGE_OBJECT_COMMIT_INTERVAL": "0.05"})
    assert group_commit_interval(below) == 0.07  # never below min_commit_interval
    slower = load_settings(environ={**s3, "SHAREDSUB_PUBLISH_MIN_COMMIT_INTERVAL": "0.3"})
    assert group_commit_interval(slower) == 0.3  # the larger of the two
    with pytest.raises(ConfigError, match="storage.object_commit_interval"):
        load_settings(environ={**s3, "SHAREDSUB_STORAGE_OBJECT_COMMIT_INTERVAL": "5"})


def test_acknowledgement_logs_on_object_storage_are_spaced_by_object_ack_interval() -> None:
    assert ack_commit_interval(load_settings(environ={})) == 0.0  # locally: with the group commits
    s3 = {"SHAREDSUB_STORAGE_DATA_DIR": "s3://lake/ss"}
    assert ack_commit_interval(load_settings(environ=s3)) == 1.0
    assert ack_commit_interval(load_settings(environ={**s3, "SHAREDSUB_STORAGE_OBJECT_ACK_INTERVAL": "0"})) == 0.0
    with pytest.raises(ConfigError, match="storage.object_ack_interval"):
        load_settings(environ={**s3, "SHAREDSUB_STORAGE_OBJECT_ACK_INTERVAL": "-1"})
