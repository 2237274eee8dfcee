"""The HTTP face around the MCP server: `server.py` (the Starlette app, bearer-token check,
Host/Origin checks, body limits, /metrics) and `sessions.py` (sessions owned by tokens, caps
and idle expiry). It never imports the MCP server: `faces.mcp.server` hands it a factory."""
