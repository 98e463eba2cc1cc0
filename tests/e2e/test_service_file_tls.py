"""The discovery file and the ready line of a real ``sharedsub serve`` with an amqps listener
(issue 12): ``<data>/_service.json`` records the amqps port next to the amqp one, the ready line
names both URLs, and the bench's ready-line parser (bench/sharedsub_service.py) reads them apart.

The server certificate comes from a throwaway CA (tests/tls_certs.py); the one user in the users
file publishes over amqps with PLAIN (python-qpid-proton's client has no SCRAM).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest
from proton import Message, SSLDomain
from proton.utils import BlockingConnection

from sharedsub.runtime import users as uf
from sharedsub.runtime.discovery import read_service_file
from sharedsub.storage.topics import create_topic
from tests.service import ROOT, ServeProcess
from tests.tls_certs import Certs, make_certs

pytestmark = pytest.mark.e2e

TOPIC = "tls-discovery"
USER, PASSWORD = "bob", "bob-password-1"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls_serve(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[ServeProcess]:
    """``serve`` (with its fan-out job) with one user and an amqps listener on a free port."""
    data = tmp_path_factory.mktemp("tls-serve") / "data"
    create_topic(str(data), TOPIC)
    uf.save_users(uf.users_path(str(data), ""), uf.add_user({}, USER, PASSWORD))
    env = {
        "SHAREDSUB_SECURITY_TLS_PORT": "0",
        "SHAREDSUB_SECURITY_TLS_CERT": str(certs.server_cert),
        "SHAREDSUB_SECURITY_TLS_KEY": str(certs.server_key),
    }
    proc = ServeProcess(data, env=env).start()
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.log()[-3000:]


def _ready_line(proc: ServeProcess) -> str:
    return next(ln for ln in proc.stdout_lines if ln.startswith("sharedsub ready "))


def _bench_service_module() -> ModuleType:
    """bench/sharedsub_service.py, imported the way the bench scripts do (bench/ on sys.path)."""
    bench = str(ROOT / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    return importlib.import_module("sharedsub_service")


def test_ready_line_names_both_listeners(tls_serve: ServeProcess) -> None:
    words = _ready_line(tls_serve).split()
    assert words[2] == tls_serve.url and tls_serve.url.startswith("amqp://")
    assert words[3] == tls_serve.tls_url and tls_serve.tls_url.startswith("amqps://")


def test_service_file_records_the_amqps_listener(tls_serve: ServeProcess) -> None:
    info = read_service_file(str(tls_serve.data_dir))
    assert info is not None and info.pid == tls_serve.pid
    assert info.amqp_url == tls_serve.url
    assert info.amqps_url == tls_serve.tls_url
    assert tls_serve.tls_url is not None and info.amqps_port == int(tls_serve.tls_url.rsplit(":", 1)[1])
    assert info.amqps_port != info.amqp_port


def test_the_recorded_amqps_port_takes_a_tls_client(tls_serve: ServeProcess, certs: Certs) -> None:
    info = read_service_file(str(tls_serve.data_dir))
    assert info is not None and info.amqps_port is not None
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(str(certs.ca))
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    conn = BlockingConnection(
        f"amqps://localhost:{info.amqps_port}", timeout=30, ssl_domain=domain,
        user=USER, password=PASSWORD, allowed_mechs="PLAIN",
    )
    try:
        sender = conn.create_sender(TOPIC)
        sender.send(Message(body="over tls", durable=True))  # raises unless accepted
    finally:
        conn.close()


def test_bench_parser_reads_both_urls_from_the_ready_line(tls_serve: ServeProcess) -> None:
    bench = _bench_service_module()
    assert bench.parse_ready_line(_ready_line(tls_serve)) == (tls_serve.url, tls_serve.tls_url)


def test_without_tls_the_file_and_the_parser_say_so(service: ServeProcess) -> None:
    """The e2e session's plain ``serve`` (conftest): no amqps port anywhere."""
    info = read_service_file(str(service.data_dir))
    assert info is not None and info.amqps_port is None and info.amqps_url is None
    assert service.tls_url is None
    assert _bench_service_module().parse_ready_line(_ready_line(service)) == (service.url, None)
