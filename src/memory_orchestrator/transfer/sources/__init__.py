"""What `orchestrator import` reads: each format turned into `Incoming` memories, one per
record, each with a key that names it the same way every time it is read (what makes an
import idempotent, `transfer.ledger`) and the place it came from.

    jsonl        memories, one JSON object a line (`content`, or `text` / `memory`, and the
                 fields of `memory_write`); an export file (`orchestrator export`) too
    markdown     a folder of markdown notes with YAML frontmatter (Mnemonic, basic-memory)
    mnemon       a Mnemon store: its SQLite file, read-only
    transcript   a chat transcript: turns with speakers and dates (LoCoMo's JSON, or a plain
                 JSON / JSONL list of turns)

`detect` tells the format from the path: a folder, a SQLite file, `.json` (LoCoMo or turns)
or `.jsonl` (an export, turns or memories, by its first record). A record that cannot be a
memory comes as `Incoming` with a `problem` and no memory: the import counts it refused,
with why, and goes on.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from memory_orchestrator.errors import TransferError
from memory_orchestrator.transfer.sources.common import MAX_FILE_BYTES, Incoming, first_record
from memory_orchestrator.transfer.sources.memories import read_jsonl
from memory_orchestrator.transfer.sources.mnemon import read_mnemon
from memory_orchestrator.transfer.sources.notes import read_notes
from memory_orchestrator.transfer.sources.transcripts import is_turn, read_transcript

__all__ = ["FORMATS", "Format", "Incoming", "detect", "read_source"]

Format = Literal["jsonl", "markdown", "mnemon", "transcript"]
FORMATS: tuple[Format, ...] = ("jsonl", "markdown", "mnemon", "transcript")
_SQLITE = b"SQLite format 3\x00"

_READERS: dict[Format, Callable[[Path], list[Incoming]]] = {
    "jsonl": read_jsonl,
    "markdown": read_notes,
    "mnemon": read_mnemon,
    "transcript": read_transcript,
}


def detect(path: Path) -> Format:
    """The format of `path`, told by what it is. Raises TransferError when it cannot be told
    (then `--format` says)."""
    if path.is_dir():
        return "markdown"
    if not path.is_file():
        raise TransferError(f"{path}: no such file or folder")
    try:
        with path.open("rb") as handle:
            head = handle.read(len(_SQLITE))
    except OSError as exc:
        raise TransferError(f"{path}: cannot be read: {exc}") from exc
    if head == _SQLITE:
        return "mnemon"
    suffix = path.suffix.lower()
    if suffix in {".md", ".markdown"}:
        return "markdown"
    if suffix == ".json":
        return "transcript"  # LoCoMo, or a list of turns; memories come as JSON Lines
    if suffix == ".jsonl":
        first = first_record(path)
        return "transcript" if isinstance(first, dict) and is_turn(first) else "jsonl"
    raise TransferError(
        f"{path}: cannot tell its format from its name; say it with --format ({', '.join(FORMATS)})"
    )


def read_source(path: Path, fmt: Format | None = None) -> tuple[Format, list[Incoming]]:
    """Every record of `path` as `Incoming`, in the order the source gives them. Raises
    TransferError when the file as a whole cannot be read (a record that cannot be a memory
    comes back with its `problem`)."""
    chosen = fmt or detect(path)
    if path.is_file() and path.stat().st_size > MAX_FILE_BYTES and chosen != "mnemon":
        raise TransferError(
            f"{path}: over {MAX_FILE_BYTES // 1_000_000} MB; split it into smaller files"
        )
    try:
        return chosen, _READERS[chosen](path)
    except (OSError, UnicodeDecodeError) as exc:
        raise TransferError(f"{path}: cannot be read: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise TransferError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from exc
