"""Mnemon's records <-> the orchestrator's: insights as `Memory`, `NewMemory` as Mnemon's
category, tags and importance, and what its commands print as outcomes and hits.

Memory types <-> Mnemon categories: episodic <-> context; semantic -> fact (and preference,
decision, fact, insight, general -> semantic); procedural -> insight and resource -> general,
each with a `memory-type:<type>` tag so they read back as written (the tag is hidden on read).
`metadata["category"]` naming a Mnemon category overrides the choice. Importance 0..1 <->
Mnemon's 1..5 (`1 + round(4 * x)`; read back as `(n - 1) / 4`). Mnemon's limits (content
bytes, tag and entity counts and sizes) are checked before anything runs.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import (
    Edge,
    Memory,
    MemoryType,
    MetaValue,
    Neighbor,
    NewMemory,
    WriteAction,
    WriteOutcome,
    to_utc,
)

Json = dict[str, Any]

NATIVE_EDGES = ("temporal", "semantic", "causal", "entity", "supersedes")
RELATIONS = {"related": "entity", "update": "supersedes"}  # the orchestrator's -> Mnemon's
CATEGORIES = ("preference", "decision", "fact", "insight", "context", "general")
TYPE_TAG = "memory-type:"
CATEGORY_OF = {
    MemoryType.EPISODIC: "context",
    MemoryType.SEMANTIC: "fact",
    MemoryType.PROCEDURAL: "insight",
    MemoryType.RESOURCE: "general",
}
TYPE_OF = {"context": MemoryType.EPISODIC}  # every other category reads as semantic
CATEGORIES_FOR = {
    MemoryType.EPISODIC: {"context"},
    MemoryType.SEMANTIC: {"preference", "decision", "fact", "insight", "general"},
    MemoryType.PROCEDURAL: {"insight"},
    MemoryType.RESOURCE: {"general"},
}
MAX_CONTENT_BYTES = 8000
LIMITS = {"tags": (20, 100), "entities": (50, 200)}  # count, bytes each


def parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return to_utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return None


def importance_in(value: object) -> float | None:
    """Mnemon's 1..5 as 0..1."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 1 <= value <= 5:
        return None
    return round((float(value) - 1) / 4, 4)


def importance_out(value: float) -> int:
    """0..1 as Mnemon's 1..5."""
    return 1 + round(min(max(value, 0.0), 1.0) * 4)


def _string_list(value: object) -> list[str]:
    if isinstance(value, str):  # a JSON array kept as text in the store file
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def to_memory(insight: Json, *, superseded: bool = False) -> Memory:
    """One Mnemon insight (CLI JSON or a store row as a dict) as a `Memory`."""
    category = str(insight.get("category") or "general")
    tags = _string_list(insight.get("tags"))
    kind = TYPE_OF.get(category, MemoryType.SEMANTIC)
    for tag in tags:
        named = tag.removeprefix(TYPE_TAG)
        if tag.startswith(TYPE_TAG) and named in MemoryType.__members__.values():
            kind = MemoryType(named)
    metadata: dict[str, MetaValue] = {"category": category}
    access = insight.get("access_count")
    if isinstance(access, int):
        metadata["access_count"] = access
    source = insight.get("source")
    return Memory(
        id=str(insight["id"]),
        content=str(insight.get("content") or ""),
        type=kind,
        entities=tuple(_string_list(insight.get("entities"))),
        tags=tuple(t for t in tags if not t.startswith(TYPE_TAG)),
        created_at=parse_time(insight.get("created_at")),
        source=source if isinstance(source, str) and source else None,
        importance=importance_in(insight.get("importance")),
        store="mnemon",
        metadata=metadata,
        superseded=superseded,
    )


