"""The dependency direction, checked on the source: faces -> service -> pipeline -> models.

Imports are read with `ast` (nothing is imported), so a violation anywhere in a module, even
inside a function, is caught.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import memory_orchestrator

PACKAGE = "memory_orchestrator"
ROOT = Path(memory_orchestrator.__file__).resolve().parent
FACE_FRAMEWORKS = {"mcp", "mcp_types", "typer", "click", "rich", "starlette", "uvicorn"}


@dataclass(frozen=True)
class Import:
    module: str
    line: int
    function: str | None  # the enclosing function, None at module level


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[Import]:
    """Every module `path` imports, relative imports resolved to absolute names."""
    package = _module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    return _imports_in(path.read_text(encoding="utf-8"), package)


def _imports_in(source: str, package: str) -> list[Import]:
    tree = ast.parse(source)
    found: list[Import] = []

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, child.name)
                continue
            if isinstance(child, ast.Import):
                found.extend(Import(a.name, child.lineno, function) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                found.append(Import(base, child.lineno, function))
                # `from memory_orchestrator import mcp_server` imports a module too.
                found.extend(
                    Import(f"{base}.{a.name}", child.lineno, function) for a in child.names
                )
            visit(child, function)

    visit(tree, None)
    return found


def _is(module: str, target: str) -> bool:
    return module == target or module.startswith(target + ".")


def _sources(*, under: str | None = None) -> list[Path]:
    base = ROOT / under if under else ROOT
    return sorted(base.rglob("*.py"))


def _core_sources() -> list[Path]:
    faces = {ROOT / "mcp_server.py"}
    return [p for p in _sources() if p not in faces and ROOT / "cli" not in p.parents]


def test_the_source_tree_is_found() -> None:
    names = {_module_name(p) for p in _sources()}
    assert {f"{PACKAGE}.models", f"{PACKAGE}.service", f"{PACKAGE}.mcp_server"} <= names
    assert f"{PACKAGE}.cli.app" in names


def test_the_core_imports_no_mcp_cli_or_terminal_framework() -> None:
    violations = [
        f"{path.relative_to(ROOT)}:{imp.line} imports {imp.module}"
        for path in _core_sources()
        for imp in _imports(path)
        if imp.module.split(".")[0] in FACE_FRAMEWORKS
    ]
    assert violations == []


def test_the_mcp_server_never_imports_the_cli() -> None:
    imports = _imports(ROOT / "mcp_server.py")
    assert [i.module for i in imports if _is(i.module, f"{PACKAGE}.cli")] == []


def test_the_cli_imports_the_mcp_server_only_lazily_inside_serve() -> None:
    violations = [
        f"{path.relative_to(ROOT)}:{imp.line} imports {imp.module} in {imp.function}"
        for path in _sources(under="cli")
        for imp in _imports(path)
        if _is(imp.module, f"{PACKAGE}.mcp_server") and imp.function != "serve"
    ]
    assert violations == []


def test_the_cli_never_imports_the_mcp_sdk() -> None:
    violations = [
        f"{path.relative_to(ROOT)}:{imp.line} imports {imp.module}"
        for path in _sources(under="cli")
        for imp in _imports(path)
        if imp.module.split(".")[0] in {"mcp", "mcp_types"}
    ]
    assert violations == []


def _reaches_a_backend_module(module: str) -> bool:
    backends = f"{PACKAGE}.backends"
    # `from memory_orchestrator.backends import base` also records the package itself.
    return _is(module, backends) and module != backends and not _is(module, f"{backends}.base")


def test_pipeline_stages_see_backends_only_through_the_protocol() -> None:
    assert _sources(under="pipeline")
    violations = [
        f"{path.relative_to(ROOT)}:{imp.line} imports {imp.module}"
        for path in _sources(under="pipeline")
        for imp in _imports(path)
        if _reaches_a_backend_module(imp.module)
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
    flagged = [i.module for i in found if _reaches_a_backend_module(i.module)]
    assert flagged == [f"{PACKAGE}.backends.embedded"]
