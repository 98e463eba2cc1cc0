"""``sharedsub serve`` on a bucket whose S3 server answers like a remote one (issue 42): the
session's versitygw reached through the delay proxy (bench/delay_proxy.py, ``slow_s3_env`` in
tests/conftest.py), every answer 20 ms late, a stand-in for S3 Standard. On loopback a request
costs well under a millisecond, so a change that adds round trips to a commit or a probe passes
the other object-storage tests unseen; here it costs 20 ms each and shows as a timeout.

A short, representative set (the suite is slow enough): publish and consume with rhea, a client
independent of Proton-C (tests/rhea/remote_store.js, driven as the rhea tier drives its files),
and the crash run's kill -9 of ``serve`` under load (tests/crash/driver.py ``crash_run``, as
tests/crash/test_s3_crash.py runs it on loopback): nothing lost, nothing duplicated unless
redelivered.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.crash.driver import FRONTEND, crash_run, passed, seed_for
from tests.rhea.test_rhea_tier import NODE_TIMEOUT, TIER, _check_setup, run_script
from tests.s3_server import S3Server
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(NODE_TIMEOUT + 240)
def test_rhea_publishes_and_consumes_every_message_once_through_a_remote_store(
    s3_server: S3Server, slow_s3_env: dict[str, str], tmp_path: Path
) -> None:
    node = _check_setup()
    data = s3_server.url("remote")
    report = tmp_path / "rhea-junit.xml"
    service = ServeProcess(data, env=slow_s3_env).start()
    try:
        env = dict(os.environ, **slow_s3_env, SHAREDSUB_URL=service.url, SHAREDSUB_DATA_DIR=data,
                   SHAREDSUB_PYTHON=sys.executable, NODE_NO_WARNINGS="1")
        ok = run_script(node, TIER / "remote_store.js", env, report)
    finally:
        code = service.stop()
    assert len(ok) == 1, ok
    assert code == 0, f"serve on {data} exited with {code}:\n" + "\n".join(service.stderr_lines[-40:])


@pytest.mark.timeout(600)
def test_sigkill_of_serve_under_load_through_a_remote_store(
    s3_server: S3Server, slow_s3_env: dict[str, str], tmp_path: Path
) -> None:
    result = crash_run(
        s3_server.url("crash"),
        seed=seed_for("remote s3 serve-kill run"),
        kills=1,
        frontend_share=1.0,
        steady_share=1.0,  # the kill lands while messages flow end to end: mid-commit on the bucket
        gap=(0.5, 2.0),
        drain_timeout=120.0,
        env=slow_s3_env,
        logs_dir=tmp_path / "logs",
        progress=print,
    )
    report = passed(result)
    assert [k.kind for k in result.kills] == [FRONTEND] and result.kills[0].recovered_after is not None, report
    assert result.counts.get("accepted", 0) > 0 and len(result.log.incarnations) == 2, report
