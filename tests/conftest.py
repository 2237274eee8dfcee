"""Shared fixtures.

Every test runs isolated from the developer's environment: no `ORCHESTRATOR_*` variable is
seen, the working directory is the test's own `tmp_path` (so no `./orchestrator.toml` is
picked up) and the default data dir points inside it.

An async test (`async def test_...`) runs through anyio's pytest plugin (`anyio_mode = "auto"`
in pyproject.toml) on asyncio, on an event loop of its own (`anyio_backend` below); a sync
test that needs one await at most may still use `anyio.run`.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_orchestrator.service import resilience
from memory_orchestrator.settings import Settings, load_settings
from tests.mnemon_double import real_binary, real_expected, real_problem
from tests.pg_fixtures import own_pg_server, pg_dsn, pg_server
from tests.shared_processes import runtime_dir

__all__ = ["own_pg_server", "pg_dsn", "pg_server"]  # a real PostgreSQL (tests/pg_fixtures.py)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "mnemon_real: runs the real `mnemon` binary (`make test-mnemon-real`)"
    )
    # Under CI, a real Mnemon that is expected here (`../shared/mnemon` beside the checkout,
    # or $MNEMON_REAL_BINARY) but missing or failing fails the run: it is never skipped.
    if os.environ.get("CI") and real_expected():
        problem = real_problem()
        if problem is not None:
            raise pytest.UsageError(f"CI expects a real Mnemon here, but: {problem}")


@pytest.fixture(scope="session")
def mnemon_real() -> Path:
    """The real Mnemon binary (`tests.mnemon_double.real_binary`: $MNEMON_REAL_BINARY, else
    `../shared/mnemon/bin/mnemon`, ...). Skipped with the reason where none is found; under
    CI, where one is expected, `pytest_configure` has failed the run before this."""
    found = real_binary()
    if found is None:
        pytest.skip(real_problem() or "no real mnemon binary")
    return found


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """The async tests' event loop: asyncio's own (no uvloop, no trio), as `anyio.run` gives.
    The plugin makes a loop when a test (or an async fixture) needs one and closes it when
    none does, so each test gets a new one, as each `anyio.run` did."""
    return "asyncio"


@pytest.fixture(autouse=True)
def _isolate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in list(os.environ):
        if name.upper().startswith("ORCHESTRATOR_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    # The semantic stage is on by default ("auto") wherever a model can run, as it is here
    # after `make models`; tests pin it off so that each one ranks by the same rules on every
    # machine, and the tests of the semantic stage turn it on themselves (`semantic_auto`).
    monkeypatch.setenv("ORCHESTRATOR_SEMANTIC__ENABLED", "false")
    # The store's lists are waited for (no `retrieval.list_budget_s`): whether a slow store's
    # list makes a time budget depends on the machine; the tests of the budget set it.
    monkeypatch.setenv("ORCHESTRATOR_RETRIEVAL__LIST_BUDGET_S", "0")
    monkeypatch.chdir(tmp_path)
    # The shared processes a test starts (`orchestrator serve` over stdio) listen in a socket
    # directory of its own, and are stopped when it ends (tests/shared_processes.py).
    with runtime_dir() as runtime:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
        yield


@pytest.fixture(autouse=True)
def _heap() -> Iterator[None]:
    """The garbage collector as it was before the test: a server's warm-up settles the heap
    for its process (`service.heap`), which here is the test run's."""
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries that pause milliseconds, not the shipped back-off (`resilience.BASE_DELAY_S`,
    `MAX_DELAY_S`, read at each orchestrator's start), for tests that make many of them."""
    monkeypatch.setattr(resilience, "BASE_DELAY_S", 0.01)
    monkeypatch.setattr(resilience, "MAX_DELAY_S", 0.02)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Default settings with all data (store, traces) under `tmp_path`."""
    return load_settings(data_dir=tmp_path)


REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 ONNX folder `make models` builds (`make test` builds it first);
    the tests that need it are skipped, with the reason, where it could not be built."""
    from memory_orchestrator.derived.embedders import find_minilm
    from memory_orchestrator.errors import SemanticUnavailable

    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        pytest.skip("onnxruntime is not installed (uv sync --extra semantic)")
    try:
        return find_minilm(starts=[REPO])
    except SemanticUnavailable as exc:
        pytest.skip(f"needs the ONNX model: {exc}")
