"""`orchestrator hook <event> --client <client>`: what an agent's lifecycle hooks run (as
`orchestrator setup --hooks` installs them). Each reads the client's JSON on stdin and answers
in the client's documented format on stdout (docs/how-to/connect-an-agent.md cites them):

    session-start  a short primer: the few memories most relevant to this project
    prompt         the context block for the prompt, within a token budget
    pre-compact    a reminder to write what should outlive the session (shown to the user)
    stop           the same reminder, at the end of a turn (Codex)

Standard library only (a test reads `python -X importtime` to keep it so): a hook runs on
every prompt, so it never loads the service or the model; it asks the shared process of the
project's memory (`faces.shared.client`) within its time budget (`--budget-ms`, from the
start of this function; at most 1000). When none runs, it starts one in the background and
adds nothing this time. On a timeout, a refusal or any error it adds nothing, exits 0 (a
hook never blocks the prompt) and says why in `hooks.log` in the socket directory (beside
`shared.log`; on stderr when that cannot be written).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import warnings

from memory_orchestrator.faces.shared import client
from memory_orchestrator.faces.shared.address import Inputs, NotRunning, Unusable, socket_dir
from memory_orchestrator.faces.shared.project import AUTO, data_dir_of, project_root

TYPE_CHECKING = False  # (`typing` is not imported at run time: mypy reads this as true)
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

__all__ = ["CLIENTS", "EVENTS", "REMINDER", "main"]

CLIENTS = ("claude-code", "codex", "cursor")
EVENTS = ("session-start", "prompt", "pre-compact", "stop")
MAX_PAYLOAD_BYTES = 4 * 1024 * 1024
MAX_QUERY_CHARS = 1000  # the start of a long prompt says what it is about
MAX_BUDGET_MS = 1000
DEFAULT_BUDGET_MS = 800
DEFAULT_TOKENS = 400
CHARS_PER_TOKEN = 4
PRIMER_ITEMS = 5
LOG_NAME = "hooks.log"
MAX_LOG_BYTES = 1024 * 1024  # moved aside (to .1) past this
USAGE = (
    "usage: orchestrator hook {session-start,prompt,pre-compact,stop}"
    " --client {claude-code,codex,cursor} [--budget-ms N] [--tokens N]"
    " [--project auto|PATH] [--config FILE] [--backend NAME] [--data-dir DIR]"
)
REMINDER = (
    "Memory: before this context goes, store what should outlive the session (decisions,"
    " preferences, facts about the project) with memory_write, one short fact each."
)
# what each client calls the events, for the answers that name them
_CLIENT_EVENT = {"session-start": "SessionStart", "prompt": "UserPromptSubmit"}


class Usage(Exception):
    """A bad command line: exit status 1, never 2 (which Claude Code, Codex and Cursor read
    as "block the prompt")."""


class Options:
    __slots__ = (
        "backend",
        "budget_ms",
        "client",
        "config",
        "data_dir",
        "event",
        "project",
        "tokens",
    )

    def __init__(self) -> None:
        self.event = self.client = ""
        self.budget_ms, self.tokens = DEFAULT_BUDGET_MS, DEFAULT_TOKENS
        self.project = AUTO
        self.config: str | None = None
        self.backend: str | None = None
        self.data_dir: str | None = None


def parse(argv: Sequence[str]) -> Options:
    options = Options()
    rest = list(argv)
    if not rest or rest[0] not in EVENTS:
        raise Usage(USAGE)
    options.event = rest.pop(0)
    names = {
        "--client": "client",
        "--budget-ms": "budget_ms",
        "--tokens": "tokens",
        "--project": "project",
        "--config": "config",
        "--backend": "backend",
        "--data-dir": "data_dir",
    }
    while rest:
        flag, _, value = rest.pop(0).partition("=")
        name = names.get(flag)
        if name is None or (not value and not rest):
            raise Usage(USAGE)
        value = value or rest.pop(0)
        if name in ("budget_ms", "tokens"):
            if not value.isdigit() or len(value) > 9 or int(value) < 1:
                raise Usage(f"{flag} takes a positive whole number")
            setattr(
                options, name, min(int(value), MAX_BUDGET_MS) if name == "budget_ms" else int(value)
            )
        else:
            setattr(options, name, value)
    if options.client not in CLIENTS:
        raise Usage(USAGE)
    return options


def main(argv: Sequence[str]) -> int:
    """Run one hook; its exit status: 0, but 1 for a bad command line."""
    started = time.monotonic()
    try:
        options = parse(argv)
    except Usage as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    deadline = started + options.budget_ms / 1000
    payload, why = read_payload()
    text: str | None = None
    if why is None:
        try:
            text, why = answer(options, payload, deadline)
        except client.CallFailed as exc:
            why = f"the shared process refused ({exc.kind}): {exc}"
        # (a time-out, a connection that broke, an answer of another shape from the peer)
        except (Unusable, OSError, ValueError, KeyError, TypeError) as exc:
            why = f"{type(exc).__name__}: {exc}"
    out = render(options, text)
    if out:
        sys.stdout.write(out)
        sys.stdout.flush()
    ms = round((time.monotonic() - started) * 1000, 1)
    outcome = f"added {len(text)} characters" if text else f"added nothing: {why or 'empty'}"
    log({"event": options.event, "client": options.client, "outcome": outcome, "ms": ms})
    return 0


def read_payload() -> tuple[dict[str, Any], str | None]:
    """The client's JSON object on stdin, or {} and why not."""
    try:
        raw = sys.stdin.buffer.read(MAX_PAYLOAD_BYTES + 1)
    except OSError as exc:
        return {}, f"cannot read stdin: {exc}"
    if len(raw) > MAX_PAYLOAD_BYTES:
        return {}, "the payload on stdin is over 4 MB"
    try:
        found = json.loads(raw or b"{}")
    except ValueError:
        return {}, "the payload on stdin is not JSON"
    if not isinstance(found, dict):
        return {}, "the payload on stdin is not a JSON object"
    return found, None


