"""`orchestrator setup <client>` with the installed console script as a real process, on real
client files that already hold other servers, hooks and rules: set up, set up again (no byte
changes), undo (every file byte-identical to before, the backups gone); the entry it writes
starts a server that finds the project's memory; the hooks it writes answer as the hook
tests expect; a server of another kind under our name is never replaced."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import TextContent

from memory_orchestrator.faces.setup.clients import launch_of
from memory_orchestrator.faces.shared.project import data_dir_of
from tests.e2e.servers import ORCHESTRATOR

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CLAUDE_SETTINGS: dict[str, Any] = {
    "permissions": {"allow": ["Bash(make test)"]},
    "hooks": {
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo other-hook"}]}],
        "PostToolUse": [
            {"matcher": "Edit", "hooks": [{"type": "command", "command": "ruff format"}]}
        ],
    },
}
CODEX_CONFIG = """\
# my Codex settings (a comment setup keeps)
model = "gpt-5-codex"

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]   # pinned later

[features]
codex_hooks = true
"""
CURSOR_HOOKS = {
    "version": 1,
    "hooks": {"afterFileEdit": [{"command": "./format.sh"}], "sessionStart": [{"command": "x"}]},
}
OTHER_SERVERS = {"mcpServers": {"docs": {"command": "npx", "args": ["-y", "docs-mcp"]}}}


def files_of(*folders: Path) -> dict[str, bytes]:
    """Every file under the folders, by path: what a test compares byte for byte."""
    return {
        str(path): path.read_bytes()
        for folder in folders
        for path in sorted(folder.rglob("*"))
        if path.is_file() and ".git" not in path.parts
    }


def write(path: Path, content: str | dict[str, Any], indent: int | None = 4) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = content if isinstance(content, str) else json.dumps(content, indent=indent) + "\n"
    path.write_text(text)


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A project (a git checkout with a subfolder) and a home, already holding each client's
    files with other servers, hooks and rules; the environment that points at them."""
    root, home = tmp_path / "shop", tmp_path / "home"
    (root / ".git").mkdir(parents=True)
    (root / "src").mkdir()
    write(root / ".mcp.json", OTHER_SERVERS, indent=2)
    write(root / ".claude" / "settings.json", CLAUDE_SETTINGS)
    write(root / "CLAUDE.md", "# Shop\n\nRun `make test` before committing.\n")
    write(root / ".codex" / "config.toml", CODEX_CONFIG)
    write(root / "AGENTS.md", "Use tabs.")  # (no newline at the end)
    write(root / ".cursor" / "mcp.json", OTHER_SERVERS, indent=None)
    write(root / ".cursor" / "hooks.json", CURSOR_HOOKS)
    write(home / ".claude.json", {"numStartups": 3, **OTHER_SERVERS, "projects": {}}, indent=2)
    (home / ".claude.json").chmod(0o600)  # (it holds the user's credentials)
    write(home / ".claude" / "settings.json", CLAUDE_SETTINGS)
    write(home / ".codex" / "config.toml", CODEX_CONFIG)
    write(home / ".cursor" / "mcp.json", OTHER_SERVERS)
    env = {
        **os.environ,
        "HOME": str(home),
        "ORCHESTRATOR_SEMANTIC__ENABLED": "false",
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    env.pop("CODEX_HOME", None)
    return root, home, env


def setup(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [ORCHESTRATOR, "setup", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
        check=False,
    )
    return done


CASES = [
    (client, scope)
    for client in ("claude-code", "codex", "cursor")
    for scope in ("project", "user")
]


@pytest.mark.parametrize(("client", "scope"), CASES)
def test_setup_twice_then_undo_leaves_every_file_as_it_was(
    places: tuple[Path, Path, dict[str, str]], client: str, scope: str
) -> None:
    root, home, env = places
    before = files_of(root, home)
    done = setup(root / "src", env, client, "--scope", scope, "--hooks")
    assert done.returncode == 0, done.stderr
    after = files_of(root, home)
    changed = {p for p in after if before.get(p) != after[p]}
    assert changed, done.stderr
    for path in before:  # nothing lost: what was there is still there
        assert path in after
    for path in changed & set(before):
        backup = Path(path + ".orchestrator-backup")
        assert backup.read_bytes() == before[path]
        assert backup.stat().st_mode == Path(path).stat().st_mode  # (as private as it)
    again = setup(root / "src", env, client, "--scope", scope, "--hooks")
    assert again.returncode == 0, again.stderr
    assert files_of(root, home) == after
    undone = setup(root / "src", env, client, "--scope", scope, "--undo")
    assert undone.returncode == 0, undone.stderr
    assert files_of(root, home) == before


def test_claude_code_entries_merge_with_what_is_there(
    places: tuple[Path, Path, dict[str, str]],
) -> None:
    root, _, env = places
    assert setup(root, env, "claude-code", "--hooks").returncode == 0
    servers = json.loads((root / ".mcp.json").read_text())["mcpServers"]
    assert servers["docs"] == OTHER_SERVERS["mcpServers"]["docs"]
    assert servers["memory"] == {"command": ORCHESTRATOR, "args": ["--project", "auto", "serve"]}
    settings = json.loads((root / ".claude" / "settings.json").read_text())
    assert settings["permissions"] == CLAUDE_SETTINGS["permissions"]
    prompt = settings["hooks"]["UserPromptSubmit"]
    assert prompt[0] == CLAUDE_SETTINGS["hooks"]["UserPromptSubmit"][0]  # (first, as it was)
    assert prompt[1]["hooks"][0]["command"] == f"{ORCHESTRATOR} hook prompt --client claude-code"
    assert settings["hooks"]["PostToolUse"] == CLAUDE_SETTINGS["hooks"]["PostToolUse"]
    assert set(settings["hooks"]) == {
        "UserPromptSubmit",
        "PostToolUse",
        "SessionStart",
        "PreCompact",
    }
    rules = (root / "CLAUDE.md").read_text()
    assert rules.startswith("# Shop\n\nRun `make test` before committing.\n\n<!-- memory-orch")
    assert "memory_context" in rules
    assert "memory_write" in rules
    assert "memory_forget" in rules


def test_codex_config_keeps_its_comments(places: tuple[Path, Path, dict[str, str]]) -> None:
    root, _, env = places
    assert setup(root, env, "codex").returncode == 0
    text = (root / ".codex" / "config.toml").read_text()
    assert text.startswith(
        CODEX_CONFIG.split("[features]", maxsplit=1)[0]
    )  # untouched, comments and all
    assert f'[mcp_servers.memory]\ncommand = "{ORCHESTRATOR}"\n' in text
    assert text.endswith("[features]\ncodex_hooks = true\n")
    assert not (root / ".codex" / "hooks.json").exists()  # (no --hooks)


def test_a_file_changed_since_setup_keeps_the_change_on_undo(
    places: tuple[Path, Path, dict[str, str]],
) -> None:
    root, _, env = places
    assert setup(root, env, "cursor").returncode == 0
    path = root / ".cursor" / "mcp.json"
    data = json.loads(path.read_text())
    data["mcpServers"]["added-later"] = {"command": "later"}
    path.write_text(json.dumps(data))
    done = setup(root, env, "cursor", "--undo")
    assert done.returncode == 0, done.stderr
    assert "the rest kept" in done.stderr
    left = json.loads(path.read_text())["mcpServers"]
    assert set(left) == {"docs", "added-later"}
    assert not Path(str(path) + ".orchestrator-backup").exists()


def test_a_server_of_another_kind_under_our_name_is_left_alone(
    places: tuple[Path, Path, dict[str, str]],
) -> None:
    root, _, env = places
    taken = {
        "mcpServers": {
            "memory": {"command": "npx", "args": ["@modelcontextprotocol/server-memory"]}
        }
    }
    write(root / ".mcp.json", taken)
    before = (root / ".mcp.json").read_bytes()
    done = setup(root, env, "claude-code")
    assert done.returncode == 2
    assert "already has an MCP server named 'memory' that runs something else" in done.stderr
    assert (root / ".mcp.json").read_bytes() == before
    assert setup(root, env, "claude-code", "--name", "project-memory").returncode == 0
    servers = json.loads((root / ".mcp.json").read_text())["mcpServers"]
    assert servers["memory"] == taken["mcpServers"]["memory"]
    assert servers["project-memory"]["args"] == ["--project", "auto", "serve"]


def test_a_bad_config_file_is_named_and_left_alone(
    places: tuple[Path, Path, dict[str, str]],
) -> None:
    root, _, env = places
    (root / ".mcp.json").write_text('{"mcpServers": {')
    done = setup(root, env, "claude-code")
    assert done.returncode == 2
    assert f"{root / '.mcp.json'} is not valid JSON" in done.stderr
    assert (root / ".mcp.json").read_text() == '{"mcpServers": {'


def test_print_writes_nothing(places: tuple[Path, Path, dict[str, str]]) -> None:
    root, home, env = places
    before = files_of(root, home)
    done = setup(root, env, "--print")
    assert done.returncode == 0, done.stderr
    entry = json.loads(done.stdout)["mcpServers"]["memory"]
    assert entry == {"command": ORCHESTRATOR, "args": ["--project", "auto", "serve"]}
    assert files_of(root, home) == before


async def _write_through(entry: dict[str, Any], cwd: Path, env: dict[str, str]) -> str:
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env, cwd=cwd)
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, send),
            ClientSession(read, send) as session,
        ):
            await session.initialize()
            memory = {"content": "Invoices are kept for ten years.", "entities": ["Invoices"]}
            result = await session.call_tool("memory_write", memory)
            assert not result.is_error, result.content
            found = await session.call_tool(
                "memory_context", {"query": "how long are invoices kept?"}
            )
            return " ".join(b.text for b in found.content if isinstance(b, TextContent))


