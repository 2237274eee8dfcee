"""Editing a client's own files: merge what `setup` adds, keep one backup, take it out again.

Each file is an `Edit`: how to read it (JSON, TOML, text), how to add our part to what is there
(never touching anything else), and how to take our part out. Applying:

- the new bytes equal the old ones: nothing is written ("unchanged": running `setup` twice
  changes nothing);
- else, when the file existed and has no backup yet, it is copied beside it first
  (`<name>.orchestrator-backup`, once: the backup is always the file as it was before the
  first `setup`), then written (atomically, its mode kept).

Undoing: our part is taken out of the file as it is now; when what is left means what the
backup holds (the same JSON or TOML data, the same text), the backup's bytes are put back, so
the file is byte-identical to what it was; when someone changed the file since, what is left
is written and the backup is kept no longer either way. A file `setup` made (no backup) that
holds nothing else is removed.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import tomlkit
import tomlkit.exceptions

from memory_orchestrator.errors import ConfigError

__all__ = ["BACKUP_SUFFIX", "Edit", "Outcome", "apply", "backup_of", "dump", "load", "undo"]

BACKUP_SUFFIX = ".orchestrator-backup"
MAX_FILE_BYTES = 16 * 1024 * 1024
Kind = Literal["json", "toml", "text"]
Outcome = Literal["written", "unchanged", "restored", "removed", "cleaned", "absent"]


@dataclass(frozen=True)
class Edit:
    """One file: `add` returns the data with our part in it (it may change its argument),
    `remove` the data without it; `empty` says that data left by `remove` holds nothing."""

    path: Path
    kind: Kind
    add: Callable[[Any], Any]
    remove: Callable[[Any], Any]
    empty: Callable[[Any], bool]
    what: str  # what our part is, for the report: "MCP server 'memory'", "hooks", ...


def backup_of(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def _read(path: Path) -> bytes | None:
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"{path} is over 16 MB: not a client's config file; left as it is")
    return raw


def load(kind: Kind, raw: bytes | None, path: Path) -> Any:
    """The file's data (a missing file: empty data)."""
    text = (raw or b"").decode("utf-8", "surrogateescape")
    if kind == "text":
        return text
    if kind == "toml":
        try:
            return tomlkit.parse(text)
        except tomlkit.exceptions.TOMLKitError as exc:
            raise ConfigError(f"{path} is not valid TOML ({exc}); left as it is") from exc
    if not text.strip():
        return {}
    try:
        found = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}); left as it is") from exc
    if not isinstance(found, dict):
        raise ConfigError(f"{path} does not hold a JSON object; left as it is")
    return found


def _indent(raw: bytes | None) -> str | int:
    """The indentation of the file's first indented line (two spaces when there is none)."""
    for line in (raw or b"").decode("utf-8", "replace").splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            return line[: len(line) - len(stripped)]
    return 2


def dump(kind: Kind, data: Any, raw: bytes | None) -> bytes:
    """The data as the file's bytes, in the file's own style where we can tell it."""
    if kind == "text":
        text = str(data)
    elif kind == "toml":
        text = tomlkit.dumps(data)
    else:
        text = json.dumps(data, indent=_indent(raw), ensure_ascii=False) + "\n"
    return text.encode("utf-8", "surrogateescape")


def _mode_of(path: Path) -> int:
    """A file's permissions; for a new one, what the umask leaves of rw-rw-rw-."""
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def _write(path: Path, content: bytes, like: Path | None = None) -> None:
    """Write atomically, keeping the file's permissions (or those of `like`: a backup is
    as private as the file it copies, ~/.claude.json holds credentials)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = _mode_of(like or path)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(content)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def apply(edit: Edit) -> Outcome:
    """Merge our part into the file (see the module's docstring)."""
    raw = _read(edit.path)
    new = dump(edit.kind, edit.add(load(edit.kind, raw, edit.path)), raw)
    if raw is not None and new == raw:
        return "unchanged"
    backup = backup_of(edit.path)
    if raw is not None and not backup.exists():
        _write(backup, raw, like=edit.path)
    _write(edit.path, new)
    return "written"


def _pruned(value: Any) -> Any:
    """The data with empty tables and lists left out (`{"mcpServers": {}}` means `{}`)."""
    if isinstance(value, dict):
        kept = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in ({}, [])}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def _same(kind: Kind, left: Any, right: Any) -> bool:
    """Whether what is left after taking our part out means what the backup holds."""
    if kind == "text":
        return bool(str(left).rstrip() == str(right).rstrip())
    if kind == "toml":
        left, right = left.unwrap(), right.unwrap()
    return bool(_pruned(left) == _pruned(right))


def undo(edit: Edit) -> Outcome:
    """Take our part out of the file (see the module's docstring)."""
    raw = _read(edit.path)
    backup = backup_of(edit.path)
    saved = _read(backup)
    if raw is None:
        backup.unlink(missing_ok=True)
        return "absent"
    left = edit.remove(load(edit.kind, raw, edit.path))
    if saved is not None:
        if _same(edit.kind, left, load(edit.kind, saved, backup)):
            _write(edit.path, saved)
            backup.unlink()
            return "restored"
        backup.unlink()
    elif edit.empty(left):
        edit.path.unlink()
        return "removed"
    new = dump(edit.kind, left, raw)
    if new == raw:
        return "unchanged"
    _write(edit.path, new)
    return "cleaned"
