"""The rhea tier: wire-level checks with an AMQP 1.0 client that shares no code with Proton-C.

Every other wire test drives the service with python-qpid-proton, the engine the service itself
runs on, so a frame both ends encode the same wrong way goes unnoticed (an empty source terminus
on refusals did). This wrapper takes a real ``sharedsub serve`` (the client tiers' one of
tests/conftest.py, which the Qpid JMS tier drives too; the S3 run starts its own), runs the Node test files
``tests/rhea/*.test.js`` (rhea, Node's AMQP 1.0 implementation, pinned in package.json) with
``node --test``, reads the JUnit report and fails naming every failed Node test with its message.

It fails, never skips, when node or ``tests/rhea/node_modules`` (``npm ci --prefix tests/rhea``)
is missing, or when fewer tests ran than the files declare.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.s3_server import S3Server
from tests.secure_service import start_secure_service
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e

TIER = Path(__file__).resolve().parent
MIN_TESTS = 43  # the tier as committed; a file that vanishes must not pass unnoticed
NODE_TIMEOUT = 360  # seconds for the whole node run (it takes about a minute)


def _test_files() -> list[Path]:
    return sorted(TIER.glob("*.test.js"))


def _declared_tests(files: list[Path]) -> int:
    """Top-level ``test(`` calls in the tier's files: how many tests must have run."""
    return sum(len(re.findall(r"^test\(", f.read_text(), flags=re.MULTILINE)) for f in files)


def _check_setup() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on the PATH: the rhea tier needs Node.js 20 (node --test)")
    pinned = json.loads((TIER / "package.json").read_text())["dependencies"]["rhea"]
    installed = TIER / "node_modules" / "rhea" / "package.json"
    if not installed.exists():
        pytest.fail(f"{TIER / 'node_modules'} has no rhea: run `npm ci --prefix tests/rhea`")
    version = json.loads(installed.read_text())["version"]
    if version != pinned:
        pytest.fail(f"tests/rhea/node_modules has rhea {version}, package.json pins {pinned}: run `npm ci --prefix tests/rhea`")
    return node


def _message(case: ET.Element) -> str:
    """The failure text of a JUnit testcase, without stack frames, kept short."""
    parts = []
    for failure in case.findall("failure") + case.findall("error"):
        text = failure.text or failure.get("message") or ""
        # node writes "[Error [ERR_TEST_FAILURE]: <message>\n<diff>] {\n  code: ..., cause: ...}":
        # keep the message and the diff, drop the repeated cause and the stack frames.
        lines = []
        for ln in text.splitlines():
            stripped = ln.strip()
            if stripped.startswith(("code:", "cause:", "failureType:")):
                break
            if stripped and not stripped.startswith("at "):
                lines.append(ln.rstrip())
        first = re.sub(r"^\[Error \[ERR_TEST_FAILURE\]: ", "", lines[0]) if lines else ""
        body = "\n".join([first, *lines[1:25]])
        parts.append(re.sub(r"\] \{$", "", body))
    return "\n".join(parts) or (case.get("failure") or "failed")


def _results(report: Path) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """(passed, failed with message, skipped) test names from node's JUnit report."""
    root = ET.parse(report).getroot()
    passed, failed, skipped = [], [], []
    for case in root.iter("testcase"):
        name = case.get("name") or "?"
        if case.find("failure") is not None or case.find("error") is not None or case.get("failure"):
            failed.append((name, _message(case)))
        elif case.find("skipped") is not None:
            skipped.append(name)
        else:
            passed.append(name)
    return passed, failed, skipped


def run_script(node: str, script: Path, env: Mapping[str, str], report: Path) -> list[str]:
    """Run one rhea script that is not part of the tier (a test that needs a service of its
    own) with ``node --test``; fail naming every failed or skipped Node test; the passed ones."""
    cmd = [node, "--test", "--test-reporter=junit", f"--test-reporter-destination={report}", str(script)]
    run = subprocess.run(cmd, cwd=TIER, env=dict(env), capture_output=True, text=True, timeout=NODE_TIMEOUT)
    assert report.exists(), f"node --test wrote no JUnit report (exit {run.returncode}):\n{(run.stdout + run.stderr)[-4000:]}"
    ok, failed, skipped = _results(report)
    assert not failed, "\n\n".join(f"--- {name}\n{message}" for name, message in failed)
    assert not skipped, skipped
    return ok


@pytest.mark.timeout(NODE_TIMEOUT + 360)  # + starting (Spark) and stopping the service
def test_rhea_tier(tmp_path: Path, client_tier_serve: ServeProcess) -> None:
    node = _check_setup()
    files = _test_files()
    expected = max(_declared_tests(files), MIN_TESTS)
    service = client_tier_serve
    data = service.data_dir
    report = tmp_path / "rhea-junit.xml"
    secure = None
    try:
        # security.test.js talks to a second, secured service (users file, amqps; tests/secure_service.py).
        secure = start_secure_service(tmp_path)
        env = dict(
            os.environ,
            SHAREDSUB_URL=service.url,
            SHAREDSUB_DATA_DIR=str(data),
            SHAREDSUB_PYTHON=sys.executable,
            SHAREDSUB_SECURE_URL=secure.amqps_url,
            SHAREDSUB_SECURE_AMQP_URL=secure.amqp_url,
            SHAREDSUB_SECURE_CA=str(secure.certs.ca),
            SHAREDSUB_SECURE_USER=secure.user,
            SHAREDSUB_SECURE_PASSWORD=secure.password,
            SHAREDSUB_SECURE_OTHER_USER=secure.other_user,
            SHAREDSUB_SECURE_OTHER_PASSWORD=secure.other_password,
            NODE_NO_WARNINGS="1",
        )
        cmd = [
            node,
            "--test",
            "--test-concurrency=1",
            "--test-reporter=spec",
            "--test-reporter-destination=stdout",
            "--test-reporter=junit",
            f"--test-reporter-destination={report}",
            *[str(f) for f in files],
        ]
        try:
            run = subprocess.run(cmd, cwd=TIER, env=env, capture_output=True, text=True, timeout=NODE_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            pytest.fail(f"the rhea tier did not finish within {NODE_TIMEOUT} s:\n{out[-6000:]}")
    finally:
        code = service.proc.poll() if service.proc is not None else None
        secure_code = secure.process.stop() if secure is not None else 0

    alive = code is None
    problems = []
    if not alive:
        # Reported with the node results, which say what the clients saw when it went. (Its
        # clean stop is checked when the session ends: tests/conftest.py.)
        problems.append(f"sharedsub serve died during the tier (exit {code}):\n" + "\n".join(service.stderr_lines[-40:]))
    if secure_code != 0:
        assert secure is not None
        problems.append(
            f"the secured sharedsub frontend did not stop cleanly (exit {secure_code}):\n"
            + "\n".join(secure.process.stderr_lines[-20:])
        )
    output = (run.stdout + "\n" + run.stderr)[-8000:]
    if not report.exists():
        pytest.fail("\n\n".join([*problems, f"node --test wrote no JUnit report (exit {run.returncode}):\n{output}"]))
    passed, failed, skipped = _results(report)
    if failed:
        problems.append(
            f"{len(failed)} rhea test(s) failed:\n" + "\n\n".join(f"--- {name}\n{message}" for name, message in failed)
        )
    if skipped:
        problems.append(f"rhea tests skipped (the tier never skips): {skipped}")
    ran = len(passed) + len(failed) + len(skipped)
    if ran < expected:
        problems.append(f"only {ran} rhea tests ran, {expected} expected (files: {[f.name for f in files]})")
    if run.returncode != 0 and not failed:
        problems.append(f"node --test exited with {run.returncode} without a failed test in its report")
    if problems:
        if not failed:  # the report alone does not explain it
            problems.append(f"node output (tail):\n{output[-3000:]}")
        if alive:
            problems.append("service log (tail):\n" + "\n".join(service.stderr_lines[-20:]))
        # Node failures first, then the service's exit.
        problems.sort(key=lambda p: p.startswith("sharedsub serve"))
        pytest.fail("\n\n".join(problems))


# The representative set run on a bucket (issue 28), by file and test-name prefix: the tests whose
# work reaches storage (redelivery marking and settlement from the ack log, a publish accepted only
# once stored, a message read back from the topic table byte for byte, a pre-settled publish stored,
# the stored source a lookup answers with, a durable subscription's backlog kept or deleted by a
# detach, a session end or connection close). The other tests of these files (drain, anonymous
# relay, refusals of transfers and attaches, the reply sources) are storage-independent: the same
# front end code, which test_rhea_tier runs in full on a local data dir.
S3_TESTS = {
    "delivery.test.js": (
        "redelivery: ",
        "publish: accepted only once stored",
        "round trip: ",
        "publish: a pre-settled message",
    ),
    "replies.test.js": (
        "lookup (null source) answers with the stored source",
        "detach: closed=false keeps a durable subscription",
        "session end and connection close without detach",
    ),
}


def _declared_names(file: Path) -> list[str]:
    """The names of the top-level ``test('...'`` calls of one file."""
    return re.findall(r"^test\('((?:[^'\\]|\\.)*)'", file.read_text(), flags=re.MULTILINE)


@pytest.mark.timeout(NODE_TIMEOUT + 360)
def test_rhea_tier_on_an_s3_data_dir(tmp_path: Path, s3_server: S3Server) -> None:
    """The representative rhea tests (:data:`S3_TESTS`) pass against a ``serve`` whose data dir is
    a bucket on a real S3 server (versitygw)."""
    node = _check_setup()
    files = [TIER / name for name in S3_TESTS]
    prefixes = [p for chosen in S3_TESTS.values() for p in chosen]
    # node applies every pattern to every file: a test is chosen when any prefix starts its name.
    selected = {n for f in files for n in _declared_names(f) if n.startswith(tuple(prefixes))}
    unmatched = [p for p in prefixes if not any(n.startswith(p) for n in selected)]
    assert not unmatched, f"no test in {list(S3_TESTS)} is named as {unmatched}"
    data = s3_server.url("rhea")
    report = tmp_path / "rhea-junit.xml"
    service = ServeProcess(data, env=s3_server.env()).start()
    try:
        env = dict(
            os.environ,
            **s3_server.env(),
            SHAREDSUB_URL=service.url,
            SHAREDSUB_DATA_DIR=data,
            SHAREDSUB_PYTHON=sys.executable,
            NODE_NO_WARNINGS="1",
        )
        cmd = [node, "--test", "--test-concurrency=1", "--test-reporter=junit", f"--test-reporter-destination={report}"]
        cmd += [f"--test-name-pattern=^{re.escape(p)}" for p in prefixes]
        run = subprocess.run([*cmd, *map(str, files)], cwd=TIER, env=env, capture_output=True, text=True, timeout=NODE_TIMEOUT)
    finally:
        code = service.stop()
    assert report.exists(), f"node --test wrote no JUnit report (exit {run.returncode}):\n{(run.stdout + run.stderr)[-4000:]}"
    passed, failed, skipped = _results(report)
    problems = [f"--- {name}\n{message}" for name, message in failed]
    # node reports the tests its name patterns left out as skipped; a chosen one must have passed.
    if set(passed) != selected or selected & set(skipped):
        problems.append(
            f"{len(passed)} passed, {len(failed)} failed, skipped {sorted(selected & set(skipped))}; chosen {sorted(selected)}"
        )
    if code != 0:
        problems.append(f"sharedsub serve on {data} exited with {code}:\n" + "\n".join(service.stderr_lines[-40:]))
    if problems:
        pytest.fail("\n\n".join(problems))
