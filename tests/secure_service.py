"""A second service for the client tiers' security tests: ``sharedsub frontend`` (no fan-out, so it
starts in seconds) on its own data dir with two users in its users file and a permissions file
(PERMISSIONS), an amqps listener with a throwaway CA (tests/tls_certs.py), anonymous clients
refused (the default once a user exists) and topics created on first use.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sharedsub.runtime import users as uf
from tests.service import ServeProcess
from tests.tls_certs import Certs, make_certs

USER = "tier-user"
PASSWORD = "tier-password-1"
OTHER_USER = "tier-other"
OTHER_PASSWORD = "tier-password-2"

# USER may publish and consume everywhere; OTHER_USER may consume everywhere but publish only to
# topics named open-*, and may not use USER's subscriptions (it has no manage permission).
PERMISSIONS = f"""
[[grant]]
to = "{USER}"
publish = "*"
consume = "*"

[[grant]]
to = "{OTHER_USER}"
publish = "open-*"
consume = "*"
"""


@dataclasses.dataclass
class SecureService:
    """The running process and what clients need to reach it."""

    process: ServeProcess
    certs: Certs
    amqp_url: str  # amqp://127.0.0.1:PORT
    amqps_url: str  # amqps://localhost:PORT (the name the server certificate is for)
    user: str = USER
    password: str = PASSWORD
    other_user: str = OTHER_USER
    other_password: str = OTHER_PASSWORD


def start_secure_service(tmp: Path) -> SecureService:
    """Start it under ``tmp``; stop it with ``.process.stop()``."""
    certs = make_certs(tmp / "certs")
    data = tmp / "secure-data"
    users = uf.add_user(uf.add_user({}, USER, PASSWORD), OTHER_USER, OTHER_PASSWORD)
    uf.save_users(uf.users_path(str(data), ""), users)
    permissions = tmp / "permissions.toml"
    permissions.write_text(PERMISSIONS)
    env = {
        "SHAREDSUB_SECURITY_TLS_PORT": "0",
        "SHAREDSUB_SECURITY_TLS_CERT": str(certs.server_cert),
        "SHAREDSUB_SECURITY_TLS_KEY": str(certs.server_key),
        "SHAREDSUB_SERVER_AUTO_CREATE_TOPICS": "true",
        "SHAREDSUB_SERVER_HTTP_PORT": "-1",
        "SHAREDSUB_SECURITY_PERMISSIONS_FILE": str(permissions),
    }
    proc = ServeProcess(data, command="frontend", env=env, ready_timeout=60).start()
    line = next(ln for ln in proc.stdout_lines if ln.startswith("sharedsub ready "))
    amqps_port = line.split()[3].rsplit(":", 1)[1]
    return SecureService(proc, certs, proc.url, f"amqps://localhost:{amqps_port}")
