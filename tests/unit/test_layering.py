"""Import layering: the pure core never imports I/O libraries; only the storage boundary imports deltalake."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PURE = ["sharedsub/binding.py", "sharedsub/addressing.py", "sharedsub/model.py", "sharedsub/conditions.py",
        "sharedsub/errors.py", "sharedsub/config.py", "sharedsub/storage/layout.py", "sharedsub/routing.py",
        "sharedsub/linknames.py", "sharedsub/terminus.py", "sharedsub/attach.py", "sharedsub/outcomes.py",
        "sharedsub/explain.py", "sharedsub/admin_rules.py", "sharedsub/metrics.py",
        "sharedsub/acklog.py", "sharedsub/replay.py", "sharedsub/dispatch.py", "sharedsub/transactions.py",
        "sharedsub/publish_window.py", "sharedsub/write_faults.py",
        "sharedsub/logthrottle.py", "sharedsub/fanout_faults.py", "sharedsub/retention.py",
        "sharedsub/sasl_frames.py", "sharedsub/scram.py", "sharedsub/sasl_rules.py", "sharedsub/identity.py",
        "sharedsub/exposure.py", "sharedsub/amqp_message.py"]
# pyarrow's in-memory arrays and compute kernels are pure computation (routing and the Arrow
# selector back end use them); its file-system, Parquet, dataset and IPC modules are I/O.
IO_LIBS = {"deltalake", "pyspark", "proton", "socket", "subprocess", "pyarrow.parquet", "pyarrow.fs",
           "pyarrow.dataset", "pyarrow.ipc", "pyarrow.csv", "pyarrow.json", "pyarrow.flight", "pyarrow.feather"}


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, as its top-level package and as its full dotted name."""
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            out.update({name, name.split(".")[0]})
    return out


def test_pure_modules_import_no_io_library() -> None:
    for rel in PURE:
        path = ROOT / rel
        if path.exists():
            assert not (_imports(path) & IO_LIBS), rel
    for path in (ROOT / "sharedsub" / "selector").glob("*.py"):
        assert not (_imports(path) & IO_LIBS), path.name


def test_the_layering_check_sees_io_imports(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import pyarrow as pa\nfrom pyarrow import parquet\nimport pyarrow.fs\n")
    assert _imports(probe) & IO_LIBS == {"pyarrow.parquet", "pyarrow.fs"}


def test_only_the_storage_boundary_imports_deltalake() -> None:
    allowed = {"sharedsub/storage/delta.py"}
    sources = [*(ROOT / "sharedsub").rglob("*.py"), *(ROOT / "connectors").rglob("*.py"), *(ROOT / "jobs").rglob("*.py")]
    for path in sources:
        rel = str(path.relative_to(ROOT))
        if rel not in allowed:
            assert "deltalake" not in _imports(path), rel
