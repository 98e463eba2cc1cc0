"""SASL and TLS against a real ``sharedsub frontend`` (connectors/amqp/secure_listener.py) with a
users file and an amqps listener configured through SHAREDSUB_SECURITY_* variables, driven by
python-qpid-proton clients (PLAIN and EXTERNAL: proton's client has no SCRAM without Cyrus; the
Qpid JMS tier tests SCRAM) and raw sockets.

One service refuses anonymous clients (users exist; the default); another allows them
(``anonymous = true``) and has short limits for connections still authenticating.
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from proton import Connection, Message, SSLDomain, Transport
from proton.utils import BlockingConnection

from sharedsub.core.security import sasl_frames as sf
from sharedsub.runtime import users as uf
from sharedsub.runtime.discovery import read_service_file
from sharedsub.storage.topics import create_topic
from tests.amqp_peer import wait_for
from tests.service import ROOT, ServeProcess
from tests.tls_certs import Certs, make_certs

pytestmark = pytest.mark.e2e

TOPIC = "secured"
PASSWORD = "alice-pw"


def _start(tmp: Path, certs: Certs, *, server: dict[str, str] | None = None, **security: str) -> ServeProcess:
    data = tmp / "data"
    create_topic(str(data), TOPIC)
    uf.save_users(uf.users_path(str(data), ""), uf.add_user({}, "alice", PASSWORD))
    env = {
        "SHAREDSUB_SECURITY_TLS_PORT": "0",
        "SHAREDSUB_SECURITY_TLS_CERT": str(certs.server_cert),
        "SHAREDSUB_SECURITY_TLS_KEY": str(certs.server_key),
        "SHAREDSUB_SECURITY_TLS_CA": str(certs.ca),
        "SHAREDSUB_SECURITY_EXTERNAL": "true",
        "SHAREDSUB_SERVER_HTTP_PORT": "-1",
        **{f"SHAREDSUB_SECURITY_{k.upper()}": v for k, v in security.items()},
        **{f"SHAREDSUB_SERVER_{k.upper()}": v for k, v in (server or {}).items()},
    }
    return ServeProcess(data, command="frontend", env=env, ready_timeout=60).start()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[ServeProcess]:
    """Users exist, anonymous refused; idle timeout 1 s."""
    proc = _start(tmp_path_factory.mktemp("secured"), certs)
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.log()[-3000:]


@pytest.fixture(scope="module")
def open_service(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[ServeProcess]:
    """Users exist and anonymous = true; 1 s to authenticate, at most 2 connections doing so."""
    proc = _start(
        tmp_path_factory.mktemp("open"), certs, anonymous="true", auth_timeout="1", max_authenticating="2"
    )
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.log()[-3000:]


def _ports(proc: ServeProcess) -> tuple[int, int]:
    line = next(ln for ln in proc.stdout_lines if ln.startswith("sharedsub ready "))
    amqp, amqps = line.split()[2:4]
    return int(amqp.rsplit(":", 1)[1]), int(amqps.rsplit(":", 1)[1])


def _client_tls(certs: Certs, *, client_cert: bool = False) -> SSLDomain:
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(str(certs.ca))
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    if client_cert:
        domain.set_credentials(str(certs.client_cert), str(certs.client_key), None)
    return domain


def _send(url: str, **connect: Any) -> str:
    """Connect, publish one message to the topic; "accepted" or the error the client saw."""
    try:
        conn = BlockingConnection(url, timeout=20, **connect)
    except Exception as exc:  # proton raises ConnectionException / LinkDetached with the condition
        return f"refused: {exc}"
    try:
        sender = conn.create_sender(TOPIC)
        sender.send(Message(body="hello"))
        return "accepted"
    finally:
        conn.close()


def test_ready_line_and_log_name_both_listeners(secured: ServeProcess) -> None:
    assert secured.url.startswith("amqp://")
    amqp, amqps = _ports(secured)
    assert amqp != amqps
    # stderr is read on its own thread: a line written before the ready line may still be on its way.
    secured.wait_log("anonymous clients refused")
    secured.wait_log(f"amqps://127.0.0.1:{amqps}")


@pytest.mark.parametrize("tls", [False, True])
def test_plain_with_the_right_password(secured: ServeProcess, certs: Certs, tls: bool) -> None:
    amqp, amqps = _ports(secured)
    url = f"amqps://localhost:{amqps}" if tls else f"amqp://127.0.0.1:{amqp}"
    extra = {"ssl_domain": _client_tls(certs)} if tls else {}
    result = _send(url, user="alice", password=PASSWORD, allowed_mechs="PLAIN", allow_insecure_mechs=True, **extra)
    assert result == "accepted"


@pytest.mark.parametrize("tls", [False, True])
def test_wrong_password_is_unauthorized(secured: ServeProcess, certs: Certs, tls: bool) -> None:
    amqp, amqps = _ports(secured)
    url = f"amqps://localhost:{amqps}" if tls else f"amqp://127.0.0.1:{amqp}"
    extra = {"ssl_domain": _client_tls(certs)} if tls else {}
    result = _send(url, user="alice", password="wrong", allowed_mechs="PLAIN", allow_insecure_mechs=True, **extra)
    assert "amqp:unauthorized-access" in result
    wait_for(lambda: "wrong password for 'alice'" in secured.log(), 10, "the failure in the log")


def test_sasl_outcome_code_is_auth(secured: ServeProcess) -> None:
    amqp, _ = _ports(secured)
    with socket.create_connection(("127.0.0.1", amqp), timeout=10) as sock:
        sock.sendall(sf.SASL_HEADER + sf.init("PLAIN", b"\0alice\0wrong"))
        frames = _read_sasl(sock)
    assert frames[-1].code == sf.OUTCOME and frames[-1].field(0) == sf.AUTH


@pytest.mark.parametrize("sasl", [True, False])
def test_anonymous_is_refused_when_users_exist(secured: ServeProcess, sasl: bool) -> None:
    amqp, _ = _ports(secured)
    result = _send(f"amqp://127.0.0.1:{amqp}", sasl_enabled=sasl)
    assert result.startswith("refused"), result


def test_external_maps_the_certificate_cn_to_a_user(secured: ServeProcess, certs: Certs) -> None:
    _, amqps = _ports(secured)
    result = _send(f"amqps://localhost:{amqps}", ssl_domain=_client_tls(certs, client_cert=True), allowed_mechs="EXTERNAL")
    assert result == "accepted"


def test_an_authenticated_connection_that_goes_silent_is_dropped(tmp_path: Path, certs: Certs) -> None:
    """The idle timeout works through the secure listener: proton's transport ticks on it."""
    proc = _start(tmp_path, certs, server={"idle_timeout": "1"})
    try:
        amqp, _ = _ports(proc)
        with socket.create_connection(("127.0.0.1", amqp), timeout=10) as sock:
            sock.sendall(sf.SASL_HEADER + sf.init("PLAIN", f"\0alice\0{PASSWORD}".encode()) + _amqp_open())
            started = time.monotonic()
            received = _read_until_closed(sock, 10)
        assert time.monotonic() - started < 8
        assert b"amqp:resource-limit-exceeded" in received  # proton's idle-timeout close
    finally:
        assert proc.stop() == 0


