"""Mnemonic's files: markdown with YAML frontmatter (MIF level 3), read and written.

Layout: `<root>/<namespace>/<slug>-<id8>.memory.md`. Frontmatter written (and read):
`id, type (semantic|episodic|procedural), namespace, created, modified, title, tags,
temporal{valid_from, recorded_at, decay{model, half_life, strength}},
provenance{source_type, agent, confidence}` plus `entities`, `importance` and `relations`
(`[{id, type, weight}]`, written by `link`) which Mnemonic leaves alone. The body is
"# <title>" and the content.

Mapping: type <-> type (`resource`, which MIF lacks, is written as semantic with the tag
`resource` and read back as resource); namespace <- `metadata["namespace"]`, else one per type
(semantic -> context, episodic -> episodic, procedural -> patterns); `created_at` <->
`temporal.valid_from`; `confidence` <-> `provenance.confidence`; decay half-life per type as
the seed's table (P30D, P7D, P14D).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from memory_orchestrator import text
from memory_orchestrator.backends import kit
from memory_orchestrator.models import Memory, MemoryType, MetaValue, NewMemory

NAME = "mnemonic"
SUFFIX = ".memory.md"
NAMESPACES = {
    MemoryType.SEMANTIC: "context",
    MemoryType.EPISODIC: "episodic",
    MemoryType.PROCEDURAL: "patterns",
    MemoryType.RESOURCE: "context",
}
HALF_LIFE = {
    MemoryType.SEMANTIC: "P30D",
    MemoryType.EPISODIC: "P7D",
    MemoryType.PROCEDURAL: "P14D",
    MemoryType.RESOURCE: "P30D",
}
_NAMESPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*(/[A-Za-z0-9][A-Za-z0-9_-]*)*$")


def slug(value: str) -> str:
    words = re.findall(r"[a-z0-9]+", value.casefold())
    return "-".join(words)[:48].strip("-") or "memory"


def digest(content: str) -> str:
    return text.content_hash(content)


def split_frontmatter(raw: str) -> tuple[dict[str, Any], str] | None:
    """(frontmatter, body) of a file, or None when it has no valid YAML frontmatter."""
    if not raw.startswith("---"):
        return None
    parts = re.split(r"^---[ \t]*$", raw, maxsplit=2, flags=re.MULTILINE)
    if len(parts) < 3:
        return None
    try:
        front = yaml.safe_load(parts[1])
    except yaml.YAMLError:
        return None
    return (front, parts[2].lstrip("\n")) if isinstance(front, dict) else None


@dataclass
class Doc:
    path: Path
    stamp: tuple[int, int]  # mtime_ns, size
    memory: Memory
    relations: list[dict[str, Any]]
    digest: str
    stems: dict[str, int]
    length: int
    seq: int = 0  # when this backend read the file as it is now (see list_memories)


def unit(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return min(1.0, max(0.0, float(value)))
    return None


def _labels(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return ()
    return tuple(str(v) for v in value if isinstance(v, str | int | float) and str(v).strip())


def _section(front: dict[str, Any], key: str) -> dict[str, Any]:
    value = front.get(key)
    return value if isinstance(value, dict) else {}


def parse_doc(path: Path, raw: str, stamp: tuple[int, int]) -> Doc | None:
    """A memory file read into a `Doc`; None when it is not one."""
    split = split_frontmatter(raw)
    if split is None:
        return None
    front, body = split
    mem_id = front.get("id")
    if not isinstance(mem_id, str | int) or not str(mem_id):
        return None
    title = str(front.get("title") or "")
    content = body.strip()
    heading = f"# {title}".strip()
    if title and content.startswith(heading):
        content = content[len(heading) :].strip()
    if not content:
        content = title
    if not content:
        return None
    tags = _labels(front.get("tags"))
    kind_name = str(front.get("type") or "semantic")
    kind = MemoryType(kind_name) if kind_name in MemoryType._value2member_map_ else None
    if kind is MemoryType.SEMANTIC and "resource" in tags:
        kind = MemoryType.RESOURCE
    temporal, provenance = _section(front, "temporal"), _section(front, "provenance")
    when = kit.parse_time(temporal.get("valid_from")) or kit.parse_time(front.get("created"))
    meta: dict[str, MetaValue] = {"path": str(path), "title": title}
    if isinstance(front.get("namespace"), str):
        meta["namespace"] = front["namespace"]
    decay = _section(temporal, "decay")
    if isinstance(decay.get("half_life"), str):
        meta["half_life"] = decay["half_life"]
    entities = _labels(front.get("entities"))
    by = front.get("superseded_by")
    memory = Memory(
        id=str(mem_id),
        content=content,
        type=kind or MemoryType.SEMANTIC,
        entities=entities,
        tags=tuple(t for t in tags if t != "resource" or kind is not MemoryType.RESOURCE),
        created_at=when,
        source=str(provenance["agent"]) if isinstance(provenance.get("agent"), str) else None,
        importance=unit(front.get("importance")),
        confidence=unit(provenance.get("confidence")),
        store=NAME,
        metadata=meta,
        superseded_by=str(by) if isinstance(by, str | int) and str(by) else None,
        superseded_at=kit.parse_time(temporal.get("valid_until")) if by else None,
    )
    relations = [r for r in front.get("relations") or [] if isinstance(r, dict) and r.get("id")]
    stems: dict[str, int] = {}
    words = text.all_stems(f"{title} {content} {' '.join(entities)} {' '.join(tags)}")
    for stem in words:
        stems[stem] = stems.get(stem, 0) + 1
    return Doc(path, stamp, memory, relations, digest(content), stems, max(len(words), 1))


def by_seq(doc: Doc) -> int:
    return doc.seq


def render(front: dict[str, Any], title: str, content: str) -> str:
    head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100)
    return f"---\n{head}---\n\n# {title}\n\n{content.rstrip()}\n"


def new_front(memory: NewMemory, mem_id: str, *, agent: str) -> tuple[str, str, dict[str, Any]]:
    """The namespace, title and frontmatter of a new memory file (see the module docstring)."""
    namespace = memory.metadata.get("namespace")
    if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
        namespace = NAMESPACES[memory.type]
    now = kit.utc_text(datetime.now(UTC))
    title_meta = memory.metadata.get("title")
    title = title_meta if isinstance(title_meta, str) and title_meta.strip() else None
    title = title or " ".join(memory.content.split())[:80]
    tags = list(memory.tags)
    if memory.type is MemoryType.RESOURCE and "resource" not in tags:
        tags.append("resource")
    front: dict[str, Any] = {
        "id": mem_id,
        "type": "semantic" if memory.type is MemoryType.RESOURCE else memory.type.value,
        "namespace": namespace,
        "created": now,
        "modified": now,
        "title": title,
        "tags": tags,
        "temporal": {
            "valid_from": kit.utc_text(memory.created_at) if memory.created_at else now,
            "recorded_at": now,
            "decay": {
                "model": "exponential",
                "half_life": HALF_LIFE[memory.type],
                "strength": 1.0,
            },
        },
        "provenance": {
            "source_type": "conversation",
            "agent": memory.source or agent,
            "confidence": memory.confidence if memory.confidence is not None else 0.8,
        },
    }
    if memory.entities:
        front["entities"] = list(memory.entities)
    if memory.importance is not None:
        front["importance"] = memory.importance
    return namespace, title, front
