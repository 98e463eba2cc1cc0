"""A TCP proxy that hands every answer back late: a loopback S3 server made to answer like a remote one.

    .venv/bin/python bench/delay_proxy.py --target 127.0.0.1:9000 --delay-ms 20 [--port 0] [--jitter-ms 0] [--trace FILE]

Issue 42: on loopback a request to versitygw costs well under a millisecond, a real S3 answers a
small request in 10–30 ms; in front of the server this proxy stands for that distance, so a change
that adds round trips shows (bench/run.py ``--store-delay-ms``, the suite's ``slow_s3_env``,
tests/s3_server.py).

The contract:

* It listens on 127.0.0.1 (``--port``, 0 = a free one) and, once it accepts connections, prints
  exactly one line ``delay_proxy listening on 127.0.0.1:<port>`` on stdout (flushed).
* Each accepted connection gets its own connection to ``--target``. What the client sends is
  passed on at once; every chunk the target sends back is handed to the client ``--delay-ms``
  after it arrived from the target (plus up to ``--jitter-ms``, drawn per chunk, never
  reordering), in order per connection. So each request/answer exchange on a kept-alive HTTP
  connection costs one extra delay, and connections do not wait for each other.
* A side that closes closes the other once the bytes already on their way to it are delivered
  (the target's answers still wait out their delay). A target that does not answer a connect
  closes the client's connection.
* SIGTERM (or SIGINT) closes the listener and every connection and ends with status 0.

Standard library only (asyncio). :class:`DelayProxy` runs it as a child process for the tests
and the benchmarks: a context manager that waits for the ready line and names its ``endpoint``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

READY = "delay_proxy listening on"
SCRIPT = Path(__file__).resolve()
CHUNK = 256 * 1024


_REQUEST_STARTS = (b"GET ", b"PUT ", b"HEAD", b"POST", b"DELE")


async def _client_to_target(client: asyncio.StreamReader, target: asyncio.StreamWriter, trace: TextIO | None = None) -> None:
    """Pass the client's bytes on at once; close the target's side at the client's end. With
    ``trace``, a chunk that starts an HTTP request writes a line: wall time, connection, request
    line (how a message's requests follow each other: bench/RESULTS.md, "where a batch's round
    trips went")."""
    try:
        while data := await client.read(CHUNK):
            if trace is not None and data[:4] in _REQUEST_STARTS:
                line = data[:300].split(b"\r\n", 1)[0].decode(errors="replace")
                trace.write(f"{time.time():.4f} {id(client)} {line}\n")
                trace.flush()
            target.write(data)
            await target.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        target.close()


class _Held:
    """The chunks from the target not yet handed to the client, each with the loop time it is due;
    a timer at the first one's due time hands over every chunk then due (no task per chunk: the
    proxy's own cost per answer stays well under a millisecond)."""

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.loop = asyncio.get_running_loop()
        self.chunks: collections.deque[tuple[float, bytes]] = collections.deque()
        self.last_due = 0.0
        self.ended = False  # the target closed: close the client after the last chunk
        self.done = self.loop.create_future()

    def hold(self, data: bytes, due: float) -> None:
        # Jitter never reorders: a chunk is not due before the one ahead of it.
        self.last_due = max(due, self.last_due)
        self.chunks.append((self.last_due, data))
        if len(self.chunks) == 1:
            self._hand_at(self.last_due)

    def end(self) -> None:
        self.ended = True
        if not self.chunks:
            self._close()

    def _hand_at(self, due: float) -> None:
        if due <= self.loop.time():
            self._hand()
        else:
            self.loop.call_at(due, self._hand)

    def _hand(self) -> None:
        now = self.loop.time()
        while self.chunks and self.chunks[0][0] <= now:
            data = self.chunks.popleft()[1]
            if not self.client.is_closing():
                self.client.write(data)
        if self.chunks:
            self._hand_at(self.chunks[0][0])
        elif self.ended:
            self._close()

    def _close(self) -> None:
        self.client.close()
        if not self.done.done():
            self.done.set_result(None)


async def _target_to_client(target: asyncio.StreamReader, client: asyncio.StreamWriter, delay: float, jitter: float) -> None:
    """Hand each chunk from the target to the client ``delay`` (+ jitter) after it came, in order;
    close the client's side once the last one is handed over."""
    held = _Held(client)
    try:
        while data := await target.read(CHUNK):
            held.hold(data, held.loop.time() + delay + (random.uniform(0.0, jitter) if jitter else 0.0))
    except (ConnectionError, OSError):
        pass
    finally:
        held.end()
        await held.done


class Proxy:
    """The proxy's connections in this event loop (what ``main`` runs; tests may run it in-process)."""

    def __init__(self, target: tuple[str, int], delay: float, jitter: float = 0.0, trace: TextIO | None = None) -> None:
        self.target = target
        self.delay = delay
        self.jitter = jitter
        self.trace = trace
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None

    async def listen(self, port: int = 0) -> int:
        """Start accepting on 127.0.0.1:``port``; return the port."""
        self._server = await asyncio.start_server(self._accepted, "127.0.0.1", port)
        bound: int = self._server.sockets[0].getsockname()[1]
        return bound

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
            except OSError:
                writer.close()  # nothing behind the proxy: the client sees its connection closed
                return
            await asyncio.gather(
                _client_to_target(reader, up_writer, self.trace),
                _target_to_client(up_reader, writer, self.delay, self.jitter),
            )
        finally:
            self._tasks.discard(task)

    async def close(self) -> None:
        """Stop accepting and end every connection."""
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


async def _serve(target: tuple[str, int], delay: float, jitter: float, port: int, trace: TextIO | None) -> None:
    proxy = Proxy(target, delay, jitter, trace)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    bound = await proxy.listen(port)
    print(f"{READY} 127.0.0.1:{bound}", flush=True)
    await stop.wait()
    await proxy.close()


def main(argv: list[str] | None = None) -> int:
    """Run the proxy until SIGTERM."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", type=_address, required=True, help="HOST:PORT the proxy forwards to")
    p.add_argument("--delay-ms", type=float, required=True, help="ms every chunk from the target is held back")
    p.add_argument("--jitter-ms", type=float, default=0.0, help="up to this many ms more, drawn per chunk (default 0)")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 to listen on (default 0: a free one)")
    p.add_argument(
        "--trace",
        default=os.environ.get("DELAY_PROXY_TRACE"),
        help="append each request's time, connection and request line to this file "
        "(default: $DELAY_PROXY_TRACE, which the benchmarks' proxies inherit; unset: none)",
    )
    args = p.parse_args(argv)
    if args.delay_ms < 0 or args.jitter_ms < 0:
        p.error("--delay-ms and --jitter-ms must not be negative")
    with open(args.trace, "a", encoding="utf-8") if args.trace else contextlib.nullcontext() as trace:
        asyncio.run(_serve(args.target, args.delay_ms / 1000.0, args.jitter_ms / 1000.0, args.port, trace))
    return 0


class DelayProxy:
    """``bench/delay_proxy.py`` as a child process: started on entering (waits for its ready line),
    stopped (SIGTERM, then SIGKILL) on leaving. Its stderr goes to ``log`` when one is given."""

    def __init__(self, target: str, delay_ms: float, *, jitter_ms: float = 0.0, port: int = 0, log: Path | None = None) -> None:
        self.target = target  # HOST:PORT
        self.delay_ms = delay_ms
        self.jitter_ms = jitter_ms
        self.port = port  # the bound one once started
        self.log_path = log
        self.proc: subprocess.Popen[str] | None = None

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``: what a client is pointed at instead of the target."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> DelayProxy:
        """Start the process and wait for its ready line."""
        cmd = [
            sys.executable,
            str(SCRIPT),
            "--target",
            self.target,
            "--delay-ms",
            f"{self.delay_ms:g}",
            "--jitter-ms",
            f"{self.jitter_ms:g}",
            "--port",
            str(self.port),
        ]
        with open(self.log_path or "/dev/null", "a") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True
            )
        text = _first_line(self.proc, timeout)
        if not text.startswith(READY):
            self.stop()
            raise RuntimeError(f"delay_proxy did not start within {timeout:.0f} s (said {text!r}; rc {self.proc.returncode})")
        self.port = int(text.rsplit(":", 1)[1])
        return self

    def stop(self) -> None:
        """SIGTERM, wait up to 10 s, then SIGKILL."""
        if self.proc is None or self.proc.poll() is not None:
            return
        end_process(self.proc)
        with contextlib.suppress(OSError):
            assert self.proc.stdout is not None
            self.proc.stdout.close()

    def __enter__(self) -> DelayProxy:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def end_process(proc: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """SIGTERM ``proc``, wait up to ``timeout`` seconds, then SIGKILL it (and reap it)."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _first_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """The first line ``proc`` prints ('' when it prints none within ``timeout`` s)."""
    line: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        line.append(proc.stdout.readline())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    return line[0].strip() if line else ""


if __name__ == "__main__":
    sys.exit(main())
