"""The product's structure stays readable: no import cycle among the modules of
diligence/, pipelines/ and flows/ (imports inside functions included), no module over
600 lines (sandbox/ included), package faces (``__init__.py``) of at most 120 lines,
and the flows compose the pipeline through `diligence.steps` only."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("diligence", "pipelines", "flows")
#: held to the line rule too: the service's emulator that tests, benchmarks and the demo run
SHORT_TOO = ("sandbox",)
MAX_LINES = 600
MAX_FACE_LINES = 120
#: what a flow reaches only through `diligence.steps` (the one composition of the pipeline)
BEHIND_THE_STEPS = ("diligence.analytics", "diligence.report", "diligence.warehouse",
                    "diligence.evidence", "diligence.sync")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imported(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The product modules an import statement of `module` loads (the nearest known
    module for a name that is a class or function)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = module.split(".")
            if path.name != "__init__.py":
                parts.pop()
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join([*parts, base] if base else parts)
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
    found = set()
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module:
            found.add(name)
    return found


def _graph() -> dict[str, set[str]]:
    graph = {}
    for module, path in MODULES.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges |= _imported(module, path, node)
        graph[module] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle() -> None:
    graph = _graph()
    assert len(graph) > 100 and graph["diligence.sync"]  # the scan sees the product
    assert _cycles(graph) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_modules_and_package_faces_stay_short() -> None:
    lines = {module: len(path.read_text(encoding="utf-8").splitlines()) for module, path in MODULES.items()}
    assert {m: n for m, n in lines.items() if n > MAX_LINES} == {}
    emulator = {str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
                for folder in SHORT_TOO for path in (ROOT / folder).rglob("*.py")}
    assert len(emulator) > 10 and {m: n for m, n in emulator.items() if n > MAX_LINES} == {}
    faces = {m: n for m, n in lines.items() if MODULES[m].name == "__init__.py" and n > MAX_FACE_LINES}
    assert faces == {}


def _package_of(module: str) -> str:
    """The package a module belongs to: its folder (``diligence.evidence.bucket`` ->
    ``diligence.evidence``); a package's face is its package; a module at the top of a
    product package stands for itself (``diligence.sync``)."""
    if MODULES[module].name == "__init__.py" or module.count(".") < 2:
        return module
    return module.rpartition(".")[0]


def test_no_import_cycle_among_packages() -> None:
    """Taken as packages too: e.g. the evidence kept (below the sync) and the evidence
    read back (above it, a replay runs a sync) are two packages, not one that both
    imports the sync and is imported by it."""
    packages: dict[str, set[str]] = {}
    for module, imported in _graph().items():
        own = _package_of(module)
        packages.setdefault(own, set()).update(p for p in map(_package_of, imported) if p != own)
    assert len(packages) > 20 and "diligence.evidence" in packages["diligence.sync"]
    assert _cycles(packages) == []


def _behind_the_steps(module: str) -> bool:
    return any(module == behind or module.startswith(behind + ".") for behind in BEHIND_THE_STEPS)


def test_flows_reach_the_pipeline_through_the_steps_only() -> None:
    """No flow module imports the models, reports, warehouse, evidence or sync (imports
    inside functions included): the CLI and the flows run one composition."""
    flows = {module: imported for module, imported in _graph().items() if module.split(".")[0] == "flows"}
    assert len(flows) > 5 and "diligence.steps" in flows["flows.company_connections_sync"]
    reached = {module: sorted(filter(_behind_the_steps, imported)) for module, imported in flows.items()}
    assert {module: names for module, names in reached.items() if names} == {}
