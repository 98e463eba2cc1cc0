"""Import layering: the pure core never imports I/O libraries; only the storage boundary imports deltalake."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PURE = ["sharedsub/binding.py", "sharedsub/addressing.py", "sharedsub/model.py", "sharedsub/conditions.py",
        "sharedsub/errors.py", "sharedsub/config.py", "sharedsub/storage/layout.py", "sharedsub/routing.py",
        "sharedsub/linknames.py", "sharedsub/terminus.py", "sharedsub/attach.py"]
IO_LIBS = {"deltalake", "pyspark", "proton", "pyarrow", "socket", "subprocess"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_pure_modules_import_no_io_library() -> None:
    for rel in PURE:
        path = ROOT / rel
        if path.exists():
            assert not (_imports(path) & IO_LIBS), rel


def test_only_the_storage_boundary_imports_deltalake() -> None:
    allowed = {"sharedsub/storage/delta.py"}
    for path in list((ROOT / "sharedsub").rglob("*.py")) + list((ROOT / "connectors").rglob("*.py")) + list((ROOT / "jobs").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel not in allowed:
            assert "deltalake" not in _imports(path), rel
