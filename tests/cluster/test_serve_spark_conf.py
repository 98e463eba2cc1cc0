"""``sharedsub serve`` with its embedded fan-out on ``local-cluster[2,1,768]``, made to fit by
``[fanout] spark_conf`` (issue 40): without ``spark.executor.memory = "512m"`` the job stops with
"Asked to launch cluster with 768 MiB/worker but requested 1024 MiB/executor" (tests/cluster/conftest.py's
gotcha); with it serve comes up and routes a message. A cluster of its own (serve's child starts
it), so this costs a serve start plus a cluster's (see the conftest: ~40 s for the cluster alone)."""

from __future__ import annotations

from pathlib import Path

import pytest
from proton import Message

from sharedsub.storage.topics import create_topic
from tests.amqp_peer import Subscriber, jms_shared_durable, publish
from tests.cluster.conftest import CLUSTER_MASTER
from tests.service import ServeProcess

pytestmark = pytest.mark.spark


def test_serve_on_a_local_cluster_with_spark_conf_comes_up_and_routes(tmp_path: Path) -> None:
    config = tmp_path / "sharedsub.toml"
    config.write_text(f'[fanout]\nspark_master = "{CLUSTER_MASTER}"\nspark_conf = {{ "spark.executor.memory" = "512m" }}\n')
    data = tmp_path / "data"
    create_topic(str(data), "orders")
    svc = ServeProcess(data, extra_args=["--config", str(config)], env={"SPARK_LOCAL_IP": "127.0.0.1"}, ready_timeout=420)
    svc.start()
    try:
        assert f"Spark master {CLUSTER_MASTER}" in svc.wait_log(f"Spark master {CLUSTER_MASTER}")
        with Subscriber(svc.url, "orders", settle="accept", **jms_shared_durable("billing")) as sub:
            sub.wait_attached()
            outcomes = publish(svc.url, "orders", [Message(body="order 1", id="order-1")])
            assert [o.state for o in outcomes] == ["accepted"]
            got = sub.wait_count(1, timeout=300)
            assert [r.message.body for r in got] == ["order 1"]
        # The job's executor check (jobs/executor_check.py) passed on the cluster's executors,
        # which run the driver's Python (ServeProcess sets PYSPARK_PYTHON).
        assert f"executors checked (master {CLUSTER_MASTER}):" in svc.log()
    finally:
        code = svc.stop()
    assert code == 0, svc.log()[-3000:]