def category_and_tags(memory: NewMemory) -> tuple[str, list[str]]:
    """The Mnemon category for a memory, and its tags (plus a type tag when the category alone
    would read back as another type)."""
    chosen = memory.metadata.get("category")
    category = chosen if isinstance(chosen, str) and chosen in CATEGORIES else None
    category = category or CATEGORY_OF[memory.type]
    tags = list(dict.fromkeys(memory.tags))
    if TYPE_OF.get(category, MemoryType.SEMANTIC) is not memory.type:
        tags.append(TYPE_TAG + memory.type.value)
    return category, tags


def check_new(memory: NewMemory, index: int | None = None) -> None:
    """Mnemon's limits, checked here so nothing runs (or half an import lands) when one fails."""
    where = "" if index is None else f"memories[{index}]: "
    size = len(memory.content.encode())
    if size > MAX_CONTENT_BYTES:
        raise BackendError(
            f"{where}content is {size} bytes; Mnemon takes at most {MAX_CONTENT_BYTES}"
        )
    if "\x00" in memory.content:
        raise BackendError(f"{where}content contains a NUL character")
    _, tags = category_and_tags(memory)
    for name, values in (("tags", tags), ("entities", list(memory.entities))):
        most, max_bytes = LIMITS[name]
        if len(values) > most:
            raise BackendError(f"{where}{len(values)} {name}; Mnemon takes at most {most}")
        for value in values:
            if len(value.encode()) > max_bytes or "," in value or "\x00" in value:
                raise BackendError(
                    f"{where}{name} value {value[:40]!r} is over {max_bytes} bytes or holds a"
                    " comma or NUL"
                )


def import_row(memory: NewMemory) -> Json:
    """One insight of an `import` draft."""
    category, tags = category_and_tags(memory)
    row: Json = {"content": memory.content, "category": category, "tags": tags}
    row["entities"] = list(memory.entities)
    if memory.importance is not None:
        row["importance"] = importance_out(memory.importance)
    if memory.source:
        row["source"] = memory.source
    if memory.created_at is not None:
        row["created_at"] = to_utc(memory.created_at).strftime("%Y-%m-%dT%H:%M:%SZ")
    return row


# ---------------------------------------------------------------- what the CLI prints

_WORD_START = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
OPAQUE_KEYS = frozenset({"metadata", "meta"})  # values keyed by the user: kept as they are


def snake_key(key: str) -> str:
    """`ID`, `Id`, `createdAt`, `CreatedAt`, `replacedID` -> `id`, `created_at`,
    `replaced_id`: Mnemon's newer builds may print Go field names or camelCase tags."""
    return _WORD_START.sub("_", key).lower()


def normalized(data: Any) -> Any:
    """What Mnemon printed with every object key in snake_case (`snake_key`); a key already
    in snake_case wins over a variant of it. The values of `metadata` are left alone."""
    if isinstance(data, list):
        return [normalized(item) for item in data]
    if not isinstance(data, dict):
        return data
    out: Json = {}
    for key, value in data.items():
        name = snake_key(key) if isinstance(key, str) else key
        if name in out and name != key:
            continue
        out[name] = value if name in OPAQUE_KEYS else normalized(value)
    return out


def _keys(row: Json) -> str:
    return ", ".join(sorted(str(k) for k in row)[:12]) or "none"


def require_id(row: object, command: str) -> Json:
    """A printed record that names its memory; anything else is an error, never "no
    results" (a newer build might rename the field once more)."""
    if not isinstance(row, dict):
        raise BackendError(f"mnemon {command} printed a {type(row).__name__} where a record was")
    found = row.get("id")
    if not isinstance(found, str) or not found:
        raise BackendError(
            f"mnemon {command} printed a record without an id (keys: {_keys(row)});"
            " this adapter cannot map it"
        )
    return row


