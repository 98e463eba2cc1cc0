"""The Qpid JMS tier: JUnit tests (tests/jms/src/test/java) drive a real ``sharedsub serve``
through the Jakarta Messaging API of the Apache Qpid JMS client.

This wrapper runs ``mvn test`` against a running server (the full run against the client tiers'
serve of tests/conftest.py, the S3 and two-member runs against ones they start) with the
server's URL, data dir and Python (the Java tests create their topics with ``python -m sharedsub topics create``), and fails
listing every failed or errored Java test. It never skips: a missing ``mvn`` or fewer Java tests
run than the sources define is a failure too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.members import MEMBERS
from tests.s3_server import S3Server
from tests.secure_service import start_secure_service
from tests.service import ROOT, ServeProcess
from tests.tls_certs import java_truststore

JMS_DIR = Path(__file__).resolve().parent
POM = JMS_DIR / "pom.xml"
TEST_SOURCES = JMS_DIR / "src" / "test" / "java"
REPORTS = JMS_DIR / "target" / "surefire-reports"

# Maven's first run downloads the client and plugins; the tests themselves take a few minutes.
MVN_TIMEOUT = 1500.0

pytestmark = pytest.mark.e2e


# Needs two members of one data dir on object storage: run by its own test below, not by the others.
CLUSTER_CLASS = "ClusterTest"


def defined_tests(*, cluster: bool = False) -> dict[str, int]:
    """``@Test`` methods per Java test class, counted in the sources (the cluster class only
    when ``cluster``, else every other one)."""
    counts: dict[str, int] = {}
    for path in sorted(TEST_SOURCES.rglob("*Test.java")):
        if (path.stem == CLUSTER_CLASS) != cluster:
            continue
        n = len(re.findall(r"^\s*@Test\b", path.read_text(encoding="utf-8"), flags=re.MULTILINE))
        if n:
            counts[path.stem] = n
    return counts


def read_reports(reports: Path) -> tuple[int, list[str]]:
    """(tests run, one line per failed/errored/skipped test) from surefire's TEST-*.xml."""
    ran = 0
    problems: list[str] = []
    for xml in sorted(reports.glob("TEST-*.xml")):
        root = ET.parse(xml).getroot()
        for case in root.iter("testcase"):
            ran += 1
            name = f"{case.get('classname', '?').rsplit('.', 1)[-1]}.{case.get('name', '?')}"
            for kind in ("failure", "error", "skipped"):
                for node in case.findall(kind):
                    message = (node.get("message") or "").strip()
                    detail = (node.text or "").strip().splitlines()
                    if not message and detail:
                        message = detail[0]
                    problems.append(f"{kind.upper()} {name}: {node.get('type', '')}: {message}")
    return ran, problems


@pytest.mark.timeout(MVN_TIMEOUT + 300)
def test_qpid_jms_tier(tmp_path: Path, client_tier_serve: ServeProcess) -> None:
    """Every Java test of the tier passes against a running server (the client tiers' one,
    tests/conftest.py, which the rhea tier drives too)."""
    mvn = shutil.which("mvn")
    assert mvn is not None, "mvn (Apache Maven) is not on the PATH: the Qpid JMS tier cannot run"
    expected = defined_tests()
    assert expected, f"no @Test methods found under {TEST_SOURCES}"

    for stale in (REPORTS, JMS_DIR / "target" / "test-classes"):
        if stale.exists():
            shutil.rmtree(stale)  # never read a previous run's reports, nor run a deleted test's class
    server = client_tier_serve
    data = server.data_dir
    log_path = tmp_path / "mvn.log"
    secure = None
    try:
        # SecurityTest talks to a second, secured service (users file, amqps; tests/secure_service.py).
        secure = start_secure_service(tmp_path)
        trust_store = java_truststore(secure.certs, tmp_path / "truststore.p12")
        cmd = [
            mvn,
            "-B",
            "-f",
            str(POM),
            "test",
            f"-Dtest=!{CLUSTER_CLASS}",
            f"-Dsharedsub.url={server.url}",
            f"-Dsharedsub.dataDir={data}",
            f"-Dsharedsub.python={sys.executable}",
            f"-Dsharedsub.secureUrl={secure.amqps_url}",
            f"-Dsharedsub.secureAmqpUrl={secure.amqp_url}",
            f"-Dsharedsub.trustStore={trust_store}",
            f"-Dsharedsub.secureUser={secure.user}",
            f"-Dsharedsub.securePassword={secure.password}",
            f"-Dsharedsub.secureOtherUser={secure.other_user}",
            f"-Dsharedsub.secureOtherPassword={secure.other_password}",
        ]
        with log_path.open("w") as log:
            try:
                proc = subprocess.run(
                    cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, timeout=MVN_TIMEOUT
                )
                rc: int | None = proc.returncode
            except subprocess.TimeoutExpired:
                rc = None
    finally:
        code = server.proc.poll() if server.proc is not None else None
        secure_code = secure.process.stop() if secure is not None else 0

    problems: list[str] = []
    if code is not None:
        # A server that died mid-run fails every later Java test with "Connection refused":
        # say so first, with its own last words. (Its clean stop is checked when the session ends.)
        problems.append(f"sharedsub serve died during the tier (exit {code}):\n" + "\n".join(server.stderr_lines[-40:]))
    if secure_code != 0:
        assert secure is not None
        problems.append(
            f"the secured sharedsub frontend did not stop cleanly (exit {secure_code}):\n"
            + "\n".join(secure.process.stderr_lines[-20:])
        )
    mvn_tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-60:])
    if rc is None:
        problems.append(f"mvn test did not finish within {MVN_TIMEOUT:.0f} s; log {log_path}:\n{mvn_tail}")

    ran, failed = read_reports(REPORTS)
    total = sum(expected.values())
    summary = f"{ran} Java tests ran ({total} defined: {expected}); mvn exit code {rc}; log {log_path}"
    if failed:
        problems.append(f"{len(failed)} Java test(s) did not pass:\n" + "\n".join(failed))
    if ran < total:
        problems.append(f"fewer Java tests ran than defined:\n{mvn_tail}")
    if rc not in (0, None) and not failed:
        problems.append(f"mvn test failed without a failing test report:\n{mvn_tail}")
    if problems:
        pytest.fail("\n\n".join([*problems, summary]), pytrace=False)


