"""What `setup` adds to a client's files, and how it knows its own part again: the MCP server
entry (JSON `mcpServers`, Codex's TOML `mcp_servers`), the hook entries (Claude Code's and
Codex's `hooks.json` shape, Cursor's), and the guideline between marked lines in a rules file.

Ours is recognised by what it runs: a server entry whose command is an `orchestrator` script
(or `uvx` of this package) serving, a hook whose command runs `orchestrator ... hook ...
--client`. Anything else is never changed; a server of another kind under our name is a
clear error (choose another with `--name`).
"""

from __future__ import annotations

import os
import shlex
from typing import Any

import tomlkit
from tomlkit.items import Table

from memory_orchestrator.errors import ConfigError

__all__ = [
    "BEGIN",
    "END",
    "GUIDELINE",
    "add_block",
    "add_hook_groups",
    "add_hook_handlers",
    "add_server",
    "add_toml_server",
    "remove_block",
    "remove_hook_groups",
    "remove_hook_handlers",
    "remove_server",
    "remove_toml_server",
]

DIST = "mnemon-memory-orchestrator"
BEGIN = "<!-- memory-orchestrator:begin (added by `orchestrator setup`; --undo removes it) -->"
END = "<!-- memory-orchestrator:end -->"
GUIDELINE = """\
## Memory

This project keeps a long-term memory, reached through the `memory` MCP server's tools:

- Before answering anything that may depend on earlier work (decisions, conventions, people,
  the user's preferences, what was tried), call `memory_context` with the question, and cite
  the memory ids you rely on.
- When something durable comes up (a decision and its reason, a preference, a fact about the
  project or a person, a correction of an earlier fact), call `memory_write` with one short
  fact in plain words, naming its entities. A correction is written as the new fact: the old
  one is superseded, never lost.
- When the user asks to forget something, call `memory_forget` with its id and the reason.
- Never store secrets, credentials or anything the user asked not to keep.
"""


# ---------------------------------------------------------------- what is ours


def _runs_us(words: list[str]) -> bool:
    if not words:
        return False
    program = os.path.basename(words[0])
    return program == "orchestrator" or (
        program == "uvx" and any(w.startswith(DIST) for w in words)
    )


def ours_server(entry: Any) -> bool:
    """An MCP server entry `setup` wrote (for any version or install of this package)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return False
    args = entry.get("args") or []
    words = [entry["command"], *(str(a) for a in args)] if isinstance(args, list) else []
    return _runs_us(words) and "serve" in words


def ours_command(command: Any) -> bool:
    """A hook command `setup` wrote."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return _runs_us(words) and "hook" in words and "--client" in words


def _table(data: Any, key: str, path: object) -> dict[str, Any]:
    found = data.setdefault(key, {})
    if not isinstance(found, dict):
        raise ConfigError(f"{path}: `{key}` is not an object; left as it is")
    return found


# ---------------------------------------------------------------- the MCP server entry


def add_server(data: dict[str, Any], name: str, entry: dict[str, Any], path: object) -> Any:
    servers = _table(data, "mcpServers", path)
    found = servers.get(name)
    if found is not None and found != entry and not ours_server(found):
        raise ConfigError(
            f"{path} already has an MCP server named {name!r} that runs something else; left"
            " as it is (choose another name with --name)"
        )
    servers[name] = entry
    return data


def remove_server(data: dict[str, Any], name: str) -> Any:
    servers = data.get("mcpServers")
    if isinstance(servers, dict) and ours_server(servers.get(name)):
        del servers[name]
        if not servers:
            del data["mcpServers"]
    return data


def add_toml_server(doc: Any, name: str, entry: dict[str, Any], path: object) -> Any:
    servers = doc.get("mcp_servers")
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        doc["mcp_servers"] = servers
    if not isinstance(servers, Table):
        raise ConfigError(f"{path}: `mcp_servers` is not a table; left as it is")
    found = servers.get(name)
    if found is not None:
        plain = found.unwrap() if isinstance(found, Table) else found
        if plain == entry:
            return doc
        if not ours_server(plain):
            raise ConfigError(
                f"{path} already has an MCP server named {name!r} that runs something else;"
                " left as it is (choose another name with --name)"
            )
        del servers[name]
    table = tomlkit.table()
    for key, value in entry.items():
        table[key] = value
    table.add(tomlkit.nl())  # (a blank line before whatever table follows)
    servers[name] = table
    return doc


