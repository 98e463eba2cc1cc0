"""notebooks/replay.ipynb executed headless (nbclient, a real IPython kernel) against a real
``sharedsub serve`` with a python-qpid-proton consumer attached, with its outputs checked and the
replayed messages received again by that consumer.

The data dir (maintenance off in the service; one maintenance pass run here, so the order is known):

1. durable subscription ``app-r:ledger`` on topic ``payments`` takes and accepts messages 0..3;
   the subscription table's version then is the *earlier version* the notebook travels to and
   replays from;
2. a maintenance pass deletes those acknowledged rows (and their ack-log rows) from the current
   table: only the history has them now;
3. messages 4..6 follow; 4 and 5 are accepted, 6 stays unsettled on the link (pending).

Replaying from the earlier version re-delivers 0..5 (0..3 appended back to the table, 4 and 5
opened again in the ack log) and not 6, which is still outstanding.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from proton import Message

from sharedsub.core import layout
from sharedsub.runtime import inspection, maintenance
from sharedsub.storage.delta import table_history
from sharedsub.storage.delta.table_reads import read_seqs
from sharedsub.storage.topics import create_topic
from tests.amqp_peer import Received, Subscriber, jms_durable, publish, wait_for
from tests.builders import maintenance_policy
from tests.ops.test_backlog_notebook import _outputs
from tests.s3_server import S3Server
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "replay.ipynb"
TOPIC, CLIENT, NAME = "payments", "app-r", "ledger"
SUBSCRIPTION = f"{CLIENT}:{NAME}"
UNSETTLED = 6  # the message left outstanding on the link


def payment(i: int) -> Message:
    return Message(body=i, id=f"pay-{i}", subject="payment", properties={"n": i})


def settle(got: Received) -> str:
    return "none" if got.message.body == UNSETTLED else "accept"


@pytest.mark.parametrize("where", ["local", "s3"])
def test_replay_notebook_runs_top_to_bottom_and_the_consumer_gets_the_messages_again(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """On a local data dir, and on a bucket of the session's S3 server (the notebook's kernel
    inherits the AWS variables)."""
    env = {"SHAREDSUB_MAINTENANCE_INTERVAL": "0"}
    if where == "local":
        data: Path | str = tmp_path / "data"
        Path(data).mkdir()
    else:
        server: S3Server = request.getfixturevalue("s3_server")
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        env.update(server.env())
        data = server.url()
    create_topic(str(data), TOPIC)
    service = ServeProcess(data, env=env).start()
    try:
        with Subscriber(service.url, TOPIC, container_id=CLIENT, settle=settle, **jms_durable(NAME)) as sub:
            sub.wait_attached()
            status = lambda: inspection.subscription_status(str(data), SUBSCRIPTION)  # noqa: E731
            table = layout.join(str(data), status().record.table)

            # 1. 0..3 routed, delivered and accepted: the earlier version.
            publish(service.url, TOPIC, [payment(i) for i in range(4)], container_id="payer")
            sub.wait_count(4, timeout=180)
            wait_for(lambda: status().messages == 0, 180, "0..3 acknowledged")
            assert sorted(read_seqs(table).to_pylist()) == [0, 1, 2, 3]
            earlier = table_history.history(table)[-1].version

            # 2. maintenance drops the acknowledged rows from the current table.
            policy = maintenance_policy(interval=0, history_retention_hours=168, compact_min_files=1000, min_acked_rows=1)
            report = maintenance.run_once(str(data), policy)
            assert report.acked_rows_deleted == 4 and report.errors == 0
            assert sorted(read_seqs(table).to_pylist()) == []

            # 3. 4..6: 4 and 5 accepted, 6 outstanding.
            publish(service.url, TOPIC, [payment(i) for i in range(4, 7)], container_id="payer")
            sub.wait_count(7, timeout=180)
            wait_for(lambda: status().messages == 1 and sorted(read_seqs(table).to_pylist()) == [4, 5, 6], 180,
                     "4 and 5 acknowledged, 6 outstanding")
            assert all(r.delivery_count == 0 for r in sub.received)

            monkeypatch.setenv("SHAREDSUB_STORAGE_DATA_DIR", str(data))
            monkeypatch.setenv("SHAREDSUB_NOTEBOOK_SUBSCRIPTION", SUBSCRIPTION)
            monkeypatch.setenv("SHAREDSUB_NOTEBOOK_REPLAY_VERSION", str(earlier))
            monkeypatch.delenv("SHAREDSUB_NOTEBOOK_REPLAY", raising=False)
            monkeypatch.delenv("SHAREDSUB_MAINTENANCE_HISTORY_RETENTION_HOURS", raising=False)
            nb = nbformat.read(NOTEBOOK, as_version=4)
            NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
            code = [c for c in nb.cells if c.cell_type == "code"]
            params, history, travel, pending, retention, replay, after, summary = (_outputs(c) for c in code)

            assert f"data dir: {data}" in params[0] and "history retention: 168 h" in params[0]
            assert f"{SUBSCRIPTION}: topic '{TOPIC}'" in history[0] and "text/html" in history[1]
            assert f"earlier point: subscription table version {earlier}" in travel[0] and "text/html" in travel[1]
            assert f"{SUBSCRIPTION} (durable): 1 waiting of 3 routed; 1 consumer(s) attached" in pending[0]
            assert "pay-6" in pending[0]
            assert "a replay can start from version" in retention[0]
            assert f"replayed {SUBSCRIPTION} generation 1 from version {earlier}" in replay[0]
            assert "through the running service, pid" in replay[0]
            assert "subscription table: versions" in after[0]

            line = next(ln for ln in summary[0].splitlines() if ln.startswith("{"))
            result: dict[str, Any] = json.loads(line)
            assert result["data_dir"] == str(data) and result["subscription"] == SUBSCRIPTION
            # History: the routed commits (rows 0..6 added in all), maintenance's delete, versions in order.
            versions = [h["version"] for h in result["history"]]
            assert versions == sorted(versions) and earlier in versions
            assert sum(h["rows_added"] for h in result["history"] if h["operation"] == "WRITE") == 7
            assert "DELETE" in {h["operation"] for h in result["history"]}
            # Time travel: the earlier version still has 0..3, which the current table lost.
            sub_travel, topic_travel = result["time_travel"]["subscription"], result["time_travel"]["topic"]
            assert sub_travel["version"] == earlier
            assert sub_travel["then"] == [0, 1, 2, 3] and sub_travel["now"] == [4, 5, 6]
            assert topic_travel["then"] == [0, 1, 2, 3] and topic_travel["now"] == list(range(7))
            assert result["pending"] == [UNSETTLED]
            assert result["retention_hours"] == 168
            assert result["oldest_replayable_version"] == versions[0]
            # The replay: 0..6 from the earlier version on; 0..3 restored, 0..5 opened again, 6 still out.
            done = result["replay"]
            assert done["version"] == earlier and done["latest_version"] >= versions[-1]
            assert (done["messages"], done["reopened"], done["restored"], done["consumers"]) == (7, 6, 4, 1)

            # The consumer receives 0..5 again, in seq order, marked redelivered.
            sub.wait_count(13, timeout=180)
            again = sub.received[7:]
            assert [r.message.body for r in again] == list(range(6))
            assert [r.message.id for r in again] == [f"pay-{i}" for i in range(6)]
            assert all(r.delivery_count >= 1 and r.message.first_acquirer is False for r in again)
            # A message published now comes after them, and 6 was never sent twice.
            publish(service.url, TOPIC, [payment(7)], container_id="payer")
            sub.wait_count(14, timeout=180)
            assert [r.message.body for r in sub.received].count(UNSETTLED) == 1
            wait_for(lambda: status().messages == 1, 180, "the replayed messages acknowledged again")
    finally:
        code_ = service.stop()
        assert code_ == 0, f"serve exited with {code_}:\n{service.log()[-4000:]}"
