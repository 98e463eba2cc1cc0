"""The object-store interface on an S3-compatible bucket (sharedsub.storage.objects.store has the contract).

Built on ``obstore`` (Python bindings of the Rust ``object_store`` crate, the client delta-rs
itself uses), so the service's own requests and delta-rs's read the same settings the same way:
the standard AWS variables (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_REGION``, ``AWS_ALLOW_HTTP``, ...) and the ``[storage] options`` table, whose keys are the
ones delta-rs takes as storage options (:func:`client_settings` translates them).

Conditional writes are S3's own: ``If-None-Match: *`` for put-if-absent and ``If-Match`` for
put-if-match (a store that ignores them is found at start: sharedsub.storage.objects.probe).

Retries: the client retries 5xx answers, dropped connections and timeouts itself, for at most
:data:`RETRY_TIMEOUT` per request; what still fails is a :class:`StoreFailure` (``transient``),
and the caller's fault handling decides (the committer holds publishers, then refuses them).
A conditional put the client retried after an answer was lost may find its own write: callers
that must know re-read the object (the Delta commit path compares commit ids).
"""

from __future__ import annotations

import datetime as dt
import errno
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

import obstore
from obstore import exceptions as obx
from obstore.store import S3Store as _ObstoreS3

if TYPE_CHECKING:
    from obstore.store import ClientConfig, S3Config

from sharedsub.core.publish.write_faults import store_errno
from sharedsub.storage.objects.request_counts import REQUESTS
from sharedsub.storage.objects.store import (
    AlreadyExists,
    ObjectMeta,
    ObjectNotFound,
    PreconditionFailed,
    StoredObject,
    StoreFailure,
)

RETRY_TIMEOUT = dt.timedelta(seconds=10)  # a request's retries end after this; then StoreFailure
CONNECT_TIMEOUT = dt.timedelta(seconds=5)
REQUEST_TIMEOUT = dt.timedelta(seconds=30)

# [storage] options keys (delta-rs spelling, any case, with or without "aws_") that are the
# HTTP client's, not the S3 configuration's.
_CLIENT_KEYS = {"allow_http", "allow_invalid_certificates", "connect_timeout", "timeout", "proxy_url"}
_RENAMED = {"endpoint_url": "endpoint", "endpoint_url_s3": "aws_endpoint_url_s3"}
_TRUE = {"true", "1", "yes", "on"}


