"""Which project an agent works in, and where that project's memory lives.

Standard library only: `orchestrator --project auto serve` (what `orchestrator setup` writes
into an agent's config) and the hook commands find the project at every start.

- **The project root**: a path given as `--project PATH`; with `--project auto`, the client's
  own variable for it (`CLAUDE_PROJECT_DIR`, which Claude Code sets for the commands it
  starts; `CURSOR_PROJECT_DIR`, Cursor's), else the nearest folder upward from the working
  directory that holds `.git`, else the working directory itself.
- **Its data dir**: `<data home>/memory-orchestrator/projects/<folder name>-<12 hex digits>`
  (`<data home>`: `$XDG_DATA_HOME`, else `~/.local/share`), the digits a hash of the root's
  absolute path: one user-scope entry in a client's config serves every project, each with a
  memory of its own, and two folders of the same name never share one.
"""

from __future__ import annotations

import hashlib
import os

TYPE_CHECKING = False  # (`typing` is not imported at run time: mypy reads this as true)
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["AUTO", "ROOT_VARIABLES", "data_dir_of", "project_root"]

AUTO = "auto"
# what the clients set for the commands they start: Claude Code, Cursor (which also sets
# CLAUDE_PROJECT_DIR for compatibility)
ROOT_VARIABLES = ("CLAUDE_PROJECT_DIR", "CURSOR_PROJECT_DIR")
MAX_LEVELS = 64  # how far upward a `.git` is looked for


def project_root(value: str, env: Mapping[str, str], cwd: str) -> str:
    """The project root for `--project value` ("auto" or a path), absolute and normalised."""
    if value != AUTO and not value.startswith("${"):  # (a client that did not interpolate)
        return os.path.normpath(os.path.join(cwd, os.path.expanduser(value)))
    for name in ROOT_VARIABLES:
        named = env.get(name, "")
        if named and os.path.isabs(named) and os.path.isdir(named):
            return os.path.normpath(named)
    return git_root(cwd) or os.path.normpath(os.path.abspath(cwd))


def git_root(start: str) -> str | None:
    """The nearest folder upward from `start` (itself included) holding `.git`."""
    path = os.path.normpath(os.path.abspath(start))
    for _ in range(MAX_LEVELS):
        if os.path.exists(os.path.join(path, ".git")):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    return None


def data_dir_of(root: str, env: Mapping[str, str]) -> str:
    """The data dir of the project at `root` (see the module's docstring)."""
    base = env.get("XDG_DATA_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".local", "share"
    )
    name = "".join(c if c.isalnum() or c in "._-" else "_" for c in os.path.basename(root))
    digest = hashlib.sha256(root.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return os.path.join(base, "memory-orchestrator", "projects", f"{name[:40] or 'root'}-{digest}")
