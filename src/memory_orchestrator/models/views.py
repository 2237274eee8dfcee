"""What an agent reads of a read tool's answer: compact by default, whole on request.

An agent pays for every character a tool returns, on every call. By default the answer of
`memory_context` is its context block (whose lines already carry each memory's id, date and
text) and the trace id; that of `memory_search` and `memory_expand` one short line per item
and the trace id. The structured content is as lean: the block or the items' lines' parts, and
no score breakdowns, weights or stage details. Those come with `detail` (the whole record, in
the text and the structured content alike) or from `memory_explain` with the trace id.

The compact models below are the published output schemas. They allow more fields than they
declare, so the same schema holds the whole record that `detail` returns (a superset). The
text is rendered here, not in a face, so that the eval measures what an agent reads
(`eval.runner`: tokens per call) with the very function the MCP face sends.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memory_orchestrator.models.memory import to_utc
from memory_orchestrator.models.results import (
    ContextItem,
    ContextPackage,
    Explanation,
    SearchResult,
)

__all__ = [
    "ContextAnswer",
    "ExplanationAnswer",
    "FoundItem",
    "SearchAnswer",
    "ShownItem",
    "context_answer",
    "explanation_answer",
    "search_answer",
]

# Open models: with `detail`, the same schema carries the whole record.
_OPEN = ConfigDict(frozen=True, extra="allow")


class ShownItem(BaseModel):
    """A memory the context block shows."""

    model_config = _OPEN

    memory_id: str = Field(description="Its id in the store: cite it.")
    score: float = Field(description="Its final score (higher is better).")
    timestamp: datetime | None = Field(default=None, description="When it happened (UTC).")
    merged_ids: tuple[str, ...] = Field(default=(), description="Near-duplicates it absorbed.")


class FoundItem(ShownItem):
    """A memory found, with its text."""

    summary: str = Field(description="Its text (cut when long).")
    changed: str | None = Field(default=None, description="What a correction changed.")


class ContextAnswer(BaseModel):
    """`memory_context`: the block to read and the ids it shows (with detail=true, the whole
    package: every item's reasons and score breakdown, the entities, the trace summary)."""

    model_config = _OPEN

    context_block: str = Field(description="Read this before answering; cite its ids.")
    items: tuple[ShownItem, ...] = Field(description="The memories the block shows, in order.")
    trace_id: str = Field(description="memory_explain shows why these.")
    warning: str | None = Field(default=None, description="Set when the store was not searched.")


class SearchAnswer(BaseModel):
    """`memory_search`, `memory_expand`: the memories found, best first (with detail=true,
    each item's reasons, entities and score breakdown, and the trace summary)."""

    model_config = _OPEN

    items: tuple[FoundItem, ...] = Field(description="The memories found, best first.")
    trace_id: str = Field(description="memory_explain shows why these.")
    warning: str | None = Field(default=None, description="Set when the store was not searched.")


class ExplanationAnswer(BaseModel):
    """`memory_explain`: the stored trace, whole, and the same told in plain words."""

    model_config = _OPEN

    trace: dict[str, Any] = Field(
        description="The stored trace, whole: the plan, every candidate with its score"
        " breakdown, the expansions, the drops, the notes and the timings."
    )
    text: str = Field(description="The same, told in plain words.")


def _when(moment: datetime | None) -> str | None:
    return to_utc(moment).isoformat().replace("+00:00", "Z") if moment else None


def _shown(item: ContextItem) -> dict[str, Any]:
    out: dict[str, Any] = {"memory_id": item.memory_id, "score": item.score}
    if item.timestamp is not None:
        out["timestamp"] = _when(item.timestamp)
    if item.merged_ids:
        out["merged_ids"] = list(item.merged_ids)
    return out


def _found(item: ContextItem) -> dict[str, Any]:
    out = _shown(item)
    out["summary"] = item.summary
    if item.changed:
        out["changed"] = item.changed
    return out


def _trace_line(trace_id: str) -> str:
    return f"trace_id: {trace_id}"


def context_answer(package: ContextPackage, *, detail: bool = False) -> tuple[str, dict[str, Any]]:
    """The text an agent reads and the structured content of a `memory_context` answer."""
    if detail:
        return package.model_dump_json(), package.model_dump(mode="json")
    content: dict[str, Any] = {
        "context_block": package.context_block,
        "items": [_shown(i) for i in package.items],
        "trace_id": package.trace_id,
    }
    if package.warning:
        content["warning"] = package.warning
    return f"{package.context_block}\n\n{_trace_line(package.trace_id)}", content


def item_line(number: int, item: ContextItem) -> str:
    """One short line per item: its date, its text, then its id (and what it absorbed or
    what a correction changed)."""
    day = to_utc(item.timestamp).strftime("%Y-%m-%d") if item.timestamp else "undated"
    flags = item.memory_id
    if item.changed:
        flags += f"; {item.changed}"
    if item.merged_ids:
        flags += "; merged: " + ", ".join(item.merged_ids)
    return f"{number}. [{day}] {item.summary} ({flags})"


def search_answer(result: SearchResult, *, detail: bool = False) -> tuple[str, dict[str, Any]]:
    """The text an agent reads and the structured content of a `memory_search` or
    `memory_expand` answer."""
    if detail:
        return result.model_dump_json(), result.model_dump(mode="json")
    lines = [result.warning] if result.warning else []
    lines.append(result.summary if result.items else f"{result.summary}: nothing found.")
    lines.extend(item_line(n, item) for n, item in enumerate(result.items, start=1))
    lines.append(_trace_line(result.trace_id))
    content: dict[str, Any] = {
        "items": [_found(i) for i in result.items],
        "trace_id": result.trace_id,
    }
    if result.warning:
        content["warning"] = result.warning
    return "\n".join(lines), content


def explanation_answer(explanation: Explanation) -> tuple[str, dict[str, Any]]:
    """`memory_explain`'s answer: the account in words, then the trace (its text and
    structured content as before: it is the detail)."""
    content = explanation.model_dump(mode="json")
    return explanation.model_dump_json(), content
