"""The HTTP endpoint's hardening (issue 12) against a real ``sharedsub frontend``, with raw
sockets: admin calls need the token from ``_service.json`` (401 without it or with another),
request bodies need a sane Content-Length (400/411/413, never read to end of stream), a slow
client is cut off after ``[server] http_request_timeout`` without holding up anyone else, the
connections served at once are capped, and the endpoint binds loopback unless told otherwise.
GET /health and /metrics stay open; the CLI's admin calls still work."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sharedsub.runtime.discovery import ServiceInfo, read_service_file
from tests.service import ROOT, ServeProcess

pytestmark = pytest.mark.e2e

TIMEOUT = 2.0  # [server] http_request_timeout of the service under test
CAP = 6  # [server] http_max_connections


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    env = {"SHAREDSUB_SERVER_HTTP_REQUEST_TIMEOUT": str(TIMEOUT), "SHAREDSUB_SERVER_HTTP_MAX_CONNECTIONS": str(CAP)}
    # The AMQP listener on another loopback address: the HTTP endpoint stays on 127.0.0.1.
    proc = ServeProcess(tmp_path_factory.mktemp("http"), command="frontend", env=env, extra_args=["--host", "127.0.0.2"])
    proc.start()
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.log()[-3000:]


def _info(svc: ServeProcess) -> ServiceInfo:
    info = read_service_file(str(svc.data_dir))
    assert info is not None and info.http_port and info.admin_token
    return info


def _connect(svc: ServeProcess) -> socket.socket:
    info = _info(svc)
    sock = socket.create_connection(("127.0.0.1", info.http_port), timeout=10)
    return sock


def _read_reply(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a reply: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk
        rest += chunk
    return status, headers, rest[:length]


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _exchange(svc: ServeProcess, raw: bytes) -> tuple[int, dict[str, str], dict]:
    with _connect(svc) as sock:
        sock.sendall(raw)
        status, headers, body = _read_reply(sock)
        return status, headers, json.loads(body)


def _post(path: str, body: bytes, *headers: str) -> bytes:
    head = [f"POST {path} HTTP/1.1", "Host: x", "Content-Type: application/json", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def _bearer(svc: ServeProcess) -> str:
    return f"Authorization: Bearer {_info(svc).admin_token}"


def test_a_post_without_the_token_is_401_and_its_body_unread(svc: ServeProcess) -> None:
    body = b'{"subscription": "x"}'
    with _connect(svc) as sock:
        sock.sendall(_post("/admin/unsubscribe", body, f"Content-Length: {len(body)}"))
        status, headers, reply = _read_reply(sock)
        assert status == 401 and headers["www-authenticate"].startswith("Bearer")
        document = json.loads(reply)
        assert (document["ok"], document["error"], document["exit_code"]) == (False, "unauthorized", 1)
        assert "_service.json" in document["message"]
        assert headers.get("connection") == "close" and _closed_by_server(sock, 5)


@pytest.mark.parametrize("authorization", ["Authorization: Bearer wrong", "Authorization: Basic eDp5", ""])
def test_a_wrong_token_is_401(svc: ServeProcess, authorization: str) -> None:
    extra = [authorization] if authorization else []
    status, _, document = _exchange(svc, _post("/admin/topics/drop", b"{}", "Content-Length: 2", *extra))
    assert (status, document["error"]) == (401, "unauthorized")


def test_unknown_paths_and_other_methods_need_the_token_too(svc: ServeProcess) -> None:
    status, _, _ = _exchange(svc, _post("/anything", b"{}", "Content-Length: 2"))
    assert status == 401
    status, _, _ = _exchange(svc, b"GET /admin/unsubscribe HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 401


def test_with_the_token_the_call_reaches_its_handler(svc: ServeProcess) -> None:
    body = b'{"subscription": "no-such-subscription"}'
    status, _, document = _exchange(svc, _post("/admin/unsubscribe", body, f"Content-Length: {len(body)}", _bearer(svc)))
    assert (status, document["error"]) == (404, "not-found")


@pytest.mark.parametrize(
    ("body", "status", "error", "says"),
    [
        (b'{"topic": "../escape"}', 400, "usage", "invalid topic name '../escape'"),
        (b'{"topic": ""}', 400, "usage", "non-empty string 'topic'"),
        (b'{"topic": 7}', 400, "usage", "non-empty string 'topic'"),
        (b'{"topic": "made-here"}', 200, None, "made-here"),
        (b'{"topic": "made-here"}', 409, "exists", "made-here"),
    ],
)
def test_a_topic_is_created_by_the_admin_call_and_a_bad_name_is_refused(
    svc: ServeProcess, body: bytes, status: int, error: str | None, says: str
) -> None:
    got, _, document = _exchange(svc, _post("/admin/topics/create", body, f"Content-Length: {len(body)}", _bearer(svc)))
    assert (got, document.get("error")) == (status, error), document
    assert says in json.dumps(document)


@pytest.mark.parametrize(
    ("length", "status"),
    [("-1", 400), ("abc", 400), ("1e3", 400), (" +5", 400), (str(2 * 1024 * 1024), 413), (str(10**30), 413)],
)
def test_a_bad_content_length_is_refused_without_reading(svc: ServeProcess, length: str, status: int) -> None:
    with _connect(svc) as sock:
        sock.sendall(_post("/admin/unsubscribe", b"", f"Content-Length: {length}", _bearer(svc)))  # no body sent
        started = time.monotonic()
        got, headers, reply = _read_reply(sock)
        assert time.monotonic() - started < 1.5  # answered at once, not after waiting for a body
        document = json.loads(reply)
        assert (got, document["ok"], document["error"]) == (status, False, "usage")
        assert headers.get("connection") == "close" and _closed_by_server(sock, 5)


def test_a_post_without_content_length_or_chunked_is_411(svc: ServeProcess) -> None:
    status, _, document = _exchange(svc, _post("/admin/unsubscribe", b"", _bearer(svc)))
    assert (status, document["error"]) == (411, "usage")
    chunked = _post("/admin/unsubscribe", b"2\r\n{}\r\n0\r\n\r\n", "Transfer-Encoding: chunked", _bearer(svc))
    status, _, _ = _exchange(svc, chunked)
    assert status == 411


def test_health_and_metrics_need_no_token(svc: ServeProcess) -> None:
    with _connect(svc) as sock:  # one keep-alive connection, two requests
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _read_reply(sock)[0] == 200
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        status, headers, _ = _read_reply(sock)
        assert status == 200 and headers["content-type"].startswith("text/plain")


def test_a_slow_client_is_cut_off_and_blocks_no_one(svc: ServeProcess) -> None:
    silent = _connect(svc)
    silent.sendall(b"POST /admin/unsubscribe HTTP/1.1\r\nHost: x\r\n")  # headers never finished
    body_pending = _connect(svc)
    body_pending.sendall(_post("/admin/unsubscribe", b"{", "Content-Length: 100", _bearer(svc)))
    drip = _connect(svc)
    started = time.monotonic()
    try:
        status, _, _ = _exchange(svc, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")  # meanwhile
        assert status == 200 and time.monotonic() - started < 1.0
        # One byte every 0.3 s keeps every read short: the request's deadline still ends it.
        cut = None
        for byte in b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
            try:
                drip.send(bytes([byte]))
            except OSError:
                cut = time.monotonic() - started
                break
            time.sleep(0.3)
            if _closed_by_server(drip, 0.001):
                cut = time.monotonic() - started
                break
        assert cut is not None and cut < TIMEOUT + 2.0
        assert _closed_by_server(silent, TIMEOUT + 2.0) and _closed_by_server(body_pending, TIMEOUT + 2.0)
    finally:
        for sock in (silent, body_pending, drip):
            sock.close()


def test_connections_beyond_the_cap_are_answered_503(svc: ServeProcess) -> None:
    held = [_connect(svc) for _ in range(CAP)]
    try:
        time.sleep(0.3)
        status, headers, document = _exchange(svc, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (status, document["error"]) == (503, "busy")
    finally:
        for sock in held:
            sock.close()
    deadline = time.monotonic() + TIMEOUT + 5
    while True:  # the closed connections free their threads at once
        status, _, _ = _exchange(svc, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        if status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status == 200


def test_the_endpoint_binds_loopback_and_the_token_is_not_logged(svc: ServeProcess) -> None:
    info = _info(svc)
    assert (info.amqp_host, info.http_host) == ("127.0.0.2", "127.0.0.1")
    assert info.admin_token not in svc.log()
    assert repr(info).count(info.admin_token) == 0


def test_the_cli_sends_the_token(svc: ServeProcess) -> None:
    cli = subprocess.run(
        [sys.executable, "-m", "sharedsub", "unsubscribe", "no-such-subscription", "--data-dir", str(svc.data_dir), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env=dict(os.environ),
    )
    assert cli.returncode == 3, cli.stderr
    assert json.loads(cli.stdout)["error"] == "not-found"  # answered by the service, not a 401


def test_a_token_mismatch_reaches_the_cli_as_an_error(svc: ServeProcess, tmp_path: Path) -> None:
    from sharedsub.runtime.discovery import call_admin

    info = _info(svc)
    forged = ServiceInfo(info.pid, info.amqp_host, info.amqp_port, info.http_host, info.http_port, info.started_at, "nope")
    reply = call_admin(forged, "/admin/unsubscribe", {"subscription": "x"})
    assert (reply["ok"], reply["error"], reply["exit_code"]) == (False, "unauthorized", 1)


def test_cluster_status_of_a_local_data_dir_names_its_one_service_without_its_token(svc: ServeProcess) -> None:
    info = _info(svc)
    cli = subprocess.run(
        [sys.executable, "-m", "sharedsub", "cluster", "status", "--data-dir", str(svc.data_dir), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env=dict(os.environ),
    )
    assert cli.returncode == 0, cli.stderr
    (member,) = json.loads(cli.stdout)["members"]
    assert (member["slot"], member["state"], member["pid"], member["amqp"]) == (0, "running", info.pid, info.amqp_url)
    assert member["http"] == info.admin_url and info.admin_token not in cli.stdout
