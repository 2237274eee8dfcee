-- MCP sessions over HTTP, shared by every replica (`postgres/sessions.py`): any replica serves
-- any request of any session, so a load balancer needs no session affinity.
CREATE TABLE mcp_sessions (
    id        text PRIMARY KEY,
    owner     text NOT NULL,
    opened    boolean NOT NULL DEFAULT false,
    used_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX mcp_sessions_owner ON mcp_sessions (owner);
CREATE INDEX mcp_sessions_used_at ON mcp_sessions (used_at);
