"""Our code uses python-qpid-proton through its public API only, and Proton-C's C API (the
``cproton`` binding python-qpid-proton is built on) in one module for a short list of functions.

No import from a private proton module (``proton._handlers``, ``from proton import _io``, ...), and
no attribute with a name proton keeps private state under that an earlier listener of ours (on
proton's Container) once reached into (``_selectable``, ``_acceptor``, ``_transport``,
``_delegate``, ``_setupsocket``), on any object: the scan is syntactic, so our own classes do not
use these names either. Such reaching in breaks silently when proton changes its internals
(connectors/amqp/wire/engine_loop.py and listener.py keep their own tables instead).

The exceptions, listed in :data:`C_API` by module: connectors/amqp/wire/proton_events.py reads the
events a message costs through ``cproton``, and reads and accepts a published transfer (its
docstring says why: a quarter of the loop's time went into building proton's event objects, a
fifth of a publish's into its delivery's wrapper), connectors/amqp/wire/outgoing.py sends a consumer's
messages (an eighth of the loop's time while consuming went into delivery wrappers nobody read).
Each may use the C functions and constants listed for it and nothing else of ``cproton``; no other module
may import it but the debug check of the reactor-thread rule (:data:`WRAPS_C_API`), which wraps
them all and calls none. They are functions of Proton's public C API (proton/event.h, proton/delivery.h,
proton/link.h), which python-qpid-proton's own Python layer calls the same way.
The C object a proton wrapper wraps (its ``_impl`` attribute, which every wrapper has and
``Connection.collect`` reads of a collector) is read only in those modules too: ``_impl`` of
anything but ``self`` elsewhere is reported. Any other ``_``-prefixed attribute of anything but
``self`` or ``cls`` is reported everywhere (a proton ``Message``'s ``_msg``, for one: proton keeps
private state under such names, and the scan cannot tell a proton object from ours).

Run it on other sources with ``python tests/unit/test_no_proton_internals.py FILE_OR_DIR...``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("connectors", "sharedsub")
PRIVATE_NAMES = frozenset({"_selectable", "_acceptor", "_transport", "_delegate", "_setupsocket"})
# Public names that start with an underscore (documented API of the standard library).
PUBLIC_UNDERSCORED = frozenset({("os", "_exit")})
_ATTR_FUNCTIONS = frozenset({"getattr", "setattr", "hasattr", "delattr"})
C_API: dict[str, frozenset[str]] = {
    "proton_events.py": frozenset({
        "pn_collector", "pn_collector_free", "pn_collector_peek", "pn_collector_pop", "pn_event_type",
        "pn_event_link", "pn_event_delivery", "pn_event_transport", "isnull",
        "PN_DELIVERY", "PN_LINK_FLOW", "PN_TRANSPORT", "PN_TRANSPORT_CLOSED",
        "pn_incref", "pn_decref", "pn_delivery_readable", "pn_delivery_partial", "pn_delivery_pending",
        "pn_delivery_remote_state", "pn_delivery_update", "pn_delivery_settle", "pn_delivery_settled",
        "pn_delivery_tag", "PN_ACCEPTED",
    }),
    "outgoing.py": frozenset({
        "pn_delivery", "pn_link_send", "pn_link_advance", "pn_link_credit", "pn_link_state", "pn_delivery_settle",
        "PN_LOCAL_ACTIVE",
    }),
}
C_API_MODULE = "proton_events.py"
# The debug check of the reactor-thread rule (connectors/amqp/wire/reactor_thread.py) imports
# cproton to wrap every pn_* function with a thread check; it calls none of them itself.
WRAPS_C_API = frozenset({"reactor_thread.py"})


def _is_private_proton_module(name: str | None) -> bool:
    parts = (name or "").split(".")
    return parts[0] == "proton" and any(p.startswith("_") for p in parts[1:])


def findings_in_source(source: str, filename: str = "<source>") -> list[str]:
    """``file:line: what`` for each use of a proton internal in ``source``."""
    found = []
    allowed = C_API.get(Path(filename).name)
    c_api_allowed = allowed is not None
    for node in ast.walk(ast.parse(source, filename)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import | ast.ImportFrom) and not c_api_allowed and Path(filename).name not in WRAPS_C_API:
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m.split(".")[0] == "cproton" for m in modules):
                found.append(f"{filename}:{line}: cproton outside {C_API_MODULE}")
        if isinstance(node, ast.ImportFrom) and node.module == "cproton" and c_api_allowed:
            for alias in node.names:
                if alias.name not in (allowed or ()):
                    found.append(f"{filename}:{line}: cproton.{alias.name} is not in C_API")
        if (
            c_api_allowed
            and isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "cproton"
            and node.attr not in (allowed or ())
        ):
            found.append(f"{filename}:{line}: cproton.{node.attr} is not in C_API")
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_private_proton_module(alias.name):
                    found.append(f"{filename}:{line}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            if _is_private_proton_module(node.module):
                found.append(f"{filename}:{line}: from {node.module} import ...")
            elif node.module == "proton":
                for alias in node.names:
                    if alias.name.startswith("_"):
                        found.append(f"{filename}:{line}: from proton import {alias.name}")
        elif isinstance(node, ast.Attribute) and node.attr in PRIVATE_NAMES:
            found.append(f"{filename}:{line}: attribute {node.attr}")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            and not (node.attr == "_impl" and c_api_allowed)
            and not (isinstance(node.value, ast.Name) and (node.value.id, node.attr) in PUBLIC_UNDERSCORED)
        ):
            if node.attr == "_impl":
                found.append(f"{filename}:{line}: _impl of a proton wrapper outside the C API modules")
            else:
                found.append(f"{filename}:{line}: private attribute {node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _ATTR_FUNCTIONS
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in PRIVATE_NAMES
        ):
            found.append(f"{filename}:{line}: {node.func.id}(..., {node.args[1].value!r})")
    return sorted(found, key=lambda f: int(f.rsplit(":", 2)[-2]))


def _python_files(paths: Iterable[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts)
        else:
            yield path


def findings(paths: Iterable[Path]) -> list[str]:
    """The findings over every ``.py`` file in ``paths`` (files or directories)."""
    found = []
    for path in _python_files(paths):
        found += findings_in_source(path.read_text(encoding="utf-8"), str(path))
    return found


def test_connectors_and_sharedsub_use_no_proton_internals() -> None:
    files = list(_python_files(ROOT / d for d in SCANNED))
    assert any(f.name == "listener.py" for f in files)  # the scan sees the file it is about
    found = findings(files)
    assert not found, "proton internals used:\n" + "\n".join(found)


def test_the_scan_finds_each_kind_of_use(tmp_path: Path) -> None:
    """What the secure listener did before it used the public API only is all reported."""
    bad = tmp_path / "old_listener.py"
    bad.write_text(
        "import proton._io\n"
        "from proton._exceptions import ProtonException\n"
        "from proton._handlers import IOHandler\n"
        "from proton import _selectable, Transport\n"
        "from proton._selectable import Selectable\n"
        "def f(conn, t, s, acceptor, sock):\n"
        "    conn._acceptor = acceptor\n"
        "    t._selectable = s\n"
        "    s._transport = None\n"
        "    lsock = acceptor._selectable._delegate\n"
        "    proton._io.IO._setupsocket(sock)\n"
        "    return getattr(s, '_transport', None)\n"
    )
    found = findings([tmp_path])
    text = "\n".join(found)
    for expected in (
        ":1: import proton._io",
        ":2: from proton._exceptions import",
        ":3: from proton._handlers import",
        ":4: from proton import _selectable",
        ":5: from proton._selectable import",
        ":7: attribute _acceptor",
        ":8: attribute _selectable",
        ":9: attribute _transport",
        ":10: attribute _delegate",
        ":11: attribute _setupsocket",
        ":12: getattr(..., '_transport')",
    ):
        assert expected in text, text
    assert not any(":4: from proton import Transport" in f for f in found)


def test_the_c_api_is_used_in_its_module_only_and_only_as_listed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "handler.py"
    elsewhere.write_text("import cproton\nfrom cproton import pn_link_recv\n")
    listed = tmp_path / C_API_MODULE
    listed.write_text(
        "import cproton\nx = cproton.pn_event_type\ny = cproton.pn_link_recv\nfrom cproton import pn_delivery_abort\n"
    )
    text = "\n".join(findings([tmp_path]))
    assert "handler.py:1: cproton outside" in text and "handler.py:2: cproton outside" in text
    assert f"{C_API_MODULE}:3: cproton.pn_link_recv is not in C_API" in text
    assert f"{C_API_MODULE}:4: cproton.pn_delivery_abort is not in C_API" in text
    assert "pn_event_type" not in text
    assert f"{C_API_MODULE}:1:" not in text


def test_any_private_attribute_of_another_object_is_reported(tmp_path: Path) -> None:
    (tmp_path / "translate.py").write_text("def f(msg, self):\n    return msg._msg, self._x, msg.__class__\n")
    assert findings([tmp_path]) == [f"{tmp_path / 'translate.py'}:2: private attribute _msg"]


def test_a_wrappers_c_object_is_read_in_the_c_api_modules_only(tmp_path: Path) -> None:
    source = "class K:\n    def f(self, link):\n        return self._impl, link._impl\n"
    (tmp_path / "handler.py").write_text(source)
    (tmp_path / C_API_MODULE).write_text(source)
    assert findings([tmp_path]) == [f"{tmp_path / 'handler.py'}:3: _impl of a proton wrapper outside the C API modules"]


def test_the_listed_c_api_is_what_the_binding_has() -> None:
    import cproton

    missing = [name for names in C_API.values() for name in names if not hasattr(cproton, name)]
    assert not missing, f"python-qpid-proton's cproton lacks {missing}, which connectors/amqp needs"


def test_public_use_is_not_reported() -> None:
    good = (
        "from proton import Handler, ProtonException, Transport\n"
        "from proton.handlers import IOHandler\n"
        "from proton.reactor import Container\n"
        "def f(container, s, t):\n"
        "    s.reading = True\n"
        "    t.push(b'')\n"
        "    self_transport = t\n"
        "    return container.selectable(handler=None, delegate=None), self_transport\n"
    )
    assert findings_in_source(good) == []


if __name__ == "__main__":
    result = findings(Path(a) for a in sys.argv[1:])
    print("\n".join(result) or "no proton internals")
    sys.exit(1 if result else 0)
