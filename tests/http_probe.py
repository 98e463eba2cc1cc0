"""GET /health and /metrics of a running ``sharedsub serve`` (found through its discovery file)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from sharedsub.runtime.discovery import read_service_file, running_services
from tests.prometheus_text import Labels, parse
from tests.service import ServeProcess


def admin_url(svc: ServeProcess) -> str:
    """The service's HTTP base URL, as its ``_service.json`` records it (of several members of
    one data dir on this host, the file that names this process)."""
    pid = svc.proc.pid if svc.proc is not None else None
    found = [info for info in running_services(str(svc.data_dir)) if info.pid == pid]
    info = found[0] if found else read_service_file(str(svc.data_dir))
    assert info is not None and info.admin_url, f"no HTTP endpoint recorded in {svc.data_dir}"
    return info.admin_url


def health(svc: ServeProcess) -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON document) of GET /health; a 503 is an answer, not an error."""
    try:
        with urllib.request.urlopen(f"{admin_url(svc)}/health", timeout=30) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def scrape(svc: ServeProcess) -> dict[tuple[str, Labels], float]:
    """The samples of GET /metrics (checks the Prometheus text content type)."""
    with urllib.request.urlopen(f"{admin_url(svc)}/metrics", timeout=30) as reply:
        assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return parse(reply.read().decode())[1]
