"""`orchestrator hook <event> --client <client>` as the agents' clients run it: the installed
console script as a real process, the client's documented payload on stdin, its documented
answer on stdout (docs/how-to/connect-an-agent.md); against a real shared process, one that
is not running yet, a store that hangs and one that fails. Decided by the output, the exit
code and the hook's log, never by a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memory_orchestrator.faces.shared.project import data_dir_of
from tests.e2e.servers import ORCHESTRATOR
from tests.mnemon_double import fast_launcher
from tests.shared_processes import pids

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

FACT = "The billing service stores invoices in PostgreSQL 16, decided by Dana in March."
PROMPT = "Which database does the billing service use?"
WAIT_S = 120.0


def runtime() -> Path:
    return Path(os.environ["XDG_RUNTIME_DIR"])  # the test's own (tests/conftest.py)


def log_lines() -> list[dict[str, Any]]:
    path = runtime() / "memory-orchestrator" / "hooks.log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def project(tmp_path: Path) -> Path:
    root = tmp_path / "billing"
    (root / ".git").mkdir(parents=True)
    (root / "src").mkdir()
    return root


def environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "ORCHESTRATOR_SEMANTIC__ENABLED": "false", **extra}


def hook(
    event: str, client: str, payload: Any, *args: str, cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(
        [ORCHESTRATOR, "hook", event, "--client", client, *args],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=env,
        check=False,
    )


STARTING = ("no shared process ran", "did not answer", "no answer within the time budget")


def until_started(
    run: Callable[[], subprocess.CompletedProcess[str]], settled: tuple[str, ...] = STARTING
) -> subprocess.CompletedProcess[str]:
    """Run the hook until its log says something else than `settled` (the first runs start a
    shared process, and its first request warms it up); its last run."""
    deadline = time.monotonic() + WAIT_S
    while True:
        done = run()
        assert done.returncode == 0, done.stderr
        outcome = log_lines()[-1]["outcome"]
        if not any(s in outcome for s in settled):
            return done
        assert time.monotonic() < deadline, outcome
        time.sleep(0.2)


def claude_prompt(root: Path) -> dict[str, Any]:
    return {
        "session_id": "abc123",
        "transcript_path": str(root / "t.jsonl"),
        "cwd": str(root / "src"),
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": PROMPT,
    }


def test_each_client_gets_its_documented_answers(tmp_path: Path) -> None:
    root = project(tmp_path)
    env = environment()
    wrote = subprocess.run(
        [ORCHESTRATOR, "--project", "auto", "--json", "write", FACT, "-e", "PostgreSQL"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root / "src",  # the nearest .git upward: the project
        env=env,
        check=False,
    )
    assert wrote.returncode == 0, wrote.stderr
    memory_id = json.loads(wrote.stdout)["id"]
    assert (Path(data_dir_of(str(root), env)) / "memories.db").exists()

    # nothing runs yet: the prompt adds nothing, starts one, and the log says so
    cold = hook("prompt", "claude-code", claude_prompt(root), cwd=tmp_path, env=env)
    assert (cold.returncode, cold.stdout) == (0, "")
    assert log_lines()[-1]["outcome"].startswith("added nothing: no shared process ran")

    warm = until_started(
        lambda: hook("prompt", "claude-code", claude_prompt(root), cwd=tmp_path, env=env)
    )
    answer = json.loads(warm.stdout)["hookSpecificOutput"]
    assert answer["hookEventName"] == "UserPromptSubmit"
    assert memory_id in answer["additionalContext"]
    assert FACT in answer["additionalContext"]

    codex = {**claude_prompt(root), "turn_id": "t1", "model": "gpt-5-codex"}
    # Each call below may run out of its time budget on a loaded machine and add nothing (as
    # it should); what is checked is the answer's format once one comes.
    done = until_started(lambda: hook("prompt", "codex", codex, cwd=tmp_path, env=env))
    assert memory_id in json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]

    start = {"session_id": "s", "cwd": str(root), "hook_event_name": "SessionStart"}
    for client in ("claude-code", "codex"):
        payload = {**start, "source": "startup"}
        done = until_started(
            lambda: hook("session-start", client, payload, cwd=root, env=env)  # noqa: B023
        )
        answer = json.loads(done.stdout)["hookSpecificOutput"]
        assert answer["hookEventName"] == "SessionStart"
        assert memory_id in answer["additionalContext"]
    cursor = {
        "hook_event_name": "sessionStart",
        "conversation_id": "c1",
        "generation_id": "g1",
        "workspace_roots": [str(root)],
        "session_id": "c1",
    }
    done = until_started(lambda: hook("session-start", "cursor", cursor, cwd=tmp_path, env=env))
    assert memory_id in json.loads(done.stdout)["additional_context"]

    compact = {"session_id": "s", "cwd": str(root), "hook_event_name": "PreCompact"}
    done = hook("pre-compact", "claude-code", {**compact, "trigger": "auto"}, cwd=root, env=env)
    assert "memory_write" in json.loads(done.stdout)["systemMessage"]
    done = hook(
        "pre-compact", "cursor", {**cursor, "hook_event_name": "preCompact"}, cwd=root, env=env
    )
    assert "memory_write" in json.loads(done.stdout)["user_message"]
    stop = {"session_id": "s", "cwd": str(root), "hook_event_name": "Stop"}
    done = hook("stop", "codex", {**stop, "stop_hook_active": False}, cwd=root, env=env)
    assert json.loads(done.stdout)["continue"] is True
    assert "memory_write" in json.loads(done.stdout)["systemMessage"]
    done = hook("stop", "codex", {**stop, "stop_hook_active": True}, cwd=root, env=env)
    assert json.loads(done.stdout) == {"continue": True}


def test_a_prompt_nothing_is_known_about_adds_nothing(tmp_path: Path) -> None:
    root = project(tmp_path)
    env = environment()
    payload = {**claude_prompt(root), "prompt": "hello"}
    done = until_started(lambda: hook("prompt", "claude-code", payload, cwd=root, env=env))
    assert done.stdout == ""
    assert log_lines()[-1]["outcome"] == "added nothing: no memory found"
    cursor = {"workspace_roots": [str(root)], "hook_event_name": "sessionStart"}
    done = hook("session-start", "cursor", cursor, cwd=root, env=env)
    assert (done.returncode, json.loads(done.stdout)) == (0, {})


def mnemon_store(tmp_path: Path, **extra: str) -> dict[str, str]:
    double = fast_launcher(tmp_path / "bin")
    return environment(
        ORCHESTRATOR_BACKEND="mnemon",
        ORCHESTRATOR_MNEMON__BINARY=str(double),
        MNEMON_DATA_DIR=str(tmp_path / "mnemon"),
        **extra,
    )


def test_a_store_that_hangs_costs_the_prompt_nothing(tmp_path: Path) -> None:
    """The store hangs on every call (the Mnemon double, `MNEMON_DOUBLE_SLEEP_S`): the
    prompt hook gives up within its budget, adds nothing, exits 0 and logs why."""
    root = project(tmp_path)
    env = mnemon_store(tmp_path, MNEMON_DOUBLE_SLEEP_S="60")
    run = lambda: hook("prompt", "claude-code", claude_prompt(root), cwd=root, env=env)  # noqa: E731
    done = until_started(run, STARTING[:2])
    assert (done.returncode, done.stdout) == (0, "")
    assert "no answer within the time budget" in log_lines()[-1]["outcome"]


def test_a_store_that_fails_costs_the_prompt_nothing(tmp_path: Path) -> None:
    root = project(tmp_path)
    broken = tmp_path / "broken" / "mnemon"
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\necho 'Error: disk I/O error' >&2\nexit 1\n")
    broken.chmod(0o755)
    env = {**mnemon_store(tmp_path), "ORCHESTRATOR_MNEMON__BINARY": str(broken)}
    run = lambda: hook("prompt", "codex", claude_prompt(root), cwd=root, env=env)  # noqa: E731
    done = until_started(run)
    assert (done.returncode, done.stdout) == (0, "")
    assert log_lines()[-1]["outcome"].startswith("added nothing: the shared process refused")


@pytest.mark.parametrize("payload", ["not json", "[1, 2]", ""])
def test_a_bad_payload_adds_nothing_and_says_so(tmp_path: Path, payload: str) -> None:
    done = hook("prompt", "claude-code", payload, cwd=tmp_path, env=environment())
    assert (done.returncode, done.stdout) == (0, "")
    assert log_lines()[-1]["outcome"].startswith("added nothing:")
    assert not pids(runtime())  # (nothing to ask: none is started)


def test_a_bad_command_line_is_refused(tmp_path: Path) -> None:
    """Exit status 1, never 2: the clients read 2 as "block the prompt"."""
    for bad in (["--client", "vim"], ["--client", "codex", "--tokens", "9" * 5000]):
        done = subprocess.run(
            [ORCHESTRATOR, "hook", "prompt", *bad],
            input="{}",
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            env=environment(),
            check=False,
        )
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith("error: ")


def test_the_hook_command_imports_only_the_standard_library(tmp_path: Path) -> None:
    """The console script dispatches `hook` before anything heavy (`python -X importtime`
    on the installed script): no pydantic, no service, no models, no model."""
    at_start = {
        line.rsplit("|", 1)[1].strip()
        for line in subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "pass"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stderr.splitlines()
    }
    done = subprocess.run(
        [sys.executable, "-X", "importtime", ORCHESTRATOR, "hook", "prompt", "--client", "codex"],
        input=json.dumps({"prompt": "anything", "cwd": str(tmp_path)}),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=environment(),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    modules = [line.rsplit("|", 1)[1].strip() for line in lines[1:]]
    assert "memory_orchestrator.faces.hook" in modules
    ours = [m for m in modules if m.startswith("memory_orchestrator")]
    assert not [m for m in ours if m.split(".")[1:2] in (["service"], ["models"], ["derived"])]
    others = [
        m
        for m in modules
        if not m.startswith("memory_orchestrator")
        and m.split(".")[0] not in sys.stdlib_module_names
        and m not in at_start
    ]
    assert others == []
