"""The `orchestrator` command line (Typer): thin commands over the `Orchestrator`."""

from memory_orchestrator.faces.cli.app import app, main

__all__ = ["app", "main"]
