"""The `orchestrator` console script.

`orchestrator serve` on its own, what an agent's MCP config runs, starts the stdio MCP server
without loading the command line (Typer, rich, the evaluation harness: imports an agent would
wait for before its `initialize` is answered), with the same one-line errors and exit codes;
anything else is the Typer command line (`faces.cli`).
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    if sys.argv[1:] == ["serve"]:
        serve()
        return
    from memory_orchestrator.faces.cli import main as command_line

    command_line()


def serve() -> None:
    """`orchestrator serve`: stdio, settings from the environment and the config file."""
    from memory_orchestrator.faces.mcp import server
    from memory_orchestrator.settings import load_settings

    try:
        server.run(load_settings(), "stdio")
    except Exception as exc:
        import typer

        from memory_orchestrator.faces.cli.common import fail, message_and_code

        found = message_and_code(exc)
        if found is None:
            raise
        try:
            fail(*found)
        except typer.Exit as done:
            sys.exit(done.exit_code)
