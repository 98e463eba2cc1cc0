"""Spark on a data dir on a real S3 server (versitygw), as a cluster would run it: ``sharedsub
frontend`` on ``s3://``, the fan-out under ``spark-submit`` reading the topics over ``s3a://``
with Delta's own streaming source (``[fanout] source = "delta"``, the form that needs S3A; the
default delta-rs source needs no jars), and then notebooks/backlog.ipynb, whose Spark SQL part
reads the same tables over ``s3a://`` (issue 28, items 1 and 8).

One test, as each part costs a JVM: spark-submit's, then the notebook kernel's.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from proton import Message

from jobs import delta_jars, s3a_jars
from sharedsub.runtime import inspection
from sharedsub.storage.topics import create_topic
from tests.amqp_peer import Subscriber, jms_shared_durable, publish, wait_for
from tests.ops.test_backlog_notebook import run_backlog_notebook
from tests.ops.test_spark_submit import SparkSubmit
from tests.s3_server import SECRET_KEY, S3Server
from tests.service import ServeProcess

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

PUBLISHED, TAKEN = 10, 3
NAME = "app-1:billing"


def test_spark_submit_fanout_and_the_backlog_notebook_on_an_s3_data_dir(
    s3_server: S3Server, s3_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jars = delta_jars.jars() + s3a_jars.jars()
    assert s3a_jars.jars(), f"no S3A jars in {s3a_jars.S3A.directory()} (python3 bootstrap.py setup --object-storage)"
    data = s3_server.url("ops")
    create_topic(data, "orders")
    state = {"XDG_STATE_HOME": str(tmp_path / "state")}  # _service.json and the job's checkpoint
    frontend = ServeProcess(data, command="frontend", env={**s3_server.env(), **state}).start()
    # docs/object-storage.md's form for a local master: the jars on the driver's class path (--jars would
    # copy the 690 MB SDK into the job's scratch directory); the bucket's settings come from the
    # AWS variables, as the front end's do.
    job = SparkSubmit(
        data,
        env={**s3_server.env(), **state, "SHAREDSUB_FANOUT_SOURCE": "delta"},
        spark_args=["--driver-class-path", os.pathsep.join(jars)],
    )
    try:
        job.wait_ready(timeout=600)
        with Subscriber(
            frontend.url, "orders", container_id="app-1", credit=TAKEN, settle="accept", **jms_shared_durable("billing")
        ) as taker:
            taker.wait_attached()
            orders = [
                Message(body=f"order {i}", id=f"order-{i}", properties={"region": "eu" if i % 2 == 0 else "us", "n": i})
                for i in range(PUBLISHED)
            ]
            outcomes = publish(frontend.url, "orders", orders, container_id="shop")
            assert [o.state for o in outcomes] == ["accepted"] * PUBLISHED
            got = taker.wait_count(TAKEN, timeout=300)
            assert [r.message.body for r in got] == [f"order {i}" for i in range(TAKEN)]

            def backlog() -> int:
                return inspection.subscription_status(data, NAME).messages

            wait_for(lambda: backlog() == PUBLISHED - TAKEN, 300, "routed over s3a and 3 acknowledged")
        os.kill(job.driver_pid(), signal.SIGTERM)  # a graceful stop, as in test_spark_submit.py
        assert job.proc.wait(120) == 0, job.log()
    finally:
        job.kill()
        code = frontend.stop()
        assert code == 0, frontend.log()[-3000:]
    job_output = "\n".join(job.stdout) + job.log()
    assert "topic orders: Delta streaming query started" in job_output  # the source that reads over s3a://
    assert SECRET_KEY not in job_output and SECRET_KEY not in frontend.log()

    params, overview, _plot, pending, _eu, spark_sql, summary = run_backlog_notebook(
        data, NAME, tmp_path, monkeypatch, timeout=600
    )
    assert f"data dir: {data}" in params[0]
    assert f"{NAME} (shared durable, generation 1): {PUBLISHED - TAKEN} waiting" in pending[0]
    assert "views: " in spark_sql[0] and "sub_app_1_billing" in spark_sql[0] and "topic_orders" in spark_sql[0]
    assert "s3a://" in spark_sql[0]  # the backlog query names the tables as Spark reads them
    assert f"{NAME}: {PUBLISHED - TAKEN} waiting; the same messages as above: True" in spark_sql[0]
    result = json.loads(next(ln for ln in summary[0].splitlines() if ln.startswith("{")))
    assert result["backlog"] == {NAME: PUBLISHED - TAKEN}
    assert result["spark_sql_seqs"] == list(range(TAKEN, PUBLISHED))
    assert all(SECRET_KEY not in text for text, _kinds in (params, overview, pending, spark_sql, summary))