def recall_results(data: Any) -> list[Json]:
    """Recall results as `{"insight": {...}, "score", "via", "signals"?, ...}`, whichever
    shape Mnemon printed (verbose; compact; a bare list). Raises BackendError on a row
    that names no memory."""
    rows = data.get("results") if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise BackendError("mnemon recall printed no result list")
    out: list[Json] = []
    for row in rows:
        if isinstance(row, dict) and isinstance(row.get("insight"), dict):
            require_id(row["insight"], "recall")
            out.append(row)
        else:  # the compact shape: no timestamps, tags or signals
            require_id(row, "recall")
            out.append({**row, "insight": row, "via": row.get("matched_via", "")})
    return out


def has_signal(result: Json) -> bool:
    """A direct match (keyword, entity or similarity), not a recency anchor or a node reached
    only through the graph walk."""
    signals = result.get("signals")
    if isinstance(signals, dict):
        return any(
            isinstance(signals.get(k), int | float) and signals[k] > 0
            for k in ("keyword", "entity", "similarity")
        )
    return str(result.get("via") or "") in ("keyword", "vector", "hybrid", "entity")


def outcome(data: Json, command: str) -> WriteOutcome:
    """What `remember` or one `import` result row says was done. When skipped, Mnemon's `id`
    is a fresh id that was never stored: the outcome names the kept memory."""
    action = str(data.get("action") or "")
    new_id, replaced = str(data.get("id") or ""), data.get("replaced_id")
    replaced = replaced if isinstance(replaced, str) and replaced else None
    if action == "added":
        advice = data.get("diff_suggestion")
        detail = f"stored by mnemon {command}" + (f" (diff: {advice})" if advice else "")
        return WriteOutcome(id=new_id, action=WriteAction.ADDED, detail=detail)
    if action == "updated":
        detail = f"mnemon replaced {replaced} with this memory" if replaced else "updated"
        return WriteOutcome(
            id=new_id, action=WriteAction.UPDATED, existing_id=replaced, detail=detail
        )
    if action == "skipped":
        kept = replaced or new_id  # import names the kept memory in `id`
        detail = f"mnemon {command}: the store already holds this as {kept}; nothing written"
        return WriteOutcome(id=kept, action=WriteAction.SKIPPED, existing_id=kept, detail=detail)
    raise BackendError(f"mnemon {command} reported an unknown action {action!r}")


def related_neighbors(
    per_seed: dict[str, list[Json]], seeds: list[str], allowed: frozenset[str] | None
) -> list[Neighbor]:
    """What `related` printed for each seed as neighbours, nearest first (then by id): each
    memory once, at its smallest depth, never a seed, only along `allowed` edge types.
    `related` prints neither weights (1.0 is used) nor the node a memory was reached from."""
    best: dict[str, Neighbor] = {}
    for seed in seeds:
        for row in per_seed.get(seed, []):
            require_id(row, "related")
            kind, depth = str(row.get("via_edge_type") or ""), row.get("depth")
            hop = depth if isinstance(depth, int) and depth > 0 else 1
            if row.get("id") in seeds or (allowed is not None and kind not in allowed):
                continue
            known = best.get(str(row["id"]))
            if known is None or hop < known.hops:
                best[str(row["id"])] = Neighbor(
                    memory=to_memory(row),
                    seed_id=seed,
                    via_id=seed,
                    edge_type=kind,
                    weight=1.0,
                    hops=hop,
                )
    return sorted(best.values(), key=lambda n: (n.hops, n.memory.id))


def linked_edge(data: object, source_id: str, target_id: str, kind: str, weight: float) -> Edge:
    """The edge `link` printed (what was asked where it printed nothing)."""
    if not isinstance(data, dict):
        raise BackendError("mnemon link printed no JSON object")
    stored = data.get("metadata")
    return Edge(
        source_id=str(data.get("source_id") or source_id),
        target_id=str(data.get("target_id") or target_id),
        type=str(data.get("edge_type") or kind),
        weight=float(data.get("weight", weight)),
        meta={str(k): str(v) for k, v in stored.items()} if isinstance(stored, dict) else {},
    )
