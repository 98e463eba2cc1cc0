"""What Spark needs to read a data dir on S3 the way the service reaches it: ``s3a://`` paths and
Hadoop S3A settings derived from the service's own (no I/O; jobs/session.py applies them).

delta-rs and the service name a bucket ``s3://``; Spark's Hadoop file system for S3 is S3A, so
every path handed to Spark goes through :func:`spark_path` (``s3://b/p`` → ``s3a://b/p``; any
other location unchanged). Both schemes name the same objects: Spark reads the tables the
service writes, and never writes them (Delta's S3 log store excludes writers only within one
Spark driver).

:func:`hadoop_settings` turns the settings the service's S3 client reads — the standard AWS
variables, then ``[storage] options`` on top, in any spelling delta-rs or object_store take
(sharedsub.storage.objects.s3_store.client_settings normalizes both) — into S3A's per-bucket
settings ``fs.s3a.bucket.<bucket>.<key>`` for the data dir's bucket only, so other buckets a
session reads keep their own configuration:

* endpoint (``AWS_ENDPOINT_URL``) → ``endpoint``: the same server;
* region or default_region → ``endpoint.region`` (SigV4 signs with it); with an endpoint and no
  region, ``us-east-1``, the service client's default;
* virtual_hosted_style_request → ``path.style.access``, its negation: the service's client
  defaults to path style, S3A to virtual hosts;
* allow_http = true → ``connection.ssl.enabled`` = false (plain HTTP endpoints);
* access_key_id and secret_access_key (both) → ``access.key`` and ``secret.key``; with
  session_token (or token) also ``session.token`` and the temporary-credentials provider (named,
  so the token is used whatever provider list a cluster's defaults give).

Without credentials in either source S3A's default chain applies (its own reading of the AWS
variables, profile files, instance roles). Secrets end up in Spark's configuration (where Spark's
default ``spark.redaction.regex`` hides ``access.key``, ``secret.key`` and ``token`` in its UI and
event logs) and must never be printed: :data:`SECRET_KEYS` names them.
"""

from __future__ import annotations

from collections.abc import Mapping

from sharedsub.storage.objects.s3_store import client_settings

SERVICE_SCHEME = "s3://"
SPARK_SCHEME = "s3a://"
DEFAULT_REGION = "us-east-1"  # object_store's (the service's S3 client) when none is set
TEMPORARY_CREDENTIALS = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
SECRET_KEYS = frozenset({"access.key", "secret.key", "session.token"})
# Every S3A key hadoop_settings sets (after the bucket's prefix).
_KEYS = (
    "endpoint",
    "endpoint.region",
    "path.style.access",
    "connection.ssl.enabled",
    *sorted(SECRET_KEYS),
    "aws.credentials.provider",
)
_ENV_PREFIX = "AWS_"  # object_store reads every AWS_* variable it knows


def spark_path(location: str) -> str:
    """``location`` as Spark names it: ``s3://`` becomes ``s3a://``; anything else is unchanged."""
    if location.startswith(SERVICE_SCHEME):
        return SPARK_SCHEME + location[len(SERVICE_SCHEME) :]
    return location


def bucket_of(location: str) -> str | None:
    """The bucket of an ``s3://`` or ``s3a://`` location; None for any other location."""
    for scheme in (SERVICE_SCHEME, SPARK_SCHEME):
        if location.startswith(scheme):
            return location[len(scheme) :].split("/", 1)[0] or None
    return None


def bucket_prefix(bucket: str) -> str:
    """The Hadoop key prefix of S3A's settings for one bucket."""
    return f"fs.s3a.bucket.{bucket}."


def all_buckets(key: str) -> str:
    """The setting for every bucket that the per-bucket setting ``key`` refines
    (``fs.s3a.bucket.lake.endpoint`` → ``fs.s3a.endpoint``); other keys unchanged."""
    head = "fs.s3a.bucket."
    if not key.startswith(head):
        return key
    bucket_and_key = key[len(head) :]
    for name in _KEYS:
        if bucket_and_key.endswith("." + name):
            return "fs.s3a." + name
    return key


def hadoop_settings(location: str, options: Mapping[str, str] | None, environ: Mapping[str, str]) -> dict[str, str]:
    """S3A's settings for the bucket of ``location``, from the AWS variables in ``environ`` with
    ``options`` (``[storage] options``) on top, as the service's client takes them (module doc's
    table); {} for a location not on S3."""
    bucket = bucket_of(location)
    if bucket is None:
        return {}
    given = {k: v for k, v in environ.items() if k.startswith(_ENV_PREFIX)}
    given.update(options or {})
    config, client = client_settings(given)
    wanted: dict[str, str] = {}
    endpoint = config.get("endpoint")
    if endpoint:
        wanted["endpoint"] = str(endpoint)
    region = config.get("region") or config.get("default_region") or (DEFAULT_REGION if endpoint else None)
    if region:
        wanted["endpoint.region"] = str(region)
    virtual = config.get("virtual_hosted_style_request", False)
    virtual = virtual if isinstance(virtual, bool) else str(virtual).lower() == "true"
    wanted["path.style.access"] = "false" if virtual else "true"
    if client.get("allow_http") is True:
        wanted["connection.ssl.enabled"] = "false"
    if config.get("access_key_id") and config.get("secret_access_key"):
        wanted["access.key"] = str(config["access_key_id"])
        wanted["secret.key"] = str(config["secret_access_key"])
        token = config.get("session_token") or config.get("token")
        if token:
            wanted["session.token"] = str(token)
            wanted["aws.credentials.provider"] = TEMPORARY_CREDENTIALS
    return {bucket_prefix(bucket) + key: value for key, value in wanted.items()}


def is_secret(key: str) -> bool:
    """Whether the Hadoop setting ``key`` holds a secret (never print its value)."""
    return any(key.endswith("." + name) or key == name for name in SECRET_KEYS)
