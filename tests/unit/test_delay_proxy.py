"""bench/delay_proxy.py, the latency proxy in front of the suite's and the benchmarks' S3 server
(issue 42), run as the process the suite runs (``DelayProxy``) against a small TCP server of
this test: every answer comes at least the delay late, its bytes intact and in order, each
request on a kept-alive connection pays the delay once, and connections do not wait for each other."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.delay_proxy import DelayProxy

DELAY_MS = 50.0


def _pattern(n: int, seed: int) -> bytes:
    return bytes((seed + i * 7) % 251 for i in range(n))


def _answer(conn: socket.socket) -> None:
    """Answer each request line ``<wait ms> <bytes> <seed>`` after ``wait`` ms with that many
    pattern bytes, sent in pieces; until the client closes."""
    with conn, conn.makefile("rb") as lines:
        for line in lines:
            wait_ms, size, seed = (int(x) for x in line.split())
            time.sleep(wait_ms / 1000)
            body = _pattern(size, seed)
            for at in range(0, size, 65536):
                conn.sendall(body[at : at + 65536])


@pytest.fixture(scope="module")
def target() -> Iterator[int]:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=_answer, args=(conn,), daemon=True).start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        acceptor.join(5)
        listener.close()


@pytest.fixture(scope="module")
def proxy(target: int) -> Iterator[DelayProxy]:
    with DelayProxy(f"127.0.0.1:{target}", DELAY_MS) as running:
        yield running


def _ask(sock: socket.socket, wait_ms: int, size: int, seed: int) -> tuple[float, bytes]:
    """Send one request; return (seconds to the whole answer, the answer)."""
    t0 = time.perf_counter()
    sock.sendall(f"{wait_ms} {size} {seed}\n".encode())
    got = bytearray()
    while len(got) < size:
        chunk = sock.recv(1 << 20)
        assert chunk, f"closed after {len(got)} of {size} bytes"
        got += chunk
    return time.perf_counter() - t0, bytes(got)


def test_each_answer_comes_at_least_the_delay_late_intact_and_in_order(proxy: DelayProxy, target: int) -> None:
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as through:
        for seed, size in enumerate([10, 3_000_000, 1, 200_000]):  # one kept-alive connection
            took, answer = _ask(through, 0, size, seed)
            assert answer == _pattern(size, seed)
            assert took >= DELAY_MS / 1000, (size, took)
    with socket.create_connection(("127.0.0.1", target), timeout=10) as direct:
        took_direct, _ = _ask(direct, 0, 10, 0)
    assert took_direct < DELAY_MS / 1000


def test_two_connections_do_not_wait_for_each_other(proxy: DelayProxy) -> None:
    """A connection whose target is slow (1 s) does not hold the answers of another one."""
    slow_took: list[float] = []
    with (
        socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as slow,
        socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as fast,
    ):
        waiting = threading.Thread(target=lambda: slow_took.append(_ask(slow, 1000, 1000, 1)[0]))
        waiting.start()
        time.sleep(0.1)
        fast_took = [_ask(fast, 0, 1000, 2)[0] for _ in range(3)]
        waiting.join(10)
    assert slow_took and slow_took[0] >= 1.0 + DELAY_MS / 1000
    assert all(DELAY_MS / 1000 <= t < 0.9 for t in fast_took), fast_took


def test_the_targets_close_reaches_the_client_after_its_bytes_and_sigterm_ends_it(target: int) -> None:
    with DelayProxy(f"127.0.0.1:{target}", DELAY_MS) as running:
        assert running.endpoint == f"http://127.0.0.1:{running.port}"
        with socket.create_connection(("127.0.0.1", running.port), timeout=10) as sock:
            _ask(sock, 0, 100, 3)
            sock.shutdown(socket.SHUT_WR)  # the client's end closes the target's connection ...
            assert sock.recv(10) == b""  # ... and that close comes back to the client
        assert running.proc is not None
        proc = running.proc
    assert proc.returncode == 0


def test_nothing_behind_the_proxy_closes_the_clients_connection() -> None:
    with socket.create_server(("127.0.0.1", 0)) as placeholder:
        free = placeholder.getsockname()[1]
    with (
        DelayProxy(f"127.0.0.1:{free}", DELAY_MS) as running,
        socket.create_connection(("127.0.0.1", running.port), timeout=10) as sock,
    ):
        assert sock.recv(10) == b""


def test_with_a_trace_file_each_request_line_is_written_with_its_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``DELAY_PROXY_TRACE`` (inherited by the proxy the suite and benchmarks start): one line
    per HTTP request, its wall time, connection and request line; other bytes write none."""
    trace = tmp_path / "trace.txt"
    monkeypatch.setenv("DELAY_PROXY_TRACE", str(trace))
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def answer() -> None:
            conn, _ = listener.accept()
            with conn:
                for _ in range(2):
                    conn.recv(1000)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

        server = threading.Thread(target=answer, daemon=True)
        server.start()
        with (
            DelayProxy(f"127.0.0.1:{listener.getsockname()[1]}", DELAY_MS) as running,
            socket.create_connection(("127.0.0.1", running.port), timeout=10) as sock,
        ):
            before = time.time()
            for request in (b"PUT /bucket/a/b.json HTTP/1.1\r\nHost: x\r\n\r\n", b"GET /bucket/c HTTP/1.1\r\n\r\n"):
                sock.sendall(request)
                assert sock.recv(100).startswith(b"HTTP/1.1 200")
        server.join(10)
    lines = [line.split(" ", 2) for line in trace.read_text().splitlines()]
    assert [line[2] for line in lines] == ["PUT /bucket/a/b.json HTTP/1.1", "GET /bucket/c HTTP/1.1"]
    assert all(before - 1 <= float(line[0]) <= time.time() for line in lines)
    assert lines[0][1] == lines[1][1]  # one connection
