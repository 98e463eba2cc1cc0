"""Finding the service that runs on a data dir, and calling its admin endpoint.

``sharedsub serve``/``frontend`` write ``<data>/_service.json`` once they listen
(:func:`write_service_file`) and remove it on a clean stop (:func:`remove_service_file`); a
killed service leaves it behind, so :func:`running_service` also checks that the recorded pid
is alive. The CLI's admin commands (``unsubscribe``, ``topics drop``) call
:func:`call_admin` when a service runs, and work on the tables directly when none does.

Only local data dirs (a path or ``file://``) have the file; on object storage the owner is
found by its lease (sharedsub.runtime.cluster.data_dir_owner.own_data_dir), which names its
addresses but never the token.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any

from sharedsub.core import layout
from sharedsub.core.errors import ServiceUnavailable


@dataclasses.dataclass(frozen=True, slots=True)
class ServiceInfo:
    """What ``_service.json`` records about a running service."""

    pid: int
    amqp_host: str
    amqp_port: int
    http_host: str | None  # None: the HTTP endpoint is off ([server] http_port = -1)
    http_port: int | None
    started_at: float  # seconds since the epoch
    # Bearer token every POST /admin/... must carry (connectors/http/admin.py); None from an
    # older service. Only the service's user can read it: the file is 0600 in a 0700 data dir.
    admin_token: str | None = dataclasses.field(default=None, repr=False)
    # The amqps listener's port on ``amqp_host`` ([security] tls_port); None: no TLS listener
    # (or an older service).
    amqps_port: int | None = None

    @property
    def amqp_url(self) -> str:
        """``amqp://HOST:PORT`` as the ready line prints it."""
        return f"amqp://{self.amqp_host}:{self.amqp_port}"

    @property
    def amqps_url(self) -> str | None:
        """``amqps://HOST:TLS_PORT`` as the ready line prints it, or None without a TLS listener."""
        return None if self.amqps_port is None else f"amqps://{self.amqp_host}:{self.amqps_port}"

    @property
    def admin_url(self) -> str | None:
        """Base URL of the HTTP endpoint (a wildcard listen address is reached on loopback)."""
        if self.http_host is None or self.http_port is None:
            return None
        host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.http_host, self.http_host)
        return f"http://[{host}]:{self.http_port}" if ":" in host else f"http://{host}:{self.http_port}"


def state_home() -> str:
    """This host's state home: ``$XDG_STATE_HOME``, else ``~/.local/state`` (the XDG
    base-directory convention of the host, not a sharedsub setting)."""
    return os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")


def _local(root: str, slot: int = 0) -> str | None:
    """Where ``_service.json`` is: in a local data dir; for one on object storage, in this host's
    state directory (the file holds the admin token, which never goes to the bucket), one file
    per member slot (``_service-<slot>.json`` beside slot 0's): several members of one data dir
    may run on one host."""
    local = layout.local_path(layout.service_file(root))
    if local is not None:
        return local
    name = layout.SERVICE_FILE if slot == 0 else f"_service-{slot}.json"
    return os.path.join(layout.host_state_dir(root, state_home()), name)


def _slots_recorded(root: str) -> list[int]:
    """The member slots with a service file on this host, lowest first ([0] for a local dir)."""
    if layout.local_path(layout.service_file(root)) is not None:
        return [0]
    try:
        names = os.listdir(layout.host_state_dir(root, state_home()))
    except OSError:
        return []
    slots = {0} if layout.SERVICE_FILE in names else set()
    for name in names:
        middle = name.removeprefix("_service-").removesuffix(".json")
        if name.startswith("_service-") and name.endswith(".json") and middle.isdigit():
            slots.add(int(middle))
    return sorted(slots)


def write_service_file(root: str, info: ServiceInfo, slot: int = 0) -> None:
    """Record ``info`` of the member in ``slot`` (atomically: a temporary file, then rename)."""
    path = _local(root, slot)
    if path is None:
        return
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)  # (a host state dir may not exist yet)
    # mkstemp creates it 0600; said again here because the file holds the admin token.
    fd, tmp = tempfile.mkstemp(prefix="._service-", suffix=".tmp", dir=os.path.dirname(path))
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(dataclasses.asdict(info), fh)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read_service_file(root: str, slot: int = 0) -> ServiceInfo | None:
    """The recorded service of member ``slot`` (alive or not), or None."""
    path = _local(root, slot)
    if path is None:
        return None
    try:
        with open(path) as fh:
            return ServiceInfo(**json.load(fh))
    except (OSError, ValueError, TypeError):
        return None


def remove_service_file(root: str, pid: int, slot: int = 0) -> None:
    """Remove member ``slot``'s file if it still names ``pid`` (a newer service's file stays)."""
    info = read_service_file(root, slot)
    path = _local(root, slot)
    if info is not None and info.pid == pid and path is not None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def pid_alive(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def running_services(root: str) -> list[ServiceInfo]:
    """The services (members) of this host running on ``root`` now, lowest slot first."""
    found = [read_service_file(root, slot) for slot in _slots_recorded(root)]
    return [info for info in found if info is not None and pid_alive(info.pid)]


def running_service(root: str) -> ServiceInfo | None:
    """The service running on ``root`` now (of several members on this host, the one in the
    lowest slot), or None (no file, or its pid is gone)."""
    running = running_services(root)
    return running[0] if running else None


# Any: the reply is json.loads's document, which callers read by key
def call_admin(info: ServiceInfo, path: str, body: dict[str, object], *, timeout: float = 60.0) -> dict[str, Any]:
    """POST ``body`` to ``path`` of the service's endpoint with the admin token ``_service.json``
    recorded; return its JSON reply, success (``ok`` true) or a refusal (``ok`` false, see
    sharedsub.core.ops.admin_rules.error_body; ``unauthorized`` when the token is missing or wrong).

    Raises:
        ServiceUnavailable: the endpoint is off, unreachable, or answered something not JSON.
    """
    base = info.admin_url
    if base is None:
        raise ServiceUnavailable(
            f"a service runs on this data dir (pid {info.pid}) with its HTTP endpoint off "
            "([server] http_port = -1); enable it, or stop the service to work offline"
        )
    headers = {"Content-Type": "application/json"}
    if info.admin_token:
        headers["Authorization"] = f"Bearer {info.admin_token}"
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers=headers, method="POST")
    deadline = time.monotonic() + timeout
    try:
        try:
            with urllib.request.urlopen(request, timeout=max(1.0, deadline - time.monotonic())) as reply:
                data = reply.read()
        except urllib.error.HTTPError as exc:  # refusals come with a JSON body
            data = exc.read()
        document = json.loads(data)
    except (OSError, ValueError) as exc:
        raise ServiceUnavailable(
            f"the service on this data dir (pid {info.pid}) did not answer at {base}{path}: {exc}"
        ) from None
    if not isinstance(document, dict):
        raise ServiceUnavailable(f"the service answered {path} with something other than a JSON object")
    return document
