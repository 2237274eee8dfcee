"""The report as people read it: markdown (and the table layout the CLI's rich tables share).

Pure text from the report dict of `memory_orchestrator.eval.report`; nothing is recomputed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["category_table", "format_value", "headline_columns", "to_markdown"]


def headline_columns(report: dict[str, Any]) -> list[tuple[str, str]]:
    """(column label, metric key) of the headline table, for every renderer."""
    ks = report["k"]
    top = max(ks)
    columns = [(f"recall@{k}", f"recall@{k}") for k in ks]
    columns += [
        (f"recall_all@{top}", f"recall_all@{top}"),
        (f"nDCG@{top}", f"ndcg@{top}"),
        ("MRR", "mrr"),
        (f"precision@{top}", f"precision@{top}"),
        ("dup rate", "duplicate_rate"),
        ("context chars", "context_chars"),
        ("block recall", "block_recall"),
        ("tokens/call", "tokens_per_call"),
        ("p50 ms", "p50_ms"),
        ("p95 ms", "p95_ms"),
    ]
    return columns


def format_value(key: str, value: object) -> str:
    if not isinstance(value, int | float):
        return "-"
    if key in ("context_chars", "tokens_per_call"):
        return f"{value:,.0f}"
    if key.endswith("_ms"):
        return f"{value:.2f}"
    return f"{value:.3f}"


def category_table(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of recall@max(k) per category (rows) and system (columns)."""
    top = max(report["k"])
    systems = list(report["systems"])
    names = report.get("category_names", {})
    key = f"recall@{top}"
    header = ["category", "questions", *systems]
    rows = []
    first = report["systems"][systems[0]]["by_category"] if systems else {}
    for category, block in first.items():
        label = f"{category} {names[category]}" if category in names else category
        cells = [label, str(block.get("questions", 0))]
        for system in systems:
            value = report["systems"][system]["by_category"][category].get(key)
            cells.append(format_value(key, value))
        rows.append(cells)
    return header, rows


def _md_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |"]
    lines.append("|" + "|".join("---" if n == 0 else "---:" for n in range(len(header))) + "|")
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def _system_rows(systems: dict[str, Any], columns: Sequence[tuple[str, str]]) -> list[list[str]]:
    return [
        [name, *(format_value(key, block.get(key)) for _, key in columns)]
        for name, block in systems.items()
    ]


def to_markdown(report: dict[str, Any]) -> str:
    columns = headline_columns(report)
    top = max(report["k"])
    lines = [
        f"# Retrieval evaluation: {report['dataset']} on `{report['backend']}`",
        "",
        f"{report['questions']} questions ({report['skipped']} skipped: no usable evidence),"
        f" {len(report['cases'])} case(s), k = {', '.join(map(str, report['k']))}."
        " Metrics are means over questions; latency is per query, same run, same store.",
        "",
    ]
    lines += _md_table(
        ["system", *(c[0] for c in columns)], _system_rows(report["systems"], columns)
    )
    header, rows = category_table(report)
    lines += ["", f"## recall@{top} by category", "", *_md_table(header, rows)]
    for label in ("adversarial",):
        block = report.get(label)
        if block and block["questions"]:
            lines += [
                "",
                f"## {label.capitalize()} (category {block['category']}, apart from the headline)",
                "",
            ]
            lines += _md_table(
                ["system", *(c[0] for c in columns)], _system_rows(block["systems"], columns)
            )
    checks = report.get("write_checks")
    if checks:
        lines += ["", f"## Write checks: {checks['passed']} passed, {checks['failed']} failed", ""]
        for check in checks["checks"]:
            mark = "pass" if check["passed"] else "FAIL"
            lines.append(
                f"- {mark} `{check['id']}`: expected {check['expect']}, got {check['got']}"
                f" ({check['detail']})"
            )
    lines += _worst_markdown(report)
    if report.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {note}" for note in report["notes"]]
    return "\n".join(lines) + "\n"


def _worst_markdown(report: dict[str, Any], limit: int = 10) -> list[str]:
    lines: list[str] = []
    worst = report.get("worst_missed") or []
    if worst:
        title = f"Worst-missed questions ({worst[0]['system']}, first {min(limit, len(worst))})"
        lines += ["", f"## {title}", "", *_entries_markdown(report, worst[:limit])]
    lost = report.get("regressions") or {}
    if lost.get("count"):
        top = max(report["k"])
        lines += [
            "",
            f"## Where {lost['system']} loses to raw ({lost['count']} questions with lower"
            f" recall@{top}; {lost['gained']} with higher)",
            "",
            *_entries_markdown(report, lost["questions"][:limit]),
        ]
    return lines


def _entries_markdown(report: dict[str, Any], entries: Sequence[dict[str, Any]]) -> list[str]:
    top = max(report["k"])
    lines = []
    for n, item in enumerate(entries, start=1):
        recalls = ", ".join(f"{s} {v:.2f}" for s, v in item[f"recall@{top}"].items())
        lines.append(
            f"{n}. `{item['id']}` (category {item['category']}): {item['question']!r}"
            f" — recall@{top} {recalls}"
        )
        plan = item.get("plan") or {}
        if plan:
            window = f"; window {plan['time_window']}" if plan.get("time_window") else ""
            entities = ", ".join(plan.get("entities", [])) or "none"
            lines.append(
                f"   - plan: {plan['strategy']}, entities {entities}{window};"
                f" subqueries {plan.get('subqueries')}"
            )
        lines.extend(
            f"   - {ev['turn']} {ev['text']!r}: {_ranks(ev)}"
            for ev in item.get("evidence_ranks", [])
        )
    return lines


def _ranks(evidence: dict[str, Any]) -> str:
    """Where one evidence turn ranked in each system and in the store's deeper list, then why
    the orchestrated systems did not return it (once when they agree)."""
    parts = []
    for key, value in evidence.items():
        shown = f"#{value}" if value else "-"
        if key.endswith("_rank"):
            parts.append(f"{key.removesuffix('_rank')} {shown}")
        elif key.startswith("store_rank_top"):
            parts.append(f"store {shown} of {key.removeprefix('store_rank_top')}")
    whys: dict[str, list[str]] = {}
    for key, value in evidence.items():
        if key.endswith("_why"):
            whys.setdefault(value, []).append(key.removesuffix("_why"))
    reasons = [f"{'/'.join(systems)}: {why}" for why, systems in whys.items()]
    return "; ".join([", ".join(parts), *reasons])
