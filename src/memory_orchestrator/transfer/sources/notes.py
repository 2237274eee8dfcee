"""A folder of markdown notes with YAML frontmatter, one memory per note: Mnemonic's
`*.memory.md` files (MIF: `id`, `type`, `namespace`, `title`, `tags`, `temporal.valid_from`,
`provenance.confidence`, ...) and basic-memory's notes (`title`, `type`, `permalink`,
`tags`) alike; a note without frontmatter is its text, titled by its file name.

Mapping: the body is the content (a first `# <title>` heading left out; a note with no body
is its title); `type` when it is a memory type (else semantic); `tags`; `entities`; the time
from `temporal.valid_from`, else `created`, else `date`; `provenance.confidence`,
`importance`; the source from `provenance.agent`, else "markdown". The title, the note's path
(relative to the folder) and a namespace go into the metadata. Its key: the note's `id`, else
its `permalink`, else its path. Dot folders (`.git`, `.obsidian`) are left out.
"""

from __future__ import annotations

from datetime import date, datetime, time
from pathlib import Path
from typing import Any

from memory_orchestrator.backends.kit import parse_time
from memory_orchestrator.backends.mnemonic_files import split_frontmatter
from memory_orchestrator.models import MemoryType
from memory_orchestrator.transfer.sources.common import Incoming, labels, made

MAX_NOTE_BYTES = 1_000_000


def read_notes(path: Path) -> list[Incoming]:
    if path.is_file():
        return [_note(path, path.name)]
    files = sorted(
        p
        for p in path.rglob("*.md")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
    )
    return [_note(p, p.relative_to(path).as_posix()) for p in files]


def _note(path: Path, name: str) -> Incoming:
    if path.stat().st_size > MAX_NOTE_BYTES:
        return Incoming(f"note:{name}", name, None, f"over {MAX_NOTE_BYTES} bytes")
    raw = path.read_text(encoding="utf-8")
    split = split_frontmatter(raw)
    front, body = split if split is not None else ({}, raw)
    title = _text(front.get("title")) or _heading(body) or path.name.removesuffix(".md")
    content = body.strip()
    heading = f"# {title}"
    if content.startswith(heading):
        content = content[len(heading) :].strip()
    temporal, provenance = _section(front, "temporal"), _section(front, "provenance")
    when = next(
        (
            t
            for t in map(
                _time, (temporal.get("valid_from"), front.get("created"), front.get("date"))
            )
            if t is not None
        ),
        None,
    )
    kind = str(front.get("type") or "")
    fields: dict[str, Any] = {
        "content": content or title,
        "type": kind if kind in MemoryType._value2member_map_ else MemoryType.SEMANTIC,
        "tags": labels(front.get("tags")),
        "entities": labels(front.get("entities")),
        "created_at": when,
        "source": _text(provenance.get("agent")) or "markdown",
        "metadata": {"title": title, "path": name},
    }
    namespace = _text(front.get("namespace"))
    if namespace:
        fields["metadata"]["namespace"] = namespace
    for field, value in (
        ("confidence", provenance.get("confidence")),
        ("importance", front.get("importance")),
    ):
        if isinstance(value, int | float) and not isinstance(value, bool):
            fields[field] = value
    ident = _text(front.get("id")) or _text(front.get("permalink")) or name
    return made(f"note:{ident}", name, fields)


def _text(value: object) -> str:
    return str(value).strip() if isinstance(value, str | int) and str(value).strip() else ""


def _section(front: dict[str, Any], key: str) -> dict[str, Any]:
    value = front.get(key)
    return value if isinstance(value, dict) else {}


def _heading(body: str) -> str:
    for line in body.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
        if line.strip():
            return ""
    return ""


def _time(value: object) -> datetime | None:
    """A frontmatter time: ISO text, or the datetime or date YAML makes of it."""
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime.combine(value, time())
    return parse_time(value)