# ---------------------------------------------------------------- anonymous allowed, limits


@pytest.mark.parametrize("sasl", [True, False])
def test_anonymous_when_configured(open_service: ServeProcess, sasl: bool) -> None:
    amqp, _ = _ports(open_service)
    assert _send(f"amqp://127.0.0.1:{amqp}", sasl_enabled=sasl) == "accepted"
    assert "anonymous clients allowed" in open_service.log()


def test_passwords_are_still_checked_when_anonymous_is_allowed(open_service: ServeProcess) -> None:
    amqp, _ = _ports(open_service)
    ok = _send(f"amqp://127.0.0.1:{amqp}", user="alice", password=PASSWORD, allowed_mechs="PLAIN", allow_insecure_mechs=True)
    bad = _send(f"amqp://127.0.0.1:{amqp}", user="alice", password="nope", allowed_mechs="PLAIN", allow_insecure_mechs=True)
    assert ok == "accepted" and "amqp:unauthorized-access" in bad


@pytest.mark.parametrize("tls", [False, True])
def test_a_client_that_does_not_authenticate_is_closed_after_auth_timeout(open_service: ServeProcess, tls: bool) -> None:
    amqp, amqps = _ports(open_service)
    with socket.create_connection(("127.0.0.1", amqps if tls else amqp), timeout=10) as sock:
        started = time.monotonic()
        _read_until_closed(sock, 8)
        assert 0.5 < time.monotonic() - started < 5


