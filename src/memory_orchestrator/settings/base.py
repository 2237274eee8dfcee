"""What every settings section shares: checked paths, store names and the `Section` base."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
)


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "memory-orchestrator"


# ---------------------------------------------------------------- checked values
# Paths and names from config are checked when settings load, so a bad value stops the
# program with one clear line instead of failing later inside a store or a subprocess.

MNEMON_STORE_NAME = r"^[a-zA-Z0-9][a-zA-Z0-9_-]*$"
_STORE_NAME = re.compile(MNEMON_STORE_NAME)
MAX_STORE_NAME_CHARS = 200  # mnemon-mcp's scope limit; far above any real store name


def check_store_name(value: str | None) -> str | None:
    """A store name (Mnemon `--store`, mnemon-mcp scope, a fused store label): letters,
    digits, '_' and '-', starting with a letter or digit; never a path."""
    if value is None:
        return None
    if len(value) > MAX_STORE_NAME_CHARS or not _STORE_NAME.match(value):
        raise ValueError(
            f"invalid store name {value[:60]!r}: use at most {MAX_STORE_NAME_CHARS} letters,"
            " digits, '_' and '-', starting with a letter or digit"
        )
    return value


def _plain(value: Path | str) -> str:
    text = str(value)
    if "\x00" in text:
        raise ValueError("path contains a NUL character")
    if not text.strip():
        raise ValueError("path is empty")
    return text


def _resolved(value: Path) -> Path:
    try:
        return value.expanduser().resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise ValueError(f"cannot resolve path {str(value)!r}: {exc}") from exc


def _check_parents(path: Path) -> None:
    """The nearest existing ancestor must be a directory, or the path can never be made."""
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"{parent} is not a directory, so {path} cannot be created")
            return


def _file_path(value: Path | None) -> Path | None:
    """A file the program reads or creates: no NUL, resolved, not a directory, and its
    nearest existing parent a directory."""
    if value is None:
        return None
    _plain(value)
    path = _resolved(value)
    if path.is_dir():
        raise ValueError(f"{path} is a directory; expected a file path")
    _check_parents(path)
    return path


def _dir_path(value: Path | None) -> Path | None:
    """A directory the program reads or creates: no NUL, resolved, not an existing file."""
    if value is None:
        return None
    _plain(value)
    path = _resolved(value)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{path} exists and is not a directory")
    _check_parents(path)
    return path


def _executable(value: Path | str | None) -> Path | str | None:
    """An executable: a bare name is looked up on PATH when used; anything with a directory
    part is resolved now and must not be a directory."""
    if value is None:
        return None
    text = _plain(value)
    if "/" not in text:
        return value
    path = _resolved(Path(text))
    if path.is_dir():
        raise ValueError(f"{path} is a directory, not an executable")
    _check_parents(path)
    return path if isinstance(value, Path) else str(path)


FilePath = Annotated[Path | None, AfterValidator(_file_path)]
DirPath = Annotated[Path | None, AfterValidator(_dir_path)]
StoreName = Annotated[str | None, AfterValidator(check_store_name)]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)
