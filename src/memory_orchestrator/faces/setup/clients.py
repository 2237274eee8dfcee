"""The clients `setup` knows: which of their files hold what, at project and at user scope,
in their documented formats (docs/how-to/connect-an-agent.md cites each client's pages).

- claude-code: the server in `.mcp.json` (user: `~/.claude.json`), `mcpServers`; the hooks
  in `.claude/settings.json` (user: `~/.claude/settings.json`): SessionStart,
  UserPromptSubmit, PreCompact; the guideline in `CLAUDE.md` (user: `~/.claude/CLAUDE.md`).
- codex: the server in `.codex/config.toml` (user: `$CODEX_HOME/config.toml`, default
  `~/.codex`), `mcp_servers`; the hooks in `.codex/hooks.json` (`$CODEX_HOME/hooks.json`):
  SessionStart, UserPromptSubmit, Stop; the guideline in `AGENTS.md`
  (`$CODEX_HOME/AGENTS.md`).
- cursor: the server in `.cursor/mcp.json` (user: `~/.cursor/mcp.json`), `mcpServers`; the
  hooks in `.cursor/hooks.json` (`~/.cursor/hooks.json`): sessionStart, preCompact (no
  prompt hook: `beforeSubmitPrompt` cannot add context); the guideline in
  `.cursor/rules/memory-orchestrator.mdc` (project only: Cursor's user rules are a setting).

How the entry starts the orchestrator (`Launch`): run from `uvx` (an environment in uv's
cache, gone at its next clean), a pinned `uvx --from mnemon-memory-orchestrator==<version>
orchestrator ...`; else the absolute path of the `orchestrator` script that runs now (a
checkout's `.venv/bin/orchestrator`, a virtualenv's, `uv tool`'s). Its arguments: `--project
auto serve` (Cursor: `--project ${workspaceFolder}`, which Cursor fills in), so one entry at
user scope serves each project with its own memory (`faces.shared.project`).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

from memory_orchestrator.faces.setup import parts
from memory_orchestrator.faces.setup.files import Edit
from memory_orchestrator.faces.shared.address import package_version

__all__ = ["CLIENTS", "Launch", "Plan", "Scope", "launch_of", "plan", "server_entry"]

CLIENTS = ("claude-code", "codex", "cursor")
Scope = Literal["project", "user"]
CURSOR_RULE_HEAD = """\
---
description: When to recall and when to write long-term memories (memory-orchestrator)
alwaysApply: true
---
"""
# how long each client may wait for a hook (its own setting, in seconds): the hook keeps to
# its own budget (at most 1 s) and the clients' defaults are far longer
HOOK_TIMEOUT_S = 5
UV_CACHE_PARTS = ("/archive-v0/", "/builds-v0/", "/environments-v")


@dataclass(frozen=True)
class Launch:
    """How a client's config starts this orchestrator."""

    command: str
    prefix: tuple[str, ...] = ()
    how: str = "script"  # "script" or "uvx"

    def argv(self, *args: str) -> list[str]:
        return [self.command, *self.prefix, *args]

    def shell(self, *args: str) -> str:
        return shlex.join(self.argv(*args))


def launch_of(
    prefix: str | None = None, argv0: str | None = None, version: str | None = None
) -> Launch:
    """How the running orchestrator was installed, and so how a config should start it."""
    prefix = prefix if prefix is not None else sys.prefix
    cache = os.environ.get("UV_CACHE_DIR")
    in_cache = any(p in prefix + "/" for p in UV_CACHE_PARTS) or bool(
        cache and os.path.abspath(prefix).startswith(os.path.abspath(cache) + os.sep)
    )
    if in_cache:
        pinned = f"{parts.DIST}=={version or package_version()}"
        return Launch("uvx", ("--from", pinned, "orchestrator"), "uvx")
    argv0 = argv0 if argv0 is not None else sys.argv[0]
    if os.path.basename(argv0) == "orchestrator" and os.path.isfile(argv0):
        return Launch(os.path.abspath(argv0))
    script = Path(prefix) / "bin" / "orchestrator"
    if script.is_file():
        return Launch(str(script))
    return Launch(shutil.which("orchestrator") or "orchestrator")