def test_connections_still_authenticating_are_capped(open_service: ServeProcess) -> None:
    amqp, _ = _ports(open_service)
    idle = [socket.create_connection(("127.0.0.1", amqp), timeout=10) for _ in range(2)]
    try:
        time.sleep(0.3)
        with socket.create_connection(("127.0.0.1", amqp), timeout=10) as third:
            started = time.monotonic()
            assert _read_until_closed(third, 5) == b""
            assert time.monotonic() - started < 0.8  # closed at accept, not by the auth timeout
    finally:
        for s in idle:
            s.close()
    wait_for(lambda: "security.max_authenticating" in open_service.log(), 10, "the refusal in the log")
    time.sleep(1.5)  # the two idle ones are gone by now: a client gets in again
    assert _send(f"amqp://127.0.0.1:{amqp}") == "accepted"


def test_tls_client_without_a_trusted_server_cert_fails_handshake(open_service: ServeProcess) -> None:
    _, amqps = _ports(open_service)
    ctx = ssl.create_default_context()  # the system CAs: our throwaway CA is not among them
    with socket.create_connection(("127.0.0.1", amqps), timeout=10) as raw:
        with pytest.raises(ssl.SSLCertVerificationError):
            ctx.wrap_socket(raw, server_hostname="localhost")


# ---------------------------------------------------------------- raw helpers


def _amqp_open() -> bytes:
    """AMQP header + open frame, as proton's client transport writes them (no SASL layer)."""
    transport = Transport()
    conn = Connection()
    conn.container = "silent-client"
    transport.bind(conn)
    conn.open()
    return transport.peek(transport.pending())


def _read_sasl(sock: socket.socket) -> list[sf.Frame]:
    buf = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
    assert buf.startswith(sf.SASL_HEADER)
    frames, rest = [], buf[8:]
    while rest:
        frame, used = sf.decode(rest)
        if frame is None:
            break
        frames.append(frame)
        rest = rest[used:]
    return frames


def _read_until_closed(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except ConnectionResetError:
        pass
    return out



# ------------------------------------------------------------------ secure by default (sharedsub.core.security.exposure)


def _frontend_on_all_addresses(data: Path, **env: str) -> ServeProcess:
    return ServeProcess(data, command="frontend", extra_args=["--host", "0.0.0.0"], env=env, ready_timeout=60)


def test_no_users_on_a_network_address_refuses_to_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = subprocess.run(
        [sys.executable, "-m", "sharedsub", "frontend", "--data-dir", str(data), "--host", "0.0.0.0", "--port", "0"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if not k.startswith("SHAREDSUB_")},
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "sharedsub ready" not in done.stdout
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr[-2000:]
    for needed in ("'server.host'", "0.0.0.0", "[server] host", "[security] users_file", '[security] anonymous = "true"'):
        assert needed in errors[0]
    assert not (data / "_service.json").exists()


def test_anonymous_true_accepts_the_risk_and_warns(tmp_path: Path) -> None:
    svc = _frontend_on_all_addresses(tmp_path / "data", SHAREDSUB_SECURITY_ANONYMOUS="true").start()
    try:
        assert svc.ready and svc.url.startswith("amqp://0.0.0.0:")
        log = svc.wait_log("anonymous clients may connect from the network on amqp://0.0.0.0:")
        assert "WARNING" in log
        port = int(svc.url.rsplit(":", 1)[1])
        connection = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=10)
        connection.close()
        info = read_service_file(str(svc.data_dir))
        assert info is not None and info.http_host == "127.0.0.1"  # the HTTP endpoint stays on loopback
    finally:
        assert svc.stop() == 0


def test_with_a_user_a_network_address_is_fine(tmp_path: Path) -> None:
    data = tmp_path / "data"
    uf.save_users(uf.users_path(str(data), ""), uf.add_user({}, "alice", PASSWORD))
    svc = _frontend_on_all_addresses(data).start()
    try:
        assert svc.ready
        log = svc.wait_log("anonymous clients refused")
        assert "may connect from the network" not in log
    finally:
        assert svc.stop() == 0
