"""The MCP face: `server.py` builds the server, `tools.py` holds the six tools, `access.py`
decides which tools a token may call, `wire.py` answers what the stdio transport cannot parse.
Run it with `orchestrator serve` or `python -m memory_orchestrator.faces.mcp.server`."""