def answer(
    options: Options, payload: Mapping[str, Any], deadline: float
) -> tuple[str | None, str | None]:
    """The text to add, or None and why not."""
    if options.event in ("pre-compact", "stop"):
        if payload.get("stop_hook_active"):  # (Claude Code, Codex: a stop hook's own turn)
            return None, "a stop hook's own turn"
        return REMINDER, None
    # every hook of a project asks from its root (whatever folder the session is in): one
    # link to the shared process per project, and the project's orchestrator.toml
    cwd = project_root(options.project, os.environ, where(payload))
    inputs = Inputs(options.config, options.backend, options.data_dir)
    if options.data_dir is None:
        inputs.data_dir = data_dir_of(cwd, os.environ)
    if options.event == "prompt":
        prompt = str(payload.get("prompt") or "").strip()
        if not prompt or prompt.startswith("/"):
            return None, "no prompt (or a slash command)"
        request = {"query": prompt[:MAX_QUERY_CHARS], "response_budget": budget(options.tokens, 8)}
        header = "[memory-orchestrator] memories that may bear on this prompt (cite their ids):"
    else:
        name = os.path.basename(cwd)
        query = f"{name} project: decisions, conventions, preferences, open problems"
        request = {"query": query, "response_budget": budget(options.tokens, PRIMER_ITEMS)}
        header = f"[memory-orchestrator] memories about this project ({name}):"
    found = ask(inputs, cwd, request, deadline)
    if found is None:
        return None, "no shared process ran: one is starting in the background"
    block = str(found.get("context_block") or "").strip()
    if not found.get("items") or not block:
        return None, "no memory found"
    return f"{header}\n{block}", None


def budget(tokens: int, items: int) -> dict[str, int]:
    return {"max_items": items, "max_chars": min(100_000, max(200, tokens * CHARS_PER_TOKEN))}


def where(payload: Mapping[str, Any]) -> str:
    """The folder the client says the session works in (Claude Code and Codex: `cwd`;
    Cursor: `workspace_roots`), else this process's."""
    roots = payload.get("workspace_roots")
    candidates = [roots[0] if isinstance(roots, list) and roots else None, payload.get("cwd")]
    for found in candidates:
        if isinstance(found, str) and os.path.isabs(found) and os.path.isdir(found):
            return found
    return os.getcwd()


def ask(
    inputs: Inputs, cwd: str, request: Mapping[str, Any], deadline: float
) -> dict[str, Any] | None:
    """`context` from the shared process within the deadline; None (and one started in the
    background) when none runs."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise client.Unavailable("the time budget ran out before the call")
    try:
        connection = client.connect(inputs, cwd=cwd, timeout_s=left)
    except NotRunning:
        with warnings.catch_warnings():  # (the child outlives this process on purpose)
            warnings.simplefilter("ignore", ResourceWarning)
            client.start_in_background(inputs, cwd=cwd)
        return None
    with connection:
        return connection.call(
            "context", request, timeout_s=max(0.001, deadline - time.monotonic())
        )


def render(options: Options, text: str | None) -> str:
    """The answer in the client's format (docs/how-to/connect-an-agent.md)."""
    if options.client == "cursor":
        if options.event == "session-start":
            return json.dumps({"additional_context": text} if text else {}) + "\n"
        if options.event == "pre-compact":
            return json.dumps({"user_message": text} if text else {}) + "\n"
        return json.dumps({}) + "\n"
    if options.event in _CLIENT_EVENT:
        if not text:
            return ""
        specific = {"hookEventName": _CLIENT_EVENT[options.event], "additionalContext": text}
        return json.dumps({"hookSpecificOutput": specific}) + "\n"
    if options.client == "codex":  # (its Stop hook must answer JSON)
        return json.dumps({"continue": True, **({"systemMessage": text} if text else {})}) + "\n"
    return json.dumps({"systemMessage": text}) + "\n" if text else ""


def log(entry: dict[str, Any]) -> None:
    """One JSON line in hooks.log (in the socket directory); on stderr when it cannot be."""
    line = json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "pid": os.getpid(), **entry})
    try:
        path = os.path.join(socket_dir(), LOG_NAME)
        with contextlib.suppress(OSError):
            if os.path.getsize(path) > MAX_LOG_BYTES:
                os.replace(path, path + ".1")
        with open(path, "a", encoding="utf-8") as file:
            file.write(line + "\n")
    except (Unusable, OSError):
        print(line, file=sys.stderr)
