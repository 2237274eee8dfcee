"""The faces: how agents and people reach the `Orchestrator`.

    mcp/    the MCP server: the tools, per-token tool access, the stdio wire
    http/   streamable HTTP around the MCP server: bearer tokens, sessions, /metrics
    cli/    the `orchestrator` command (Typer), rendering kept apart
    ui/     the inspector: server-rendered pages in the browser (`orchestrator ui`)
    shared/ one process per memory: the shared process, the stdio relay to it and the client
            the hooks call (the relay and the client import only the standard library)

Each face calls the service (`memory_orchestrator.service`) and never a backend; no face
imports another's framework at load time (the CLI starts the MCP server lazily in `serve`).
"""
