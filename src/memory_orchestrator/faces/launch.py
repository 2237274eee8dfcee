"""The `orchestrator` console script.

`orchestrator serve` over stdio, what an agent's MCP config runs (with the root options
`--config`, `--backend`, `--data-dir` or `--project` before it, `--transport stdio` or
`--in-process` after it, and nothing else), is dispatched here before anything but the
standard library is imported: it relays the session to the shared process for its settings
(`faces.shared.relay`, started in the background when none runs), which starts in a few tens
of milliseconds; where none can be used, or with `--in-process`, it serves in its own process
as before, with the same one-line errors and exit codes as the command line, and says why in
`memory_health`. `orchestrator hook <event>`, what an agent's lifecycle hooks run, is
dispatched here too (`faces.hook`: standard library only). Anything else is the Typer
command line (`faces.cli`).
"""

from __future__ import annotations

import sys

from memory_orchestrator.faces.shared.address import Inputs

TYPE_CHECKING = False  # (`typing` is not imported at run time: mypy reads this as true)
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main", "serve", "serve_arguments", "serve_in_process"]

_ROOT_OPTIONS = {
    "--config": "config",
    "-c": "config",
    "--backend": "backend",
    "-b": "backend",
    "--data-dir": "data_dir",
    "--project": "project",
}


def main() -> None:
    # What an agent's client runs per session (and, as hooks, per prompt) is dispatched here,
    # before Typer and the service are imported: each such command reads its arguments with
    # the standard library, as `serve_arguments` does, and imports only what it needs.
    if sys.argv[1:2] == ["hook"]:
        from memory_orchestrator.faces.hook import main as hook

        sys.exit(hook(sys.argv[2:]))
    found = serve_arguments(sys.argv[1:])
    if found is not None:
        serve(*found)
        return
    from memory_orchestrator.faces.cli import main as command_line

    command_line()


def serve_arguments(args: Sequence[str]) -> tuple[Inputs, bool] | None:
    """The root options and `--in-process` of `[root options] serve [--transport stdio]
    [--in-process]`; None for any other command line (the Typer CLI's)."""
    values: dict[str, str] = {}
    rest = list(args)
    while rest and rest[0] != "serve":
        flag, _, value = rest.pop(0).partition("=")
        name = _ROOT_OPTIONS.get(flag)
        if name is None or name in values:
            return None
        if not value:
            if not rest:
                return None
            value = rest.pop(0)
        values[name] = value
    if not rest:
        return None
    tail = rest[1:]
    in_process = "--in-process" in tail
    tail = [a for a in tail if a != "--in-process"]
    if tail not in ([], ["--transport", "stdio"], ["--transport=stdio"]):
        return None
    project = values.pop("project", None)
    if project is not None:
        if "data_dir" in values:
            return None  # (the command line says that they exclude each other)
        values["data_dir"] = project_data_dir(project, enter=True)
    return Inputs(**values), in_process


def project_data_dir(value: str, *, enter: bool = False) -> str:
    """The data dir of `--project value` ("auto" or a path) from this process's environment
    and working directory (`faces.shared.project`). With `enter`, the server goes into the
    project's root, as the hooks do (`faces.hook`): the project's `orchestrator.toml` is read
    wherever the session started, and a session and the hooks of one project find the shared
    process by the same name."""
    import os

    from memory_orchestrator.faces.shared.project import data_dir_of, project_root

    root = project_root(value, os.environ, os.getcwd())
    if enter:
        os.chdir(root)
    return data_dir_of(root, os.environ)


def serve(inputs: Inputs, in_process: bool = False) -> None:
    """Serve MCP over this process's stdio: through the shared process, or in this one."""
    reason = "--in-process" if in_process else None
    if not in_process:
        from memory_orchestrator.faces.shared.relay import relay_main

        outcome = relay_main(inputs)
        if isinstance(outcome, int):
            sys.exit(outcome)
        reason = outcome
    serve_in_process(inputs, reason)


def serve_in_process(inputs: Inputs, reason: str | None = None) -> None:
    """Load the settings and serve stdio here; `reason` (why not through the shared process)
    is added to every health report."""
    from pathlib import Path

    from memory_orchestrator.errors import OrchestratorError
    from memory_orchestrator.faces.mcp import server
    from memory_orchestrator.settings import load_settings

    notes = [server.not_shared(reason)] if reason is not None else []
    try:
        config = Path(inputs.config) if inputs.config is not None else None
        settings = load_settings(config, backend=inputs.backend, data_dir=inputs.data_dir)
        server.run(settings, "stdio", notes=notes)
    except (OrchestratorError, ValueError) as exc:  # what a user can act on (`USER_ERRORS`)
        import typer

        from memory_orchestrator.faces.cli.common import fail, message_and_code

        found = message_and_code(exc)
        if found is None:
            raise
        try:
            fail(*found)
        except typer.Exit as done:
            sys.exit(done.exit_code)
