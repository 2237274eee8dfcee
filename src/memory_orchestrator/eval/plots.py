"""PNG plots of a report: recall@k curves, recall by category, latency distributions.

matplotlib is optional (the `plots` extra) and imported only here, lazily, with the Agg
backend (no display needed).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_orchestrator.errors import MissingExtra

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from memory_orchestrator.eval.records import EvalRun

__all__ = ["MissingExtra", "write_plots"]

_COLORS = {"raw": "#7f7f7f", "orchestrated": "#1f77b4", "expanded": "#ff7f0e"}
_DPI = 120


def _figure(width: float, height: float) -> Figure:
    try:
        import matplotlib
    except ImportError as exc:
        raise MissingExtra(
            "PNG plots need matplotlib: install the 'plots' extra"
            " (pip install 'mnemon-memory-orchestrator[plots]', or uv sync --extra plots)"
        ) from exc
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=_DPI, layout="constrained")


def write_plots(report: dict[str, Any], run: EvalRun, folder: Path) -> list[Path]:
    """recall_at_k.png, recall_by_category.png and latency.png in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    title = f"{report['dataset']} on {report['backend']}"
    paths = [
        _recall_curves(report, title, folder / "recall_at_k.png"),
        _by_category(report, title, folder / "recall_by_category.png"),
        _latency(run, title, folder / "latency.png"),
    ]
    return paths


def _recall_curves(report: dict[str, Any], title: str, path: Path) -> Path:
    fig = _figure(7, 4.5)
    ax = fig.add_subplot()
    for system, curve in report["recall_curve"].items():
        ks = list(range(1, len(curve) + 1))
        asked = ", ".join(f"@{k} {curve[k - 1]:.3f}" for k in report["k"] if k <= len(curve))
        label = f"{system} ({asked})"
        ax.plot(ks, curve, marker=".", label=label, color=_COLORS.get(system))
    ax.set_xlabel("k (items returned)")
    ax.set_ylabel("recall@k (mean over questions)")
    ax.set_ylim(0, 1)
    ax.set_title(f"recall@k, {report['questions']} questions — {title}")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.savefig(path)
    return path


def _by_category(report: dict[str, Any], title: str, path: Path) -> Path:
    fig = _figure(7, 4.5)
    ax = fig.add_subplot()
    top = max(report["k"])
    systems = list(report["systems"])
    names = report.get("category_names", {})
    categories = list(report["systems"][systems[0]]["by_category"]) if systems else []
    width = 0.8 / max(1, len(systems))
    for n, system in enumerate(systems):
        blocks = report["systems"][system]["by_category"]
        values = [blocks[c].get(f"recall@{top}", 0.0) for c in categories]
        xs = [i + n * width for i in range(len(categories))]
        ax.bar(xs, values, width, label=system, color=_COLORS.get(system))
    labels = [
        f"{names.get(c, c)}\n(n={report['systems'][systems[0]]['by_category'][c]['questions']})"
        for c in categories
    ]
    ax.set_xticks([i + width * (len(systems) - 1) / 2 for i in range(len(categories))], labels)
    ax.set_ylim(0, 1)
    ax.set_ylabel(f"recall@{top}")
    ax.set_title(f"recall@{top} by category — {title}")
    ax.grid(axis="y", alpha=0.3)
    ax.legend()
    fig.savefig(path)
    return path


def _latency(run: EvalRun, title: str, path: Path) -> Path:
    fig = _figure(7, 4.5)
    ax = fig.add_subplot()
    data: list[Sequence[float]] = []
    labels = []
    for system in run.options.systems:
        values = [q.answers[system].latency_ms for c in run.cases for q in c.questions]
        data.append(values or [0.0])
        labels.append(system)
    ax.boxplot(data, orientation="horizontal", showfliers=True, whis=(5, 95))
    ax.set_yticks(range(1, len(labels) + 1), labels)
    ax.set_xscale("log")
    ax.set_xlabel("latency per query, ms (log scale; box = p25..p75, whiskers = p5..p95)")
    ax.set_title(f"latency — {title}")
    ax.grid(axis="x", alpha=0.3, which="both")
    fig.savefig(path)
    return path
