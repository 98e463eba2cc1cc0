"""Requests counted where they arrive: versitygw's S3 server access log (``--access-log FILE``,
tests/s3_server.py ``S3Server(access_log=...)``), read back line by line.

Every request any client made is there, the service's own (obstore) and delta-rs's (commits,
table loads, the fan-out job's reads), which sharedsub's ``/metrics`` cannot see. versitygw
v1.8.0 writes one line per request, before it answers, in the S3 server access log format::

    OWNER BUCKET [27/November/2026:09:54:16 +0000] IP REQUESTER REQUEST_ID s3_PutObject KEY URI
    STATUS ERROR BYTES_SENT OBJECT_SIZE TOTAL_MS TURNAROUND_MS REFERER USER_AGENT ...

Its timestamps have one-second resolution, so a window is taken by file offsets instead
(:meth:`AccessLog.mark`, then :meth:`AccessLog.since`). Clients are told apart by user agent:
obstore and delta-rs each bundle their own version of Rust's ``object_store`` crate, so their
agents differ; :func:`calibrate` makes one request with each and returns which agent is which.
"""

from __future__ import annotations

import collections
import os
import re
import urllib.parse
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sharedsub.storage.objects.request_counts import family

_LINE = re.compile(
    r"^(?P<owner>\S+) (?P<bucket>\S+) \[(?P<time>[^\]]+)\] (?P<ip>\S+) (?P<requester>\S+) (?P<request_id>\S+) "
    r"(?P<operation>\S+) (?P<key>\S+) (?P<uri>\S+) (?P<status>\S+) (?P<error>\S+) (?P<bytes_sent>\S+) "
    r"(?P<object_size>\S+) (?P<total_ms>\S+) (?P<turnaround_ms>\S+) (?P<referer>\S+) (?P<user_agent>\S+)"
)

# S3 operations by the verb the brief and docs/object-storage.md count in.
_VERBS = {
    "s3_GetObject": "GET",
    "s3_HeadObject": "HEAD",
    "s3_PutObject": "PUT",
    "s3_ListObjectsV2": "LIST",
    "s3_ListObjects": "LIST",
    "s3_DeleteObject": "DELETE",
    "s3_DeleteObjects": "DELETE",
    "s3_HeadBucket": "HEAD",
}


@dataclass(frozen=True, slots=True)
class Request:
    """One line of the access log."""

    verb: str  # GET, HEAD, PUT, LIST, DELETE, or the S3 operation without ``s3_``
    key: str  # bucket-relative key; for a LIST, its prefix
    status: int  # HTTP status (0 when the log has none)
    total_ms: int  # the server's time for the request, ms
    user_agent: str

    @property
    def family(self) -> str:
        """topics, subscriptions, catalog, cluster, fanout, changes, users or other (the families of
        ``sharedsub_object_store_requests_total``)."""
        return family(self.key)

    @property
    def part(self) -> str:
        """``log`` (a Delta log entry, checkpoint or the log's listing), ``data`` (a Parquet
        file) or ``object`` (anything else: leases, parked rows, statistics)."""
        if "_delta_log" in self.key:
            return "log"
        if self.key.endswith(".parquet"):
            return "data"
        return "object"


def parse(line: str) -> Request | None:
    """The request of one access-log line; None for any other line (the log's first line says
    when it started)."""
    m = _LINE.match(line)
    if m is None:
        return None
    op = m["operation"]
    key = m["key"]
    if key == "-":  # a bucket-level request: a LIST names its prefix in the query
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(m["uri"]).query)
        key = query.get("prefix", [""])[0]
    return Request(
        verb=_VERBS.get(op, op.removeprefix("s3_")),
        key=key,
        status=int(m["status"]) if m["status"].isdigit() else 0,
        total_ms=int(m["total_ms"]) if m["total_ms"].isdigit() else 0,
        user_agent=m["user_agent"],
    )


class AccessLog:
    """The access log file of a running versitygw, read in windows."""

    def __init__(self, path: str) -> None:
        self.path = path

    def mark(self) -> int:
        """The offset of the end of the log now: a window starts (or ends) here."""
        try:
            return os.path.getsize(self.path)
        except FileNotFoundError:
            return 0

    def since(self, start: int, end: int | None = None) -> list[Request]:
        """The requests logged between offsets ``start`` and ``end`` (default: the end now);
        a line the server was still writing at ``end`` is left out."""
        with open(self.path, "rb") as f:
            f.seek(start)
            raw = f.read() if end is None else f.read(max(0, end - start))
        complete = raw[: raw.rfind(b"\n") + 1]
        return [r for r in (parse(line) for line in complete.decode(errors="replace").splitlines()) if r is not None]


def counts(requests: Iterable[Request], clients: Mapping[str, str]) -> collections.Counter[tuple[str, str, str]]:
    """Requests by ``(client, verb, family)``; ``clients`` names user agents (:func:`calibrate`),
    others keep their agent as their name."""
    out: collections.Counter[tuple[str, str, str]] = collections.Counter()
    for r in requests:
        out[(clients.get(r.user_agent, r.user_agent), r.verb, r.family)] += 1
    return out


CALIBRATION_KEY = "_bench_calibration"


def calibrate(log: AccessLog, bucket_url: str, storage_options: Mapping[str, str]) -> dict[str, str]:
    """``{user agent: client}`` for ``sharedsub`` (its object store, obstore) and ``delta-rs``:
    one request by each against ``bucket_url`` (``s3://BUCKET``), found in the log by its key.
    Both ask for an absent key under :data:`CALIBRATION_KEY`; nothing is written."""
    from deltalake import DeltaTable

    from sharedsub.storage.objects import open_store
    from sharedsub.storage.objects.store import ObjectNotFound

    probe = f"{CALIBRATION_KEY}/{uuid.uuid4().hex}"
    start = log.mark()
    try:
        open_store(bucket_url, storage_options).head(f"{probe}/sharedsub")
    except ObjectNotFound:
        pass
    DeltaTable.is_deltatable(f"{bucket_url}/{probe}/delta-rs", storage_options=dict(storage_options))
    found: dict[str, str] = {}
    for r in log.since(start):
        for client in ("sharedsub", "delta-rs"):
            if r.key.startswith(f"{probe}/{client}"):
                found.setdefault(r.user_agent, client)
    if sorted(found.values()) != ["delta-rs", "sharedsub"]:
        raise RuntimeError(f"could not tell the clients apart by user agent in {log.path}: {found}")
    return found
