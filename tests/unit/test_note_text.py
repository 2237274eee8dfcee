"""No test matches the text of a trace note: a trace's notes are rendered from its events
(`models.events.render`), and tests read the events' kinds, ids and values (`tests/events.py`)
so that a note can be reworded without touching a test.

The check reads every test file's syntax tree for a substring or equality check on anything
named `notes` (`"x" in trace.notes`, `any("x" in n for n in notes)`, `n.startswith(...)` over
notes, `notes[0] == "..."`). The notes that are not a trace's (a store's own remarks, a
report's lines) are listed with the reason they may be read as text."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

# (test file, the expression whose notes are read): notes that are not a trace's
NOT_TRACE_NOTES = {
    # a store's own remarks (MemoryBackend.notes), reported by the store, not rendered
    ("integration/test_mnemon_adapter.py", "backend.notes"),
    ("integration/test_mnemon_adapter.py", "reader.notes"),
    ("integration/test_mnemon_adapter.py", "notes"),
    ("integration/test_fused_backend.py", "fused.notes"),
    # the inspector's page of memories (a catalog page, not a trace)
    ("integration/test_inspector_service.py", "early.notes"),
    ("integration/test_inspector_service.py", "again.notes"),
    # reports of an evaluation and of an import
    ("integration/test_eval.py", "report['notes']"),
    ("e2e/test_cli_transfer.py", "report['notes']"),
}


def _mentions_notes(node: ast.AST) -> str | None:
    """The source of the `...notes` expression in `node`, if any."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr == "notes":
            return ast.unparse(sub)
        if isinstance(sub, ast.Name) and sub.id == "notes":
            return "notes"
        if (
            isinstance(sub, ast.Subscript)
            and isinstance(sub.slice, ast.Constant)
            and sub.slice.value == "notes"
        ):
            return ast.unparse(sub)
    return None


def _text_checks(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, notes expression) for each check of notes' text in `tree`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(
            isinstance(op, ast.In | ast.NotIn | ast.Eq) for op in node.ops
        ):
            sides = [node.left, *node.comparators]
            texts = [s for s in sides if isinstance(s, ast.Constant | ast.JoinedStr)]
            for side in sides:
                found = _mentions_notes(side)
                if found is not None and texts:
                    yield node.lineno, found
        if isinstance(node, ast.GeneratorExp | ast.ListComp | ast.SetComp):
            for gen in node.generators:
                found = _mentions_notes(gen.iter)
                if found is None:
                    continue
                for sub in (s for part in (node.elt, *gen.ifs) for s in ast.walk(part)):
                    substring = isinstance(sub, ast.Compare) and any(
                        isinstance(op, ast.In | ast.NotIn) for op in sub.ops
                    )
                    prefix = isinstance(sub, ast.Call) and getattr(sub.func, "attr", "") in {
                        "startswith",
                        "endswith",
                    }
                    if substring or prefix:
                        yield node.lineno, found


def _found() -> set[tuple[str, int, str]]:
    found = set()
    for path in sorted(TESTS.rglob("test_*.py")):
        where = str(path.relative_to(TESTS))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, expr in _text_checks(tree):
            expr = expr.replace('"', "'")
            if (where, expr) not in NOT_TRACE_NOTES:
                found.add((where, line, expr))
    return found


def test_no_test_matches_the_text_of_a_trace_note() -> None:
    assert _found() == set()


def test_the_check_sees_the_usual_ways_of_matching_a_note() -> None:
    caught = [
        'assert "x" in trace.notes',
        'assert any("x" in n for n in trace.notes)',
        'assert any(n.startswith("x") for n in answer["trace"]["notes"])',
        'assert summary.notes[-1] == "x"',
        'assert [n for n in notes if "x" not in n] == []',
    ]
    for line in caught:
        assert list(_text_checks(ast.parse(line))), line
    left = ["assert kinds(trace) == [EventKind.NOTE]", 'assert said(t, K) == [{"a": 1}]']
    for line in left:
        assert not list(_text_checks(ast.parse(line))), line
