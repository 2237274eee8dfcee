"""What the package imports, checked on the source against what pyproject.toml declares (the
quick complement of the install tests beside it):

- every package the source imports is declared: by the core (`[project] dependencies`) or
  by an extra (`[project.optional-dependencies]`), not only brought along by another one;
- a package of an extra is imported at load time only by that extra's feature modules;
  anywhere else only inside the function that needs it;
- no other module loads a feature module at load time, directly or through another module.

Imports are read with `ast` (tests/unit/test_architecture.py); load time means outside any
function and outside `if TYPE_CHECKING:`. Module names are mapped to their distributions by
this environment's metadata (`make setup` installs every extra).
"""

from __future__ import annotations

import sys
import tomllib
from importlib.metadata import packages_distributions

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.packaging.installs import EXTRAS, FEATURE_MODULES, REPO
from tests.unit.test_architecture import PACKAGE, _imports, _module_name, _sources

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


CORE = _names(PROJECT["dependencies"])
OPTIONAL = {extra: _names(reqs) for extra, reqs in PROJECT["optional-dependencies"].items()}
DISTRIBUTIONS = {
    m: {canonicalize_name(d) for d in ds} for m, ds in packages_distributions().items()
}


def _owner(module: str) -> str:
    """`core`, the extra that declares `module`'s distribution, or `undeclared`."""
    dists = DISTRIBUTIONS.get(module.split(".", maxsplit=1)[0], set())
    if dists & CORE:
        return "core"
    return next((extra for extra, names in OPTIONAL.items() if dists & names), "undeclared")


def _third_party(module: str) -> bool:
    top = module.split(".", maxsplit=1)[0]
    return bool(top) and top != PACKAGE and top not in sys.stdlib_module_names


def test_the_extras_are_the_ones_the_tests_install() -> None:
    assert set(OPTIONAL) == set(EXTRAS)
    for extra, modules in EXTRAS.items():
        assert {_owner(m) for m in modules} == {extra}, extra
    assert _owner("numpy") == "core"  # rapidfuzz's cdist on the read path (pipeline/currency)


def test_every_imported_package_is_declared() -> None:
    undeclared = sorted(
        {
            f"{_module_name(path)}:{imp.line} imports {imp.module.split('.')[0]}"
            for path in _sources()
            for imp in _imports(path)
            if _third_party(imp.module) and _owner(imp.module) == "undeclared"
        }
    )
    assert undeclared == []


def test_only_feature_modules_import_an_extra_at_load_time() -> None:
    early = sorted(
        f"{_module_name(path)}:{imp.line} imports {imp.module.split('.')[0]}"
        for path in _sources()
        for imp in _imports(path)
        if imp.function is None
        and not imp.type_only
        and _third_party(imp.module)
        and _owner(imp.module) in EXTRAS
        and _module_name(path) not in FEATURE_MODULES
    )
    assert early == []


def _load_time_graph() -> dict[str, set[str]]:
    """module -> the project's modules importing it runs (its parent packages included)."""
    modules = {_module_name(path): path for path in _sources()}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        loads: set[str] = set()
        for imp in _imports(path):
            if imp.function is None and not imp.type_only and imp.module in modules:
                parts = imp.module.split(".")
                loads.update(".".join(parts[:n]) for n in range(1, len(parts) + 1))
        graph[name] = loads & set(modules)
    return graph


def test_no_module_loads_a_feature_module_but_the_features_themselves() -> None:
    graph = _load_time_graph()

    def reaches(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        return seen

    leaks = {
        name: sorted(reaches(name) & set(FEATURE_MODULES))
        for name in graph
        if name not in FEATURE_MODULES and reaches(name) & set(FEATURE_MODULES)
    }
    assert leaks == {}
