"""Spark's view of a data dir on S3 (jobs/s3a_settings.py, jobs/session.s3a_classpath): paths
and S3A settings derived from the service's own, as tables."""

from __future__ import annotations

import pytest

from jobs.s3a_settings import TEMPORARY_CREDENTIALS, all_buckets, bucket_of, hadoop_settings, is_secret, spark_path
from jobs.session import s3a_classpath

P = "fs.s3a.bucket.lake."


@pytest.mark.parametrize(
    ("location", "spark", "bucket"),
    [
        ("s3://lake/ss/topics/orders", "s3a://lake/ss/topics/orders", "lake"),
        ("s3a://lake/ss", "s3a://lake/ss", "lake"),
        ("s3://lake", "s3a://lake", "lake"),
        ("/var/lib/ss/topics/orders", "/var/lib/ss/topics/orders", None),
        ("file:///var/lib/ss", "file:///var/lib/ss", None),
        ("gs://lake/ss", "gs://lake/ss", None),
    ],
)
def test_spark_paths(location: str, spark: str, bucket: str | None) -> None:
    assert spark_path(location) == spark and bucket_of(location) == bucket


LOCAL_SERVER = {
    "AWS_ENDPOINT_URL": "http://127.0.0.1:7070",
    "AWS_ALLOW_HTTP": "true",
    "AWS_REGION": "eu-west-1",
    "AWS_ACCESS_KEY_ID": "AK",
    "AWS_SECRET_ACCESS_KEY": "SK",
}


@pytest.mark.parametrize(
    ("environ", "options", "expected"),
    [
        # the AWS variables alone (the test server's set)
        (LOCAL_SERVER, None, {"endpoint": "http://127.0.0.1:7070", "endpoint.region": "eu-west-1",
                              "path.style.access": "true", "connection.ssl.enabled": "false",
                              "access.key": "AK", "secret.key": "SK"}),
        # [storage] options win, in delta-rs or object_store spelling
        (LOCAL_SERVER, {"aws_region": "us-west-2", "endpoint": "https://s3.example"},
         {"endpoint": "https://s3.example", "endpoint.region": "us-west-2", "path.style.access": "true",
          "connection.ssl.enabled": "false", "access.key": "AK", "secret.key": "SK"}),
        # an endpoint and no region: the service's client signs for us-east-1
        ({"AWS_ENDPOINT_URL": "https://s3.example"}, None,
         {"endpoint": "https://s3.example", "endpoint.region": "us-east-1", "path.style.access": "true"}),
        # real AWS, credentials from S3A's own chain (profile, role): nothing but the style
        ({}, None, {"path.style.access": "true"}),
        # virtual-hosted style asked for, either spelling
        ({"AWS_S3_ADDRESSING_STYLE": "virtual"}, None, {"path.style.access": "false"}),
        ({}, {"AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true"}, {"path.style.access": "false"}),
        # http not allowed: TLS stays on
        ({"AWS_ALLOW_HTTP": "false", "AWS_DEFAULT_REGION": "ap-south-1"}, None,
         {"endpoint.region": "ap-south-1", "path.style.access": "true"}),
        # temporary credentials: the token and the provider that takes it
        ({"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_SESSION_TOKEN": "TK"}, None,
         {"path.style.access": "true", "access.key": "AK", "secret.key": "SK", "session.token": "TK",
          "aws.credentials.provider": TEMPORARY_CREDENTIALS}),
        # a key without its secret is no identity: S3A's chain decides
        ({"AWS_ACCESS_KEY_ID": "AK"}, None, {"path.style.access": "true"}),
        # other variables are not S3's
        ({"HOME": "/root", "AWS_PROFILE": "x"}, None, {"path.style.access": "true"}),
    ],
)
def test_s3a_settings_from_the_services_settings(
    environ: dict[str, str], options: dict[str, str] | None, expected: dict[str, str]
) -> None:
    assert hadoop_settings("s3://lake/ss", options, environ) == {P + k: v for k, v in expected.items()}


def test_no_s3a_settings_for_a_local_data_dir() -> None:
    assert hadoop_settings("/var/lib/ss", {"AWS_REGION": "x"}, LOCAL_SERVER) == {}


@pytest.mark.parametrize(
    ("key", "secret"),
    [(P + "access.key", True), (P + "secret.key", True), (P + "session.token", True),
     (P + "endpoint", False), (P + "aws.credentials.provider", False), (P + "endpoint.region", False)],
)
def test_which_settings_are_secret(key: str, secret: bool) -> None:
    assert is_secret(key) is secret


@pytest.mark.parametrize(
    ("conf", "paths", "expected"),
    [
        ({"spark.master": "local[2]"}, ["/j/a.jar", "/j/b.jar"], {"spark.driver.extraClassPath": "/j/a.jar:/j/b.jar"}),
        ({"spark.master": "local[*]", "spark.driver.extraClassPath": "/x.jar"}, ["/j/a.jar"],
         {"spark.driver.extraClassPath": "/x.jar:/j/a.jar"}),
        ({"spark.master": "spark://h:7077", "spark.jars": "/d.jar"}, ["/j/a.jar"], {"spark.jars": "/d.jar,/j/a.jar"}),
        ({"spark.master": "local[2]"}, [], {}),
    ],
)
def test_s3a_jars_join_the_driver_classpath_locally_and_are_shipped_otherwise(
    conf: dict[str, str], paths: list[str], expected: dict[str, str]
) -> None:
    assert s3a_classpath(conf, paths) == expected


@pytest.mark.parametrize(
    ("key", "general"),
    [
        (P + "endpoint", "fs.s3a.endpoint"),
        (P + "endpoint.region", "fs.s3a.endpoint.region"),
        ("fs.s3a.bucket.my.lake.secret.key", "fs.s3a.secret.key"),  # a bucket name with dots
        ("fs.s3a.bucket.lake.aws.credentials.provider", "fs.s3a.aws.credentials.provider"),
        ("fs.s3a.endpoint", "fs.s3a.endpoint"),
    ],
)
def test_the_setting_for_all_buckets_that_a_bucket_setting_refines(key: str, general: str) -> None:
    assert all_buckets(key) == general