def server_args(client: str, root_options: tuple[str, ...] = ()) -> list[str]:
    project = "${workspaceFolder}" if client == "cursor" else "auto"
    return [*root_options, "--project", project, "serve"]


def server_entry(launch: Launch, client: str, root_options: tuple[str, ...] = ()) -> dict[str, Any]:
    """The MCP server entry (the same shape in every client's file)."""
    return {"command": launch.command, "args": [*launch.prefix, *server_args(client, root_options)]}


def _hook(launch: Launch, event: str, client: str, root_options: tuple[str, ...]) -> str:
    return launch.shell("hook", event, "--client", client, *root_options)


@dataclass(frozen=True)
class Plan:
    """What `setup <client>` does at one scope: its edits, and the steps a person must take
    in the client (trust, a feature flag) or paste by hand."""

    client: str
    scope: Scope
    edits: list[Edit]
    steps: list[str] = field(default_factory=list)


def _home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def _codex_home() -> Path:
    named = os.environ.get("CODEX_HOME")
    return Path(named) if named else _home() / ".codex"


def _json_server(path: Path, name: str, entry: dict[str, Any]) -> Edit:
    return Edit(
        path,
        "json",
        partial(_add_server, name=name, entry=entry, path=path),
        partial(parts.remove_server, name=name),
        lambda data: not data,
        f"MCP server {name!r}",
    )


def _add_server(data: Any, *, name: str, entry: dict[str, Any], path: Path) -> Any:
    return parts.add_server(data, name, entry, path)


def _rules(path: Path, head: str = "") -> Edit:
    def empty(text: Any) -> bool:
        return str(text).strip() in ("", head.strip())

    return Edit(
        path, "text", partial(parts.add_block, head=head), parts.remove_block, empty, "guideline"
    )


def plan(
    client: str,
    scope: Scope,
    root: Path,
    launch: Launch,
    *,
    name: str = "memory",
    hooks: bool = False,
    root_options: tuple[str, ...] = (),
) -> Plan:
    """The edits of `setup client --scope scope` for the project at `root`."""
    entry = server_entry(launch, client, root_options)
    hook = partial(_hook, launch, client=client, root_options=root_options)
    make = {"claude-code": _claude_code, "codex": _codex, "cursor": _cursor}[client]
    edits, steps = make(scope, root, name, entry, hook if hooks else None)
    return Plan(client, scope, edits, steps)


Parts = tuple[list[Edit], list[str]]
Hook = Callable[[str], str]  # an event -> the hook's command line
TIMEOUT = {"timeout": HOOK_TIMEOUT_S}


def _handler(command: str, **more: Any) -> dict[str, Any]:
    return {"type": "command", "command": command, **more, **TIMEOUT}


def _claude_code(
    scope: Scope, root: Path, name: str, entry: dict[str, Any], hook: Hook | None
) -> Parts:
    base = root if scope == "project" else _home() / ".claude"
    mcp = root / ".mcp.json" if scope == "project" else _home() / ".claude.json"
    edits = [_json_server(mcp, name, entry)]
    if hook is not None:
        groups: dict[str, dict[str, Any]] = {
            "SessionStart": {
                "matcher": "startup|resume|clear|compact",
                "hooks": [_handler(hook("session-start"))],
            },
            "UserPromptSubmit": {"hooks": [_handler(hook("prompt"))]},
            "PreCompact": {"hooks": [_handler(hook("pre-compact"))]},
        }
        settings = (root / ".claude" if scope == "project" else base) / "settings.json"
        edits.append(_hook_groups(settings, groups))
    edits.append(_rules(base / "CLAUDE.md"))
    steps = []
    if scope == "project":
        steps.append(
            "Claude Code asks once to approve the servers of a project's .mcp.json: answer"
            " yes when it starts in this project (`claude mcp list` shows the server)."
        )
    return edits, steps


