"""notebooks/backlog.ipynb executed headless (nbclient, a real IPython kernel) against the data
dir a real service run built (conftest.py), with its outputs checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from tests.ops.conftest import EXPECTED_BACKLOG, PUBLISHED, OpsDataDir

pytestmark = pytest.mark.e2e

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "backlog.ipynb"


def _outputs(cell: Any) -> tuple[str, set[str]]:
    """All text a code cell printed or displayed, and the MIME types of its rich outputs."""
    text, kinds = [], set()
    for out in cell.get("outputs", []):
        assert out["output_type"] != "error", "".join(out.get("traceback", []))
        text.append(out.get("text", ""))
        data = out.get("data", {})
        kinds.update(data)
        text.append(data.get("text/plain", ""))
    return "".join(text), kinds


def run_backlog_notebook(
    data_dir: str, subscription: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, timeout: int = 300
) -> list[tuple[str, set[str]]]:
    """Run notebooks/backlog.ipynb top to bottom on ``data_dir`` for ``subscription``, as its
    parameters cell reads them; the outputs of its code cells, in order."""
    monkeypatch.setenv("SHAREDSUB_STORAGE_DATA_DIR", data_dir)
    monkeypatch.setenv("SHAREDSUB_NOTEBOOK_SUBSCRIPTION", subscription)
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    return [_outputs(c) for c in nb.cells if c.cell_type == "code"]


def test_backlog_notebook_runs_top_to_bottom(ops: OpsDataDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    params, overview, plot, pending, eu, spark_sql, summary = run_backlog_notebook(
        str(ops.data_dir), "app-1:billing", tmp_path, monkeypatch
    )

    assert f"data dir: {ops.data_dir}" in params[0]
    for name in EXPECTED_BACKLOG:
        assert name in overview[0]
    assert "text/html" in overview[1]  # the overview is a rendered DataFrame
    assert "image/png" in plot[1]  # the backlog-over-time figure

    # app-1:billing took and accepted seqs 0..2 of the ten orders: 3..9 wait, with properties.
    assert "app-1:billing (shared durable, generation 1): 7 waiting" in pending[0]
    assert "'region': 'us'" in pending[0] and "'n': 9" in pending[0]
    assert "order-9" in pending[0]
    # the pandas filter keeps the eu orders (even n) among them
    assert "order-4" in eu[0] and "order-9" not in eu[0]

    # The Spark SQL section (the connector is there: bootstrap.py fetched it) finds the same
    # waiting messages through the Delta Lake Spark connector.
    assert "views: " in spark_sql[0] and "sub_app_1_billing" in spark_sql[0] and "topic_orders" in spark_sql[0]
    assert "app-1:billing: 7 waiting; the same messages as above: True" in spark_sql[0]
    assert "text/html" in spark_sql[1]

    line = next(ln for ln in summary[0].splitlines() if ln.startswith("{"))
    result = json.loads(line)
    assert result["data_dir"] == str(ops.data_dir)
    assert result["backlog"] == EXPECTED_BACKLOG
    assert result["pending"] == {"subscription": "app-1:billing", "seqs": list(range(3, PUBLISHED))}
    assert result["spark_sql_seqs"] == list(range(3, PUBLISHED))
    # Every subscription's history has a routed commit (and billing its ack commits).
    assert all(n >= 1 for n in result["history_points"].values())
    assert result["history_points"]["app-1:billing"] >= 2
