"""Comments explain why, never what a run measured (docs/how-to/develop.md): a timing in a
comment or a docstring of `src/` goes stale with the next change and the next machine, and
belongs in a dated file under `bench/results/` with its command."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
# a number followed by a unit of a measured duration: "0.35 ms", "57us", "13 µs", "2 ns"
TIMING = re.compile(r"\d[\d.,]*\s*(?:ms|µs|us|ns|milliseconds?|microseconds?)\b")


def _prose(source: str) -> Iterator[tuple[int, str]]:
    """Each comment and each docstring of `source`, with its first line."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                yield first.lineno, first.value.value


def timings(source: str) -> list[tuple[int, str]]:
    """The comments and docstrings of `source` that carry a timing figure."""
    return sorted((line, text) for line, text in _prose(source) if TIMING.search(text))


def test_no_comment_or_docstring_in_src_carries_a_timing() -> None:
    found = [
        f"{path.relative_to(SRC)}:{line}: {' '.join(TIMING.findall(text))}"
        for path in sorted(SRC.rglob("*.py"))
        for line, text in timings(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_the_check_finds_a_timing_in_a_comment_and_a_docstring_only() -> None:
    source = '''
"""Module: took 0.35 ms at 10k."""
x = 1  # 57 us against 37
LABEL = "p50 ms"  # a string that is not a docstring names a unit, not a figure


def f() -> None:
    """Why, without figures."""
'''
    assert [line for line, _ in timings(source)] == [2, 3]
