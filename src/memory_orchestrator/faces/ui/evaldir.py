"""The eval page's data: the `report.json` and the PNG plots of an `eval --out` folder.

The folder is given when the inspector starts (`orchestrator ui --eval-dir PATH`), never by a
request; a plot is served only when its name is one of the folder's own `*.png` files.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["EvalView", "plot_path", "read_eval"]

_PLOT = re.compile(r"^[A-Za-z0-9_.-]{1,100}\.png$")
_MAX_REPORT_BYTES = 20 * 1024 * 1024
_SKIP = frozenset({"by_category"})


@dataclass(frozen=True)
class Table:
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, tuple[str, ...]], ...]  # (row label, cells)


@dataclass(frozen=True)
class EvalView:
    folder: Path
    facts: tuple[tuple[str, str], ...]  # dataset, backend, k, questions, ...
    tables: tuple[Table, ...]
    plots: tuple[str, ...]
    notes: tuple[str, ...]
    error: str | None = None


def _cell(value: object) -> str:
    if isinstance(value, list):
        return ", ".join(_cell(v) for v in value)
    if isinstance(value, float):
        return f"{value:.4f}".rstrip("0").rstrip(".") if value else "0"
    return "" if value is None else str(value)


def _systems_table(systems: dict[str, Any]) -> Table:
    columns: list[str] = []
    for values in systems.values():
        columns += [k for k in values if k not in _SKIP and k not in columns]
    rows = tuple(
        (name, tuple(_cell(values.get(c)) for c in columns)) for name, values in systems.items()
    )
    return Table("Systems", tuple(columns), rows)


def _category_table(systems: dict[str, Any], metric: str) -> Table | None:
    categories: list[str] = []
    for values in systems.values():
        categories += [c for c in values.get("by_category", {}) if c not in categories]
    if not categories:
        return None
    rows = tuple(
        (
            category,
            tuple(
                _cell(values.get("by_category", {}).get(category, {}).get(metric))
                for values in systems.values()
            ),
        )
        for category in categories
    )
    return Table(f"{metric} by category", tuple(systems), rows)


def plot_path(folder: Path | None, name: str) -> Path | None:
    """The plot `name` of the folder, when it is one of its own PNG files; else None."""
    if folder is None or not _PLOT.match(name):
        return None
    path = folder / name
    return path if path.is_file() and path.parent == folder else None


def read_eval(folder: Path) -> EvalView:
    """What the eval page shows of `folder`; a folder without a readable report says why."""
    plots = tuple(sorted(p.name for p in folder.glob("*.png") if _PLOT.match(p.name)))
    report_file = folder / "report.json"
    try:
        if report_file.stat().st_size > _MAX_REPORT_BYTES:
            raise ValueError(f"larger than {_MAX_REPORT_BYTES // (1024 * 1024)} MB")
        report = json.loads(report_file.read_text(encoding="utf-8"))
        if not isinstance(report, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        return EvalView(folder, (), (), plots, (), error=f"no readable {report_file}: {exc}")
    systems = report.get("systems") or {}
    if not isinstance(systems, dict):
        systems = {}
    ks = report.get("k") or []
    top = f"recall@{max(ks)}" if isinstance(ks, list) and ks else "mrr"
    tables = [_systems_table(systems)] if systems else []
    by_category = _category_table(systems, top)
    if by_category is not None:
        tables.append(by_category)
    facts = tuple(
        (key, _cell(report.get(key)))
        for key in ("dataset", "backend", "k", "questions", "skipped")
        if key in report
    )
    notes = tuple(str(n) for n in report.get("notes") or [])
    return EvalView(folder, facts, tuple(tables), plots, notes)
