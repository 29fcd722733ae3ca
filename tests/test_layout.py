"""The package's layout rules, checked on the source: rooms, doors and no import cycle.

Every ``import`` / ``from ... import`` statement of fxstore's modules is read with ``ast``
(function-level imports included, ``if TYPE_CHECKING:`` blocks not: they never run), and
``from fxstore.ingest import name`` is resolved through the stage's front door to the
module that defines `name`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import fxstore
from fxstore import ingest

pytestmark = pytest.mark.quick

PACKAGE = Path(fxstore.__file__).resolve().parent
STAGES = ("fxstore.ingest", "fxstore.features", "fxstore.train", "fxstore.synth")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            yield from (n for child in node.orelse for n in _runtime_imports(child))
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _runtime_imports(node)


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The fxstore modules an import statement of `module` loads by name."""
    if isinstance(node, ast.Import):
        yield from (a.name for a in node.names if a.name in MODULES)
        return
    base = node.module or ""
    if node.level:  # relative import
        package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    for alias in node.names:
        if f"{base}.{alias.name}" in MODULES:
            yield f"{base}.{alias.name}"
        elif base == "fxstore.ingest" and alias.name in ingest._HOME:
            yield ingest._HOME[alias.name]
        elif base in MODULES:
            yield base


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        graph[module] = {
            t for node in _runtime_imports(tree) for t in _targets(module, node) if t != module
        }
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


GRAPH = _graph()


def test_layout_fxstore_modules_have_no_import_cycle() -> None:
    assert _cycles(GRAPH) == []


def test_layout_cycle_finder_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

    assert _cycles(graph) == [["a", "b", "c"]]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("fxstore.config")))
def test_layout_config_imports_no_stage(module: str) -> None:
    assert not {t for t in GRAPH[module] if t.startswith(STAGES)}


@pytest.mark.parametrize(
    "module",
    sorted(m for m in MODULES if m.startswith(STAGES) and not m.startswith("fxstore.ingest")),
)
def test_layout_other_stages_use_the_ingest_front_door(module: str) -> None:
    tree = ast.parse(MODULES[module].read_text())
    behind = {
        n.module
        for n in _runtime_imports(tree)
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("fxstore.ingest.")
    }

    assert not behind, f"{module} imports {behind}: use `from fxstore.ingest import ...`"


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if m.startswith(("fxstore.ingest", "fxstore.features")))
)
def test_layout_ingest_and_features_never_import_train_or_cupy(module: str) -> None:
    tree = ast.parse(MODULES[module].read_text())
    names = {
        (n.module or "") if isinstance(n, ast.ImportFrom) else a.name
        for n in _runtime_imports(tree)
        for a in n.names
    }

    assert not {n for n in names if n.startswith(("fxstore.train", "cupy"))}


def test_layout_front_door_names_resolve_to_their_modules() -> None:
    for name, home in ingest._HOME.items():
        assert home in MODULES, name
        assert getattr(ingest, name) is getattr(__import__(home, fromlist=[name]), name)


def _train_room(module: str) -> str:
    """``fxstore.train.agent.dqn`` -> ``agent``; ``fxstore.train.loop`` -> ``loop``; other
    fxstore modules -> their top-level name (``store``, ``config``, ``fxstore`` itself)."""
    parts = module.split(".")
    if parts[:2] == ["fxstore", "train"]:
        return parts[2] if len(parts) > 2 else "train"
    return parts[1] if len(parts) > 1 else parts[0]


#: What each room of the trainer may import besides itself (docs/ARCHITECTURE.md, "The
#: trainer's rooms"): arrows run one way, gpu at the bottom, loop at the top.
TRAIN_ROOMS_MAY_IMPORT = {
    "gpu": {"errors", "rng"},
    "env": {"gpu", "config", "errors", "fxcache", "market", "store"},
    "agent": {"gpu", "env", "config", "errors", "store"},
    "evaluate": {"gpu", "env", "config", "errors", "store"},
    "profiles": {"config", "errors"},
    "runs": {
        *("gpu", "env", "agent", "evaluate", "profiles"),
        *("config", "errors", "executor", "fxstore", "gpus", "market", "remote", "store"),
    },
    "loop": {"gpu", "env", "agent", "evaluate", "runs", "config", "errors"},
    "train": {"env"},
}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("fxstore.train")))
def test_layout_train_rooms_import_only_what_they_may(module: str) -> None:
    room = _train_room(module)
    used = {_train_room(t) for t in GRAPH[module]} - {room}

    assert used <= TRAIN_ROOMS_MAY_IMPORT[room], (
        f"{module} imports {sorted(used - TRAIN_ROOMS_MAY_IMPORT[room])}, which the {room} "
        "room may not (docs/ARCHITECTURE.md)"
    )


def test_layout_train_room_rules_catch_a_planted_upward_import() -> None:
    room = _train_room("fxstore.train.gpu.act")
    used = {_train_room("fxstore.train.agent.dqn")}

    assert not used <= TRAIN_ROOMS_MAY_IMPORT[room]
