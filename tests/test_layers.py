"""The house rules of docs/architecture.md, checked from the clone itself: arrows only point
down the layout table, no file imports one that imports it back, and nothing above
`infra/` branches on a model backend or names a Langfuse type."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("flows", "gepa_opt", "judges", "weights", "infra")
# what each package may import of ours (flows: everything)
MAY_IMPORT = {
    "gepa_opt": set(),
    "infra": set(),
    "judges": {"gepa_opt", "infra"},
    "weights": {"infra"},
    "flows": set(PACKAGES),
}


def _sources() -> dict[str, Path]:
    """Module name -> file, for every file of the packages."""
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[module.removesuffix(".__init__")] = path
    return found


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in the file, in functions too."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return out


def test_imports_point_down_the_layout_table():
    against = []
    for module, path in _sources().items():
        own = module.split(".")[0]
        for line, name in _imports(path):
            top = name.split(".")[0]
            if top in PACKAGES and top != own and top not in MAY_IMPORT[own]:
                against.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not sorted(set(against))


def test_no_file_imports_one_that_imports_it_back():
    sources = _sources()
    graph = nx.DiGraph()
    for module, path in sources.items():
        graph.add_node(module)
        for _, name in _imports(path):
            if name in sources and name != module and not sources[name].name == "__init__.py":
                graph.add_edge(module, name)
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not circles


@pytest.mark.parametrize(
    "pattern, what",
    [
        (r'backend\s*[!=]=\s*["\']', "branches on a backend name"),
        (r'"(BOOLEAN|CATEGORICAL|NUMERIC)"', "names a Langfuse score type"),
    ],
)
def test_nothing_above_infra_knows_a_backend_or_langfuse(pattern, what):
    leaks = [
        f"{path.relative_to(ROOT)} {what}"
        for module, path in _sources().items()
        if not module.startswith("infra") and re.search(pattern, path.read_text())
    ]
    assert not leaks


# the command that serves the engine over HTTP (`flywheel serve-model`) is its one door
ENGINE_DOORS = {"flows.cli"}


def test_only_infra_lm_reaches_into_the_engine():
    """Everything above `infra` talks to `LM`: the in-process engine is the `local`
    backend's inside, chosen by `infra.lm.factory`, not something a stage imports."""
    reaching = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for module, path in _sources().items()
        if not module.startswith("infra.lm") and module not in ENGINE_DOORS
        for line, name in _imports(path)
        if name.startswith("infra.lm.engine")
    ]
    assert not reaching


def test_flows_keeps_its_rooms():
    """flows/ holds the spine (nightly, cli) and its sub-packages by role; a new file
    at its top level is a new room nobody drew."""
    top = {p.stem for p in (ROOT / "flows").glob("*.py")}
    rooms = {p.name for p in (ROOT / "flows").iterdir() if (p / "__init__.py").exists()}
    assert top == {"__init__", "cli", "nightly"}
    assert rooms == {"night", "report", "production", "plumbing"}
