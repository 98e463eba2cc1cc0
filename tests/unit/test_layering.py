"""Import layering, discovered from the source tree and followed transitively.

Layers, lowest first (docs/layout.md says what belongs where):

- ``core``: ``sharedsub.core`` and the package root ``sharedsub``: pure rules, no I/O.
- ``storage``: ``sharedsub.storage``: Delta tables on disk through delta-rs.
- ``runtime``: ``sharedsub.runtime``: the threads and processes of a running service.
- ``adapters``: ``connectors``: AMQP (python-qpid-proton) and HTTP.
- ``entry``: ``sharedsub.cli``, ``sharedsub.serve``, ``sharedsub.__main__``: entry points that
  build the service.
- ``jobs``: ``jobs``: the Spark side, a separate process; it uses core, storage and runtime.

A module may import its own layer and those below it; nothing imports ``entry`` or ``jobs``
from outside them. The adapters do not import each other: HTTP sees the service through
sharedsub.runtime.operations only. Third-party I/O libraries stay at their one boundary, and the pure core
reaches none of them through any chain of imports.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sharedsub", "connectors", "jobs")

ENTRY = ("sharedsub.cli", "sharedsub.serve", "sharedsub.__main__")
ORDER = {"core": 0, "storage": 1, "runtime": 2, "adapters": 3, "entry": 4}
# jobs: its own process, never imported by the service; it may use everything but adapters/entry.
JOBS_MAY_IMPORT = {"core", "storage", "runtime", "jobs"}

# pyarrow's in-memory arrays and compute kernels are pure computation (routing and the Arrow
# selector back end use them); its file-system, Parquet, dataset and IPC modules are I/O.
IO_LIBS = {"deltalake", "pyspark", "proton", "socket", "subprocess", "threading", "http", "urllib",
           "pyarrow.parquet", "pyarrow.fs", "pyarrow.dataset", "pyarrow.ipc", "pyarrow.csv",
           "pyarrow.json", "pyarrow.flight", "pyarrow.feather", "shutil", "tempfile"}
# Adapters side by side: neither imports the other.
ADAPTERS = ("connectors.amqp", "connectors.http")
# Each I/O library's one home: (library, the module prefixes that may import it).
BOUNDARIES = [
    ("deltalake", ("sharedsub.storage",)),
    ("pyspark", ("jobs",)),
    ("proton", ("connectors.amqp",)),
    ("http.server", ("connectors.http",)),
]


def layer_of(module: str) -> str:
    """The layer of a dotted module name of this repository."""
    if module in ENTRY or module.startswith(tuple(f"{e}." for e in ENTRY)):
        return "entry"
    parts = module.split(".")
    if parts[0] == "jobs":
        return "jobs"
    if parts[0] == "connectors":
        return "adapters"
    if module == "sharedsub":
        return "core"
    second = parts[1]
    if second in {"core", "storage", "runtime"}:
        return second
    raise AssertionError(f"{module}: not in a layer (put it under sharedsub/core, storage or runtime)")


def _adapter(module: str) -> str:
    return next((a for a in ADAPTERS if module == a or module.startswith(f"{a}.")), module)


def discover(root: Path) -> dict[str, Path]:
    """Every module of the repository's packages under ``root``, by dotted name."""
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in (root / pkg).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def imports_of(module: str, path: Path, known: Iterable[str]) -> tuple[set[str], set[str]]:
    """(modules of the repository, external names) that ``module`` imports anywhere in its body,
    function-level imports included; external names come as full dotted name and top package."""
    known = set(known)
    internal: set[str] = set()
    external: set[str] = set()
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for name in names:
            if name.split(".")[0] in PACKAGES:
                # the deepest known module the name points at (a submodule or the package of an attribute)
                while name and name not in known:
                    name = name.rpartition(".")[0]
                if name:
                    internal.add(name)
                    # importing a submodule runs its packages' __init__ too
                    parent = name.rpartition(".")[0]
                    while parent:
                        if parent in known:
                            internal.add(parent)
                        parent = parent.rpartition(".")[0]
            elif name:
                external.update({name, name.split(".")[0]})
    internal.discard(module)
    return internal, external