def _codex(scope: Scope, root: Path, name: str, entry: dict[str, Any], hook: Hook | None) -> Parts:
    base = root / ".codex" if scope == "project" else _codex_home()
    config = base / "config.toml"
    edits = [
        Edit(
            config,
            "toml",
            partial(_add_toml_server, name=name, entry=entry, path=config),
            partial(parts.remove_toml_server, name=name),
            lambda doc: not doc.unwrap(),
            f"MCP server {name!r}",
        )
    ]
    steps = []
    if hook is not None:
        status = "Recalling memories"
        groups: dict[str, dict[str, Any]] = {
            "SessionStart": {
                "matcher": "startup|resume|clear",
                "hooks": [_handler(hook("session-start"), statusMessage=status)],
            },
            "UserPromptSubmit": {"hooks": [_handler(hook("prompt"), statusMessage=status)]},
            "Stop": {"hooks": [_handler(hook("stop"))]},
        }
        edits.append(_hook_groups(base / "hooks.json", groups))
        steps.append(
            "Codex asks you to review and trust new hooks: open /hooks in Codex and trust the"
            " memory-orchestrator ones. Hooks are on unless `[features]` `hooks = false`; a"
            f" release before hooks were on by default needs `codex_hooks = true` in {config}."
        )
    edits.append(_rules((root if scope == "project" else base) / "AGENTS.md"))
    if scope == "project":
        steps.append(
            "Codex reads a project's .codex/ only in a trusted project: trust this folder"
            " when Codex asks (or set it in ~/.codex/config.toml, [projects])."
        )
    return edits, steps


def _cursor(scope: Scope, root: Path, name: str, entry: dict[str, Any], hook: Hook | None) -> Parts:
    base = root / ".cursor" if scope == "project" else _home() / ".cursor"
    edits = [_json_server(base / "mcp.json", name, entry)]
    steps = []
    if hook is not None:
        handlers = {
            "sessionStart": {"command": hook("session-start"), **TIMEOUT},
            "preCompact": {"command": hook("pre-compact"), **TIMEOUT},
        }
        edits.append(
            Edit(
                base / "hooks.json",
                "json",
                partial(_add_handlers, handlers=handlers, path=base / "hooks.json"),
                parts.remove_hook_handlers,
                lambda data: not {k: v for k, v in data.items() if k != "version"},
                "hooks",
            )
        )
        steps.append(
            "Cursor has no hook that adds context to a prompt (beforeSubmitPrompt can only"
            " let it through or stop it): the per-prompt recall comes from the rule."
        )
    if scope == "project":
        edits.append(_rules(base / "rules" / "memory-orchestrator.mdc", CURSOR_RULE_HEAD))
    else:
        steps.append(
            "Cursor keeps user rules in its settings, not in a file: paste the guideline"
            " (`orchestrator setup cursor --print-rules`) into Settings > Rules."
        )
    return edits, steps


def _hook_groups(path: Path, groups: dict[str, dict[str, Any]]) -> Edit:
    return Edit(
        path,
        "json",
        partial(_add_groups, groups=groups, path=path),
        parts.remove_hook_groups,
        lambda data: not data,
        "hooks",
    )


def _add_groups(data: Any, *, groups: dict[str, dict[str, Any]], path: Path) -> Any:
    return parts.add_hook_groups(data, groups, path)


def _add_handlers(data: Any, *, handlers: dict[str, dict[str, Any]], path: Path) -> Any:
    return parts.add_hook_handlers(data, handlers, path)


def _add_toml_server(doc: Any, *, name: str, entry: dict[str, Any], path: Path) -> Any:
    return parts.add_toml_server(doc, name, entry, path)