# The representative set run on a bucket (issue 28): the Java tests whose work reaches storage
# (a consumer kind's subscription tables, the topic lookup, acknowledgements and redeliveries in the
# ack log, dead-lettering, an unsubscribe's deleted backlog, a transaction's commit or rollback of
# publishes and acks together, a later connection reading the stored subscription). The other
# methods of these classes are storage-independent: client-side refusals, the classic API's and
# JMSContext's forms of the same calls, dispatch among consumers; test_qpid_jms_tier runs them all
# on a local data dir, through the same front end code.
S3_TESTS = {
    "ConsumerKindsTest": (
        "sharedDurableConsumerWithClientIdReceives",
        "sharedDurableConsumerWithoutClientIdReceives",
        "sharedConsumerReceives",
        "durableConsumerWithClientIdReceives",
        "plainTopicConsumerGetsOnlyWhatIsPublishedAfterItExists",
        "consumerOnUnknownTopicIsInvalidDestination",
    ),
    "AcknowledgeTest": (
        "recoverRedeliversUnacknowledgedMessagesAndAcknowledgedOnesNeverComeAgain",
        "closingAConsumerWithPrefetchedMessagesClientAcknowledge",
        "aMessageTheClientRejectsAfterTooManyRedeliveriesNeverComesAgain",
        "unacknowledgedMessagesOfAClosedConnectionGoToTheOtherSharedConsumer",
    ),
    "UnsubscribeTest": (
        "unsubscribeAfterCloseDropsTheBacklogAndTheNextConsumerGetsOnlyNewMessages",
        "unsubscribeSharedDurableAfterAllConsumersClosed",
        "unsubscribeWithClientIdFromALaterConnection",
    ),
    "TransactionTest": (
        "committedPublishIsDeliveredWhole",
        "rolledBackPublishIsNeverDelivered",
        "transactedConsumerThatCommitsDoesNotSeeTheMessagesAgain",
        "transactedConsumerThatRollsBackGetsTheMessagesAgain",
        "consumeAndPublishInOneTransaction",
        "aTransactionOfAClosedConnectionIsNeverCommitted",
    ),
}


def defined_methods(test_class: str) -> set[str]:
    """The names of the ``@Test`` methods of one Java test class, read from its source."""
    source = next(TEST_SOURCES.rglob(f"{test_class}.java"), None)
    if source is None:
        return set()
    return set(re.findall(r"^\s*@Test\b[^{;]*?\bvoid\s+(\w+)\s*\(", source.read_text(encoding="utf-8"), flags=re.MULTILINE))


def clear_reports() -> None:
    """Remove a previous run's surefire reports before a run of chosen Java tests. The compiled
    classes stay: Maven compiles again what changed, the run names its classes and methods (a
    class whose source is gone is never chosen: the callers check the sources first), and a
    compile of the tier costs ~3.5 s here, twice in every full run when each run deleted them."""
    if REPORTS.exists():
        shutil.rmtree(REPORTS)


