"""The dependency direction, in terms of the package's folders:

    faces/ (mcp, http, cli, ui)  ->  service/  ->  pipeline/, derived/, state/, backends/ (registry)
                                                    ->  models/, settings/, errors, text

Which package may import which is written as import-linter contracts in pyproject.toml
(`[tool.importlinter]`), checked by `make lint` and by the first test here. This file keeps
what those contracts cannot say: imports allowed only inside one function (lazily), no import
circles when the modules load, attributes the faces must not read, one loopback rule, the
size of the top level, and the public API.

Imports are read with `ast` (nothing is imported), each file once.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import memory_orchestrator

PACKAGE = "memory_orchestrator"
ROOT = Path(memory_orchestrator.__file__).resolve().parent
PYPROJECT = ROOT.parents[1] / "pyproject.toml"


@dataclass(frozen=True)
class Import:
    module: str
    line: int
    function: str | None  # the enclosing function, None at module level
    type_only: bool = False  # under `if TYPE_CHECKING:`: never runs


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _imports(path: Path) -> list[Import]:
    """Every module `path` imports, relative imports resolved to absolute names."""
    package = _module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    return _imports_in(path.read_text(encoding="utf-8"), package)


def _imports_in(source: str, package: str) -> list[Import]:
    tree = ast.parse(source)
    found: list[Import] = []

    def visit(node: ast.AST, function: str | None, type_only: bool = False) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, child.name, type_only)
                continue
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for branch in child.body:
                    visit(ast.Module(body=[branch], type_ignores=[]), function, True)
                for branch in child.orelse:
                    visit(ast.Module(body=[branch], type_ignores=[]), function, type_only)
                continue
            if isinstance(child, ast.Import):
                found.extend(Import(a.name, child.lineno, function, type_only) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                found.append(Import(base, child.lineno, function, type_only))
                # `from memory_orchestrator.faces import cli` imports a module too.
                found.extend(
                    Import(f"{base}.{a.name}", child.lineno, function, type_only)
                    for a in child.names
                )
            visit(child, function, type_only)

    visit(tree, None)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is(module: str, target: str) -> bool:
    return module == target or module.startswith(target + ".")


def _sources(*, under: str | None = None) -> list[Path]:
    base = ROOT / under if under else ROOT
    return sorted(base.rglob("*.py"))


FACES = ROOT / "faces"


def _face_sources(face: str | None = None) -> list[Path]:
    """The faces (`faces/`: mcp, http, cli, ui, and any face added beside them), or one of
    them."""
    return _sources(under=f"faces/{face}" if face else "faces")


def test_the_import_linter_contracts_are_kept() -> None:
    """`lint-imports` (as `make lint` runs it) over pyproject.toml's contracts."""
    lint_imports = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint_imports), str(PYPROJECT), "--no-cache", "--no-logo"],
        cwd=PYPROJECT.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " 0 broken" in done.stdout


def test_the_source_tree_is_found() -> None:
    names = {_module_name(p) for p in _sources()}
    assert {f"{PACKAGE}.models", f"{PACKAGE}.service", f"{PACKAGE}.faces.mcp.server"} <= names
    assert f"{PACKAGE}.faces.cli.app" in names


def test_the_top_level_holds_at_most_eight_modules() -> None:
    """The parts live in folders named for them; the top level keeps only what every part
    shares (the error tree, text helpers, the filter rule) and the public API."""
    modules = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(modules) <= 8, modules


def test_the_faces_are_found() -> None:
    faces = {p.name for p in FACES.iterdir() if (p / "__init__.py").is_file()}
    assert {"mcp", "http", "cli", "ui"} <= faces
    assert {p.name for p in _face_sources("mcp")} >= {"server.py", "tools.py", "access.py"}
    assert {p.name for p in _face_sources("http")} >= {"server.py", "sessions.py"}
    assert {p.name for p in _face_sources("ui")} >= {"app.py", "guard.py", "pages.py"}


def test_the_faces_share_one_loopback_rule() -> None:
    """Whether a bind address is loopback (and so needs no token) is decided in one place,
    `state.tokens.is_loopback`, which the HTTP face and the inspector both import: a second
    copy in a face could drift from the first."""
    copies = [
        str(path.relative_to(ROOT))
        for path in sorted(ROOT.rglob("*.py"))
        if "def is_loopback(" in path.read_text()
    ]
    assert copies == ["state/tokens.py"]


def test_the_cli_imports_the_inspector_only_lazily_inside_ui() -> None:
    violations = [
        f"{path.relative_to(ROOT)}:{imp.line} imports {imp.module} in {imp.function}"
        for path in _face_sources("cli")
        for imp in _imports(path)
        if _is(imp.module, f"{PACKAGE}.faces.ui") and imp.function != "ui"
    ]
    assert violations == []


def _clients_of_the_service() -> list[Path]:
    """Everything that serves a caller: the MCP and HTTP faces, the CLI, the eval harness and
    the demo loader."""
    return [
        *_face_sources(),
        *_sources(under="eval"),
        ROOT / "demo.py",
    ]