def test_the_user_entry_finds_the_memory_of_the_project_it_runs_in(
    places: tuple[Path, Path, dict[str, str]],
) -> None:
    """One user-scope entry, started (as a client does) in a project's subfolder: it writes
    into that project's own data dir; its prompt hook, as written, reads it back."""
    root, home, env = places
    assert setup(root, env, "claude-code", "--scope", "user", "--hooks").returncode == 0
    entry = json.loads((home / ".claude.json").read_text())["mcpServers"]["memory"]
    block = anyio.run(_write_through, entry, root / "src", env)
    assert "Invoices are kept for ten years." in block
    assert (Path(data_dir_of(str(root), env)) / "memories.db").exists()
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["UserPromptSubmit"][-1]["hooks"][0]["command"]
    payload = {"cwd": str(root / "src"), "hook_event_name": "UserPromptSubmit"}
    payload["prompt"] = "How long do we keep invoices?"
    done = subprocess.run(
        shlex.split(command),
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Invoices are kept for ten years." in context


def test_an_orchestrator_run_by_uvx_writes_a_pinned_uvx_entry() -> None:
    """uvx runs from an environment in uv's cache, gone at its next clean: the entry names
    the package and its version instead of that path; a checkout names its script."""
    cached = launch_of(
        prefix="/root/.cache/uv/archive-v0/Xb3d9/",
        argv0="/root/.cache/uv/archive-v0/Xb3d9/bin/orchestrator",
        version="1.2.3",
    )
    assert cached.argv("serve") == [
        "uvx",
        "--from",
        "mnemon-memory-orchestrator==1.2.3",
        "orchestrator",
        "serve",
    ]
    assert launch_of(argv0=ORCHESTRATOR).argv("serve") == [ORCHESTRATOR, "serve"]


def test_setup_says_how_to_install_a_missing_model(
    places: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    root, _, env = places
    empty = tmp_path / "no-model"
    empty.mkdir()
    missing = {
        **env,
        "ORCHESTRATOR_SEMANTIC__ENABLED": "true",
        "ORCHESTRATOR_SEMANTIC__MODEL": "minilm",
        "ORCHESTRATOR_SEMANTIC__MODEL_DIR": str(empty),
    }
    done = setup(root, missing, "cursor")
    assert done.returncode == 0, done.stderr
    assert "next: search is lexical only" in done.stderr
    assert "`orchestrator models install`" in done.stderr
    assert "next: search is lexical only" not in setup(root, env, "cursor").stderr