def graph(root: Path) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(internal edges, external imports) of every module under ``root``."""
    modules = discover(root)
    edges: dict[str, set[str]] = {}
    ext: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges[name], ext[name] = imports_of(name, path, modules)
    return edges, ext


def closure(module: str, edges: Mapping[str, set[str]]) -> set[str]:
    """Every repository module ``module`` reaches through imports (itself included)."""
    seen = {module}
    todo = [module]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def violations(root: Path) -> list[str]:
    """Every import that breaks the layering, the I/O boundaries or the purity of the core."""
    edges, ext = graph(root)
    out: list[str] = []
    for module, targets in sorted(edges.items()):
        src = layer_of(module)
        for target in sorted(targets):
            if any(t.startswith(f"{target}.") for t in targets):
                continue  # a package on the way to a submodule: the submodule's layer speaks
            dst = layer_of(target)
            if src == "jobs":
                ok = dst in JOBS_MAY_IMPORT
            else:
                ok = dst != "jobs" and ORDER[dst] <= ORDER[src]
            if not ok:
                out.append(f"{module} ({src}) imports {target} ({dst})")
            elif src == dst == "adapters" and _adapter(module) != _adapter(target):
                out.append(f"{module} imports {target}: adapters do not import each other")
        for lib, homes in BOUNDARIES:
            if lib in ext[module] and not module.startswith(homes):
                out.append(f"{module} imports {lib}, which only {', '.join(homes)} may")
        if src == "core":
            reached = set().union(*(ext[m] for m in closure(module, edges)))
            for lib in sorted(reached & IO_LIBS):
                out.append(f"{module} (core) reaches the I/O library {lib}")
    return out


def test_the_repository_keeps_its_layers() -> None:
    assert violations(ROOT) == []


def test_every_module_is_in_a_layer() -> None:
    for module in discover(ROOT):
        layer_of(module)


def _tree(root: Path, files: Mapping[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for pkg in PACKAGES:
        (root / pkg).mkdir(exist_ok=True)
        (root / pkg / "__init__.py").touch()
    return root


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # a core module importing storage, directly
        ({"sharedsub/core/a.py": "from sharedsub.storage import b\n", "sharedsub/storage/b.py": ""},
         ["sharedsub.core.a (core) imports sharedsub.storage.b (storage)"]),
        # a function-level relative import of the runtime from storage
        ({"sharedsub/storage/a.py": "def f():\n    from ..runtime import b\n", "sharedsub/runtime/b.py": ""},
         ["sharedsub.storage.a (storage) imports sharedsub.runtime.b (runtime)"]),
        # the core reaching Parquet through a chain of two pure-looking modules
        ({"sharedsub/core/a.py": "from sharedsub.core.b import x\n",
          "sharedsub/core/b.py": "import pyarrow.parquet as pq\nx = 1\n"},
         ["sharedsub.core.a (core) reaches the I/O library pyarrow.parquet",
          "sharedsub.core.b (core) reaches the I/O library pyarrow.parquet"]),
        # deltalake outside storage; the runtime importing the adapters; anything importing jobs
        ({"sharedsub/runtime/a.py": "import deltalake\nimport connectors.amqp.c\n",
          "connectors/amqp/c.py": "from jobs import d\n", "jobs/d.py": ""},
         ["connectors.amqp.c (adapters) imports jobs.d (jobs)",
          "sharedsub.runtime.a (runtime) imports connectors.amqp.c (adapters)",
          "sharedsub.runtime.a imports deltalake, which only sharedsub.storage may"]),
        # one adapter reaching into another
        ({"connectors/http/a.py": "from connectors.amqp.server import S\n", "connectors/amqp/server.py": ""},
         ["connectors.http.a imports connectors.amqp.server: adapters do not import each other"]),
        # allowed: adapters on runtime and core, jobs on storage, pyarrow.compute in core
        ({"connectors/amqp/a.py": "from sharedsub.runtime import b\nfrom sharedsub.core import c\n",
          "sharedsub/runtime/b.py": "", "sharedsub/core/c.py": "import pyarrow.compute\n",
          "jobs/j.py": "from sharedsub.storage import s\n", "sharedsub/storage/s.py": ""}, []),
    ],
)
def test_the_check_sees_what_it_must(tmp_path: Path, files: dict[str, str], expected: list[str]) -> None:
    assert sorted(violations(_tree(tmp_path, files))) == sorted(expected)


def test_a_module_outside_the_layers_is_named(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"sharedsub/loose.py": ""})
    with pytest.raises(AssertionError, match="sharedsub.loose: not in a layer"):
        violations(root)