def remove_toml_server(doc: Any, name: str) -> Any:
    servers = doc.get("mcp_servers")
    found = servers.get(name) if isinstance(servers, Table) else None
    if found is not None and ours_server(found.unwrap() if isinstance(found, Table) else found):
        del servers[name]
        if not servers:
            del doc["mcp_servers"]
    return doc


# ---------------------------------------------------------------- hooks


def _ours_group(group: Any) -> bool:
    handlers = group.get("hooks") if isinstance(group, dict) else None
    if not isinstance(handlers, list) or not handlers:
        return False
    return all(isinstance(h, dict) and ours_command(h.get("command")) for h in handlers)


def add_hook_groups(data: dict[str, Any], groups: dict[str, dict[str, Any]], path: object) -> Any:
    """Claude Code's and Codex's shape: event -> [matcher group {matcher?, hooks: [...]}]."""
    hooks = _table(data, "hooks", path)
    for event, group in groups.items():
        found = hooks.setdefault(event, [])
        if not isinstance(found, list):
            raise ConfigError(f"{path}: hooks.{event} is not a list; left as it is")
        if group in found and sum(_ours_group(g) for g in found) == 1:
            continue
        found[:] = [g for g in found if not _ours_group(g)] + [group]
    return data


def remove_hook_groups(data: dict[str, Any]) -> Any:
    hooks = data.get("hooks")
    if isinstance(hooks, dict):
        for event in list(hooks):
            if isinstance(hooks[event], list) and any(_ours_group(g) for g in hooks[event]):
                hooks[event] = [g for g in hooks[event] if not _ours_group(g)]
                if not hooks[event]:
                    del hooks[event]
        if not hooks:
            del data["hooks"]
    return data


def add_hook_handlers(
    data: dict[str, Any], handlers: dict[str, dict[str, Any]], path: object
) -> Any:
    """Cursor's shape: {version: 1, hooks: {event: [{command, timeout}]}}."""
    data.setdefault("version", 1)
    hooks = _table(data, "hooks", path)
    for event, handler in handlers.items():
        found = hooks.setdefault(event, [])
        if not isinstance(found, list):
            raise ConfigError(f"{path}: hooks.{event} is not a list; left as it is")
        mine = [h for h in found if isinstance(h, dict) and ours_command(h.get("command"))]
        if mine == [handler]:
            continue
        found[:] = [h for h in found if h not in mine] + [handler]
    return data


def remove_hook_handlers(data: dict[str, Any]) -> Any:
    hooks = data.get("hooks")
    if isinstance(hooks, dict):
        for event in list(hooks):
            found = hooks[event]
            if isinstance(found, list):
                kept = [
                    h for h in found if not (isinstance(h, dict) and ours_command(h.get("command")))
                ]
                if len(kept) != len(found):
                    hooks[event] = kept
                    if not kept:
                        del hooks[event]
        if not hooks:
            del data["hooks"]
    return data


# ---------------------------------------------------------------- the guideline


def _span(text: str) -> tuple[int, int] | None:
    start = text.find(BEGIN)
    end = text.find(END, start + 1) if start >= 0 else -1
    if start < 0 or end < 0:
        return None
    end += len(END)
    if text[end : end + 1] == "\n":
        end += 1
    return start, end


def block(guideline: str = GUIDELINE) -> str:
    return f"{BEGIN}\n{guideline}{END}\n"


def add_block(text: str, head: str = "") -> str:
    """The rules text with our block: replaced where it is, else added at the end after a
    blank line (a new file: `head` first, as Cursor's rule file's frontmatter)."""
    ours = block()
    found = _span(text)
    if found is not None:
        return text[: found[0]] + ours + text[found[1] :]
    if not text.strip():
        return head + ours
    return text + ("\n" if text.endswith("\n") else "\n\n") + ours


def remove_block(text: str) -> str:
    found = _span(text)
    if found is None:
        return text
    before, after = text[: found[0]], text[found[1] :]
    if not after.strip():
        before = before.rstrip("\n") + ("\n" if before.strip() else "")
    return before + after