def test_the_faces_never_reach_a_store_through_an_attribute() -> None:
    """The faces, the CLI, the eval harness and the demo reach the store only through the
    service: no backend module (a contract: not even the registry, `service.store_names`
    lists the stores), and no `<something>.backend.<attribute>` or `._store`."""
    violations: list[str] = []
    for path in _clients_of_the_service():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Attribute):
                continue
            if isinstance(node.value, ast.Attribute) and node.value.attr == "backend":
                violations.append(
                    f"{path.relative_to(ROOT)}:{node.lineno} reads .backend.{node.attr}"
                )
            if node.attr in {"_store", "_recorder", "_writes", "_reads", "_indexes"}:
                violations.append(f"{path.relative_to(ROOT)}:{node.lineno} reads .{node.attr}")
    assert violations == []


def test_the_orchestrator_keeps_its_store_private() -> None:
    from memory_orchestrator.service import Orchestrator

    public = {name for name in dir(Orchestrator) if not name.startswith("_")}
    assert not public & {"backend", "traces", "outbox", "store"}


def _module_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports when it is imported (module level, not
    under TYPE_CHECKING; an import inside a function runs later and cannot close a circle
    at import time)."""
    names = {_module_name(p) for p in _sources()}
    graph: dict[str, set[str]] = {}
    for path in _sources():
        here = _module_name(path)
        graph[here] = {
            imp.module
            for imp in _imports(path)
            if imp.function is None and not imp.type_only and imp.module in names
        } - {here}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_there_are_no_import_circles() -> None:
    # a package's __init__ importing its own modules is not a circle worth reporting
    graph = {
        module: {m for m in deps if not module.startswith(m + ".")}
        for module, deps in _module_graph().items()
    }
    assert _circles(graph) == []


def test_any_module_can_be_imported_first() -> None:
    """Importing `a.b.c` runs the `__init__` of `a.b` first: counted as imports, those make no
    circle either, so every module can be the first a process imports (the relay and the
    hook client import a few alone; the package's own `__init__` no longer imports the
    service ahead of everything, which hid such circles)."""
    names = {_module_name(p) for p in _sources()}
    graph: dict[str, set[str]] = {}
    for path in _sources():
        here = _module_name(path)
        found: set[str] = set()
        for imp in _imports(path):
            if imp.function is not None or imp.type_only or imp.module not in names:
                continue
            parts = imp.module.split(".")
            found.update(".".join(parts[:n]) for n in range(2, len(parts) + 1))
        graph[here] = {m for m in found & names if m != here and not here.startswith(m + ".")}
    assert _circles(graph) == []


def test_the_circle_finder_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


PUBLIC_API = [
    "BackendError",
    "Capabilities",
    "CapabilityMissing",
    "ConfigError",
    "ContextPackage",
    "ContextRequest",
    "ExpandRequest",
    "ExplainRequest",
    "Explanation",
    "HealthReport",
    "InvalidRequest",
    "MemoryBackend",
    "MemoryType",
    "NewMemory",
    "Orchestrator",
    "OrchestratorError",
    "OutboxReport",
    "ReplayReport",
    "ResponseBudget",
    "SearchFilters",
    "SearchRequest",
    "SearchResult",
    "Settings",
    "Status",
    "TimeRange",
    "Trace",
    "TraceNotFound",
    "WriteAction",
    "WriteReport",
    "WriteRequest",
    "load_settings",
    "queued_writes",
    "register_backend",
    "request_stats",
]


def test_the_public_api_is_pinned() -> None:
    """What `from memory_orchestrator import *` gives is a promise: a change here is a
    deliberate change of the public API."""
    assert memory_orchestrator.__all__ == PUBLIC_API
    assert all(getattr(memory_orchestrator, name, None) is not None for name in PUBLIC_API)


def test_the_cli_imports_the_mcp_server_only_lazily_inside_serve() -> None:
    violations = [
        f"{path.relative_to(ROOT)}:{imp.line} imports {imp.module} in {imp.function}"
        for path in _face_sources("cli")
        for imp in _imports(path)
        if _is(imp.module, f"{PACKAGE}.faces.mcp") and imp.function != "serve"
    ]
    assert violations == []


def test_the_import_reader_resolves_relative_and_lazy_imports() -> None:
    source = (
        "from ..backends import embedded\n"
        "from ..backends.base import MemoryBackend\n"
        "def serve() -> None:\n"
        "    from . import mcp_server\n"
    )
    found = _imports_in(source, f"{PACKAGE}.pipeline")
    assert Import(f"{PACKAGE}.backends.embedded", 1, None) in found
    assert Import(f"{PACKAGE}.pipeline.mcp_server", 4, "serve") in found
    # `from memory_orchestrator.backends import base` records the package and the module
    assert Import(f"{PACKAGE}.backends.base", 2, None) in found
    assert Import(f"{PACKAGE}.backends", 1, None) in found


def test_the_import_reader_marks_imports_made_only_for_type_checking() -> None:
    source = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import matplotlib\nimport os\n"
    )
    found = {i.module: i.type_only for i in _imports_in(source, PACKAGE)}
    assert found == {
        "typing": False,
        "typing.TYPE_CHECKING": False,
        "matplotlib": True,
        "os": False,
    }


def test_the_plots_module_imports_matplotlib_lazily() -> None:
    """Only `eval.plots` imports matplotlib (a contract), and only inside a function: the
    `plots` extra is optional, and the harness loads without it."""
    found = [
        imp for imp in _imports(ROOT / "eval" / "plots.py") if imp.module.startswith("matplotlib")
    ]
    assert found, "the plots module should import matplotlib"
    assert [imp.line for imp in found if imp.function is None and not imp.type_only] == []
