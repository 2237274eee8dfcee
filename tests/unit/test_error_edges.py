"""Bugs surface (errors.py): `except Exception` only at the process edges listed here, each of
which reports what it caught (`errors.unexpected`: logged with its traceback, counted) or raises
it again; everywhere else a handler names the errors it expects. `except BaseException` only to
clean up and raise again; no bare `except:`."""

from __future__ import annotations

import ast
import logging
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from memory_orchestrator.errors import unexpected, unexpected_errors
from memory_orchestrator.service.health import bugs_check
from memory_orchestrator.service.resilience import replay_on_schedule
from memory_orchestrator.state.observability import Metrics

SRC = Path(__file__).resolve().parents[2] / "src" / "memory_orchestrator"

# (file under src/memory_orchestrator, enclosing function): why everything is caught there
EDGES = {
    ("faces/mcp/server.py", "MemoryServer.call_tool"): "every tool call: counted, kept, raised",
    ("service/resilience.py", "replay_on_schedule"): "the outbox's background replay loop",
    ("derived/indexes.py", "DerivedIndexes._warm"): "the indexes' background warm-up",
    ("derived/semantic.py", "SemanticIndex._drain"): "the embedding worker threads",
    ("postgres/changes.py", "Changes._run"): "the change listener thread",
    ("backends/embedded_check.py", "Integrity._run"): "the integrity check thread",
    ("backends/mcp_stdio.py", "McpStdio._own"): "the task owning a store's server process",
    ("state/traces.py", "TraceStore._write_loop"): "the trace writer thread",
    # not a process edge: tokenizers raises bare `Exception` for a file it cannot read, and
    # nothing else is caught (any subclass is raised again)
    ("derived/embedders.py", "MiniLMEmbedder.__init__"): "tokenizers' own bare Exception",
}


def _handlers() -> Iterator[tuple[str, str, ast.ExceptHandler]]:
    """(file, enclosing function, handler) for every `except` in the source."""
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = str(path.relative_to(SRC))
        yield from _walk(tree, where, [])


def _walk(
    node: ast.AST, where: str, scope: list[str]
) -> Iterator[tuple[str, str, ast.ExceptHandler]]:
    for child in ast.iter_child_nodes(node):
        inner = scope
        if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            inner = [*scope, child.name]
        if isinstance(child, ast.ExceptHandler):
            yield where, ".".join(scope), child
        yield from _walk(child, where, inner)


def _names(handler: ast.ExceptHandler) -> set[str]:
    kinds = handler.type
    items = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds] if kinds else []
    return {n.id for n in items if isinstance(n, ast.Name)}


def _raises_or_reports(handler: ast.ExceptHandler) -> bool:
    for node in ast.walk(handler):
        if isinstance(node, ast.Raise):
            return True
        if isinstance(node, ast.Call):
            called = node.func
            name = called.id if isinstance(called, ast.Name) else getattr(called, "attr", "")
            if name in {"unexpected", "_observe"}:
                return True
    return False


def test_except_exception_only_at_the_listed_edges() -> None:
    found = {
        (where, scope) for where, scope, handler in _handlers() if "Exception" in _names(handler)
    }
    assert found == set(EDGES)


def test_every_edge_reports_or_raises_what_it_caught() -> None:
    quiet = [
        (where, scope, handler.lineno)
        for where, scope, handler in _handlers()
        if "Exception" in _names(handler) and not _raises_or_reports(handler)
    ]
    assert not quiet


def test_no_bare_except_and_base_exception_only_to_raise_again() -> None:
    bare = [(w, s, h.lineno) for w, s, h in _handlers() if h.type is None]
    assert not bare
    swallowed = [
        (w, s, h.lineno)
        for w, s, h in _handlers()
        if "BaseException" in _names(h) and not any(isinstance(n, ast.Raise) for n in ast.walk(h))
    ]
    assert not swallowed


async def test_a_bug_in_the_background_replay_is_logged_counted_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    place = "background outbox replay"
    before = unexpected_errors().get(place, 0)
    calls: list[int] = []

    async def replay() -> tuple[int, int]:
        calls.append(1)
        if len(calls) == 1:
            raise TypeError("a bug in the replay")
        return 0, 0

    async def sleep(_: float) -> None:
        if len(calls) == 2:
            raise anyio.get_cancelled_exc_class()

    with caplog.at_level(logging.ERROR), pytest.raises(anyio.get_cancelled_exc_class()):
        await replay_on_schedule(replay, every_s=1.0, sleep=sleep)
    assert len(calls) == 2  # the loop went on after the bug
    assert unexpected_errors()[place] == before + 1
    (record,) = [r for r in caplog.records if r.name == "memory_orchestrator.bugs"]
    assert record.exc_info is not None
    assert record.exc_info[0] is TypeError  # with its traceback


def test_bugs_show_in_the_metrics_and_in_health_once_counted() -> None:
    place = "a place only this test reports from"
    before, metrics = unexpected_errors(), Metrics()
    assert bugs_check(before) == []
    assert "orchestrator_unexpected_errors_total{" not in metrics.render().decode()
    unexpected(place, ValueError("x"), logged=True)
    (check,) = bugs_check(before)
    assert check.name == "unexpected_errors"
    assert check.status == "degraded"
    assert f"{place} (1)" in check.detail
    shown = metrics.render().decode()
    assert f'orchestrator_unexpected_errors_total{{place="{place}"}} 1.0' in shown
    assert "orchestrator_unexpected_errors_total{" not in Metrics().render().decode()
