"""Every line ``sharedsub serve`` writes is whole, with stdout and stderr on one unbuffered pipe
(issue 40: ``sharedsub ready amqp://127.0.0.1:376292026-11-28 ...``, once in four starts).

Serve is started :data:`STARTS` times with ``PYTHONUNBUFFERED=1``, stderr into stdout's pipe, and
DEBUG logs as JSON (one object per line, so a record is recognisable whole). Around the ready line
HTTP clients ask for a path that does not exist: every request is a DEBUG line written by one of
serve's HTTP threads (connectors/http/admin.py ``log_message``), and those threads contend for the
GIL with the thread that prints the ready line, so a line can land between the ready line's text
and its newline when they are two writes (the old ``print``). One client asks every
:data:`CALM` seconds from the time the job builds its query; :data:`CLIENTS` ask as fast as they
can from the job's first micro-batch (its DEBUG line comes shortly before the ready line) until
just after the ready line: a short burst, as a longer one starves this small machine. Each line
of the combined output must then be the exact ready line, one JSON log record, or a whole line of
the job's JVM.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from pathlib import Path

import pytest

from sharedsub.runtime.discovery import read_service_file
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e

STARTS = 3
CLIENTS = 3
CALM = 0.02
ENV = {"PYTHONUNBUFFERED": "1", "SHAREDSUB_LOG_LEVEL": "DEBUG", "SHAREDSUB_LOG_FORMAT": "json"}
QUERY_SOON = '"message": "Spark master '  # the job's line just before it starts its query
FIRST_BATCH = '"message": "batch 0: '  # the job's DEBUG line in its first micro-batch, before it reports running

# The JVM's own lines: log4j's (pyspark's default pattern), an exception's lines under one (its
# class and message, its frames, its causes), and the lines it prints once as it starts.
JVM_LINE = re.compile(
    r"\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) [\w$.-]+: .*"
    r"|([a-z_][\w$]*\.)+[A-Z][\w$]*(: .*)?|\t.*|(Caused by|Suppressed): .*"
)
JVM_START = {
    "WARNING: Using incubator modules: jdk.incubator.vector",
    "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties",
    'Setting default log level to "WARN".',
    "To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).",
    'Setting Spark log level to "WARN".',
}


def is_log_record(line: str) -> bool:
    """Whether ``line`` is one JSON log record of sharedsub.runtime.process.logformat."""
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and {"ts", "level", "logger", "message"} <= record.keys()


def torn(lines: list[str], ready_line: str) -> list[str]:
    """The lines that are not whole: each must be ``ready_line``, one JSON log record or a line of
    the JVM's, and no other line may hold a piece of the ready line or of a record."""
    bad = []
    for line in lines:
        if line == ready_line or is_log_record(line):
            continue
        if "sharedsub ready" in line or '{"ts": ' in line or not (line in JVM_START or JVM_LINE.fullmatch(line)):
            bad.append(line)
    return bad


def ask_away(data_dir: Path, stop: threading.Event, pause: float) -> None:
    """GET a missing path of serve's HTTP endpoint until ``stop``, ``pause`` seconds apart, on one
    kept-alive connection (one serve thread per client): one DEBUG line each."""
    info = read_service_file(str(data_dir))
    assert info is not None and info.admin_url
    host, port = info.admin_url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        while not stop.wait(pause):
            try:
                conn.request("GET", "/torn-line-probe")
                conn.getresponse().read()
            except (OSError, http.client.HTTPException):
                conn.close()  # the next request connects again
                time.sleep(0.01)
    finally:
        conn.close()


def start_serve(data_dir: Path) -> tuple[ServeProcess, list[str]]:
    """Start serve on ``data_dir`` with the HTTP clients around its ready line (the module's
    docstring), stop it; return it and the lines it wrote until just after its ready line (not
    those of its stop: pyspark's Python worker of the source prints a traceback when its JVM goes)."""
    svc = ServeProcess(data_dir, env=ENV, one_pipe=True).start(wait=False)
    stop = threading.Event()
    clients: list[threading.Thread] = []

    def ask(pause: float) -> None:
        clients.append(threading.Thread(target=ask_away, args=(data_dir, stop, pause), daemon=True))
        clients[-1].start()

    try:
        svc.wait_log(QUERY_SOON, timeout=300)
        ask(CALM)
        svc.wait_log(FIRST_BATCH, timeout=300)
        for _ in range(CLIENTS):
            ask(0)
        svc.wait_ready()
        time.sleep(0.5)  # lines written just after the ready line are on the pipe too
        lines = list(svc.stdout_lines)
    finally:
        stop.set()
        for client in clients:
            client.join(15)
        assert svc.stop() == 0, svc.log()[-3000:]
    return svc, lines


def test_every_line_on_one_unbuffered_pipe_is_whole_the_ready_line_too(tmp_path: Path) -> None:
    for start in range(STARTS):
        svc, lines = start_serve(tmp_path / f"data-{start}")
        ready_line = f"sharedsub ready {svc.url}"
        assert re.fullmatch(r"sharedsub ready amqp://127\.0\.0\.1:\d+", ready_line), ready_line
        assert lines.count(ready_line) == 1, f"start {start}: the ready line {ready_line!r} is not one whole line"
        assert sum('"logger": "connectors.http.admin"' in line for line in lines) > 10, "the HTTP clients made no log lines"
        bad = torn(lines, ready_line)
        assert not bad, f"start {start}: lines that are not whole: {bad[:5]}"