def client_settings(options: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:  # Any: obstore's configs
    """``[storage] options`` as (S3 configuration, HTTP client options) for obstore. Keys may be
    spelled as delta-rs takes them (``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``) or as object_store
    names them (``endpoint``, ``allow_http``). ``AWS_S3_ADDRESSING_STYLE=path|virtual`` becomes
    ``virtual_hosted_style_request``."""
    config: dict[str, Any] = {}  # Any: obstore's S3Config values are str or bool by key
    client: dict[str, Any] = {}  # Any: ... and ClientConfig's str, bool or timedelta
    for raw, value in options.items():
        key = raw.lower()
        key = key[4:] if key.startswith("aws_") else key
        key = _RENAMED.get(key, key)
        if key == "s3_addressing_style":
            config["virtual_hosted_style_request"] = value.lower() == "virtual"
        elif key in _CLIENT_KEYS:
            client[key] = value.lower() in _TRUE if key.startswith("allow_") else value
        else:
            config[key] = value
    return config, client


def _failure(exc: Exception, what: str, root: str) -> StoreFailure:
    """A StoreFailure that names what failed and what to check (never a secret: obstore's
    messages carry the request URL and the server's answer, not the credentials)."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    # obstore says "<kind>: Error performing PUT <url> in <time> - <cause>: <the server's XML>":
    # the cause is what helps; the XML and the timing do not.
    text = text.split(" - ", 1)[-1].split(": <?xml", 1)[0][:200]
    if isinstance(exc, obx.UnauthenticatedError | obx.PermissionDeniedError):
        return StoreFailure(
            f"object store {root} refused the credentials for {what} (check AWS_ACCESS_KEY_ID / "
            f"AWS_SECRET_ACCESS_KEY or [storage] options): {text}",
            transient=False,
        )
    if "NoSuchBucket" in str(exc):
        return StoreFailure(f"object store {root}: the bucket does not exist ({what})", transient=False)
    if isinstance(exc, obx.UnknownConfigurationKeyError):
        return StoreFailure(f"object store {root}: unknown setting in [storage] options: {text}", transient=False)
    return StoreFailure(
        f"object store {root} did not answer {what} (check AWS_ENDPOINT_URL or [storage] options, "
        f"and that the store is up): {text}",
        transient=True,
        # A store that did not answer is held through like a full disk (write_faults); an
        # answer outside those kinds is still transient, named by the dropped connection.
        code=store_errno(str(exc)) or errno.ECONNREFUSED,
    )


def _meta(key: str, raw: Mapping[str, Any]) -> ObjectMeta:  # Any: obstore's ObjectMeta TypedDict values
    modified: dt.datetime = raw["last_modified"]
    return ObjectMeta(key, int(raw["size"]), str(raw.get("e_tag") or ""), int(modified.timestamp() * 1000))


class S3Store:
    """:class:`~sharedsub.storage.objects.store.ObjectStore` on ``s3://BUCKET/PREFIX``."""

    def __init__(self, root: str, options: Mapping[str, str] | None = None) -> None:
        if not root.startswith("s3://") or len(root) <= len("s3://"):
            raise ValueError(f"not an s3:// location: {root!r}")
        self._root = root.rstrip("/")
        bucket_and_prefix = self._root[len("s3://") :]
        self._prefix = bucket_and_prefix.split("/", 1)[1] + "/" if "/" in bucket_and_prefix else ""
        # The client reads the AWS variables itself, except the HTTP client's (AWS_ALLOW_HTTP, ...)
        # once client options are given, as they are here (timeouts): those are read here, and
        # [storage] options win over them.
        from_env = {name: value for name, value in os.environ.items() if name.lower()[4:] in _CLIENT_KEYS}
        config, client = client_settings({**from_env, **(options or {})})
        client.setdefault("connect_timeout", CONNECT_TIMEOUT)
        client.setdefault("timeout", REQUEST_TIMEOUT)
        try:
            self._store = _ObstoreS3(
                bucket_and_prefix.split("/", 1)[0],
                config=cast("S3Config", config),
                client_options=cast("ClientConfig", client),
                retry_config={"retry_timeout": RETRY_TIMEOUT},
            )
        except obx.BaseError as exc:
            raise _failure(exc, "its settings", self._root) from None

    @property
    def root(self) -> str:
        """ObjectStore.root: the location as given."""
        return self._root

    def _path(self, key: str) -> str:
        if key.startswith("/") or ".." in key.split("/"):
            raise ValueError(f"not a key under the store's root: {key!r}")
        return self._prefix + key

    def _missing(self, exc: Exception, key: str, what: str) -> ObjectNotFound | StoreFailure:
        """A 404: no such object, or no such bucket (S3 answers both with 404)."""
        if "NoSuchBucket" in str(exc):
            return _failure(exc, f"{what} {key}", self._root)
        return ObjectNotFound(key)

    def _key(self, path: str) -> str:
        return path[len(self._prefix) :]

    # ------------------------------------------------------------------ reads

    def get(self, key: str) -> StoredObject:
        """ObjectStore.get: The whole object and its meta. Raises ObjectNotFound."""
        REQUESTS.add("get", self._path(key))
        try:
            got = obstore.get(self._store, self._path(key))
            return StoredObject(bytes(got.bytes()), _meta(key, got.meta))
        except FileNotFoundError as exc:
            raise self._missing(exc, key, "GET") from None
        except obx.BaseError as exc:
            raise _failure(exc, f"GET {key}", self._root) from None

    def head(self, key: str) -> ObjectMeta:
        """ObjectStore.head: Its size, tag and time, without the body. Raises ObjectNotFound."""
        REQUESTS.add("head", self._path(key))
        try:
            return _meta(key, obstore.head(self._store, self._path(key)))
        except FileNotFoundError as exc:
            raise self._missing(exc, key, "HEAD") from None
        except obx.BaseError as exc:
            raise _failure(exc, f"HEAD {key}", self._root) from None

    def list(self, prefix: str, *, after: str | None = None) -> Iterator[ObjectMeta]:
        """ObjectStore.list: Every object whose key starts with ``prefix``, in key order (nothing when
        none); with ``after``, only keys greater than it."""
        # object_store lists whole path segments: the directory part of the prefix is listed
        # and the rest of it filtered here.
        directory = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        listed = self._path(directory) if directory else self._prefix.rstrip("/") or None
        REQUESTS.add("list", listed or "")
        try:
            offset = self._path(after) if after is not None else None
            for chunk in obstore.list(self._store, listed, offset=offset):
                for raw in chunk:
                    path = str(raw["path"])
                    if path.startswith(self._prefix + prefix):
                        yield _meta(self._key(path), raw)
        except (obx.BaseError, FileNotFoundError) as exc:
            raise _failure(exc, f"LIST {prefix or '/'}", self._root) from None

    # ------------------------------------------------------------------ writes

    def put(self, key: str, data: bytes) -> ObjectMeta:
        """ObjectStore.put: Create or replace ``key`` atomically and durably; the new object's meta."""
        return self._put(key, data, None)

    def put_if_absent(self, key: str, data: bytes) -> ObjectMeta:
        """ObjectStore.put_if_absent: ``put`` only when nothing has ``key``. Raises AlreadyExists (nothing written)."""
        return self._put(key, data, "create")

    def put_if_match(self, key: str, data: bytes, etag: str) -> ObjectMeta:
        """ObjectStore.put_if_match: ``put`` only when ``key``'s tag is ``etag``. Raises PreconditionFailed (changed or gone)."""
        return self._put(key, data, {"e_tag": etag})

    def _put(self, key: str, data: bytes, mode: Any) -> ObjectMeta:  # Any: obstore's PutMode union
        kind = "put" if mode is None else "put_if_absent" if mode == "create" else "put_if_match"
        REQUESTS.add(kind, self._path(key))
        try:
            result = obstore.put(self._store, self._path(key), data, mode=mode, use_multipart=False)
        except obx.AlreadyExistsError:
            raise AlreadyExists(key) from None
        except obx.PreconditionError:
            raise PreconditionFailed(key, "changed since the tag was read, or gone") from None
        except FileNotFoundError as exc:
            missing = self._missing(exc, key, "PUT")
            raise PreconditionFailed(key, "gone") if isinstance(missing, ObjectNotFound) else missing from None
        except obx.BaseError as exc:
            raise _failure(exc, f"PUT {key}", self._root) from None
        now = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
        return ObjectMeta(key, len(data), str(result.get("e_tag") or ""), now)

    def delete(self, key: str) -> None:
        """ObjectStore.delete: Remove ``key`` (no error when it is not there)."""
        REQUESTS.add("delete", self._path(key))
        try:
            obstore.delete(self._store, self._path(key))
        except FileNotFoundError as exc:
            if isinstance(self._missing(exc, key, "DELETE"), StoreFailure):
                raise _failure(exc, f"DELETE {key}", self._root) from None
        except obx.BaseError as exc:
            raise _failure(exc, f"DELETE {key}", self._root) from None
