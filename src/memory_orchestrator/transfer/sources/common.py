"""What every import format shares: the `Incoming` record, its key, and one way to make a
memory of a record's fields (the same validation as `memory_write`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memory_orchestrator.models import NewMemory, describe_errors

MAX_FILE_BYTES = 500_000_000  # a larger file is refused: split it
MAX_LINE_CHARS = 1_000_000


@dataclass(frozen=True)
class Incoming:
    """One record of a source: the memory it makes, or why it makes none.

    `key` names the record the same way on every read of the same source (its own id where
    it has one, else a digest of what it says): the import ledger's key. `where` says where
    it came from, for people (a file and line, a note's path, a turn's id)."""

    key: str
    where: str
    memory: NewMemory | None
    problem: str | None = None  # why it cannot be a memory: refused
    skip: str | None = None  # why the source itself says not to bring it in: skipped


def digest(*parts: object) -> str:
    """A short, stable digest of `parts` (JSON-encoded): a key for a record with no id."""
    text = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def made(key: str, where: str, fields: dict[str, Any]) -> Incoming:
    """`fields` as a memory (validated as `memory_write` validates it), or as a record
    refused with the reason."""
    try:
        return Incoming(key, where, NewMemory.model_validate(fields))
    except ValidationError as exc:
        return Incoming(key, where, None, describe_errors(exc))


def first_record(path: Path) -> object:
    """The first non-blank line of a JSON Lines file, parsed (None when there is none or it
    is no JSON)."""
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                try:
                    return json.loads(line[:MAX_LINE_CHARS])
                except json.JSONDecodeError:
                    return None
    return None


def json_lines(path: Path) -> list[tuple[int, object | None, str | None]]:
    """Each non-blank line of a JSON Lines file: its number, the value (None when the line is
    not JSON) and why not."""
    out: list[tuple[int, object | None, str | None]] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if len(line) > MAX_LINE_CHARS:
                out.append((number, None, f"over {MAX_LINE_CHARS} characters"))
                continue
            try:
                out.append((number, json.loads(line), None))
            except json.JSONDecodeError as exc:
                out.append((number, None, f"not JSON ({exc.msg})"))
    return out


def labels(value: object) -> list[str]:
    """A list of labels from a string or a list of strings (others dropped)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return [str(v).strip() for v in value if isinstance(v, str | int | float) and str(v).strip()]