@pytest.mark.timeout(MVN_TIMEOUT + 300)
def test_qpid_jms_tier_on_an_s3_data_dir(tmp_path: Path, s3_server: S3Server) -> None:
    """The representative Java tests (:data:`S3_TESTS`) pass against a ``serve`` whose data dir is
    a bucket on a real S3 server (versitygw); the Java tests' topic creation goes to the bucket too."""
    mvn = shutil.which("mvn")
    assert mvn is not None, "mvn (Apache Maven) is not on the PATH: the Qpid JMS tier cannot run"
    missing = {f"{c}#{m}" for c, methods in S3_TESTS.items() for m in set(methods) - defined_methods(c)}
    assert not missing, f"@Test methods missing from {TEST_SOURCES}: {sorted(missing)}"
    expected = {name: len(methods) for name, methods in S3_TESTS.items()}
    selection = ",".join(f"{c}#{'+'.join(methods)}" for c, methods in S3_TESTS.items())  # surefire: Class#m1+m2
    clear_reports()
    data = s3_server.url("jms")
    log_path = tmp_path / "mvn.log"
    server = ServeProcess(data, env=s3_server.env()).start()
    try:
        cmd = [
            mvn,
            "-B",
            "-f",
            str(POM),
            "test",
            f"-Dtest={selection}",
            "-Dsurefire.failIfNoSpecifiedTests=false",
            f"-Dsharedsub.url={server.url}",
            f"-Dsharedsub.dataDir={data}",
            f"-Dsharedsub.python={sys.executable}",
        ]
        with log_path.open("w") as log:
            try:
                rc: int | None = subprocess.run(
                    cmd,
                    cwd=ROOT,
                    env={**os.environ, **s3_server.env()},
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=MVN_TIMEOUT,
                ).returncode
            except subprocess.TimeoutExpired:
                rc = None
    finally:
        code = server.stop()
    fail_on_problems(expected, log_path, rc, server, code, data)


def fail_on_problems(
    expected: dict[str, int], log_path: Path, rc: int | None, server: ServeProcess, code: int | None, data: str
) -> None:
    """Fail listing what went wrong in a run of some of the Java classes against a ``serve`` on
    ``data`` (exit ``code``): a test that did not pass, fewer tests run than ``expected``, mvn
    (exit ``rc``, None: timed out) or the service failing."""
    ran, failed = read_reports(REPORTS)
    mvn_tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-60:])
    total = sum(expected.values())
    problems = [f"{len(failed)} Java test(s) did not pass:\n" + "\n".join(failed)] if failed else []
    if code != 0:
        problems.append(f"sharedsub serve on {data} exited with {code}:\n" + "\n".join(server.stderr_lines[-40:]))
    if ran < total or rc is None:
        problems.append(f"{ran} of {total} Java tests ran (mvn exit {rc}):\n{mvn_tail}")
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


@pytest.mark.timeout(MVN_TIMEOUT + 300)
def test_qpid_jms_tier_on_two_members(tmp_path: Path, s3_server: S3Server) -> None:
    """ClusterTest (Java) against two members of one bucket data dir (issue 30): ``serve`` and
    ``frontend`` with ``[cluster] max_members = 2``; the Java test kills the second member last
    (its pid is passed), and a Qpid JMS consumer on a failover URI carries on on the first."""
    mvn = shutil.which("mvn")
    assert mvn is not None, "mvn (Apache Maven) is not on the PATH: the Qpid JMS tier cannot run"
    expected = defined_tests(cluster=True)
    assert set(expected) == {CLUSTER_CLASS}, f"{CLUSTER_CLASS} missing from {TEST_SOURCES}"
    clear_reports()
    data = s3_server.url("jms-members")
    env = {**s3_server.env(), **MEMBERS}
    log_path = tmp_path / "mvn.log"
    first = ServeProcess(data, env=env).start()
    second = None
    try:
        second = ServeProcess(data, command="frontend", env=env).start()
        cmd = [
            mvn, "-B", "-f", str(POM), "test", f"-Dtest={CLUSTER_CLASS}", "-Dsurefire.failIfNoSpecifiedTests=false",
            f"-Dsharedsub.url={first.url}", f"-Dsharedsub.secondUrl={second.url}", f"-Dsharedsub.secondPid={second.pid}",
            f"-Dsharedsub.dataDir={data}", f"-Dsharedsub.python={sys.executable}",
        ]  # fmt: skip
        with log_path.open("w") as log:
            try:
                rc: int | None = subprocess.run(
                    cmd, cwd=ROOT, env={**os.environ, **env}, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, timeout=MVN_TIMEOUT,
                ).returncode  # fmt: skip
            except subprocess.TimeoutExpired:
                rc = None
    finally:
        if second is not None:
            second.kill()  # (the Java test killed it already when it got that far)
        code = first.stop()
    fail_on_problems(expected, log_path, rc, first, code, data)
