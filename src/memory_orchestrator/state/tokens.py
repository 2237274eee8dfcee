"""Bearer tokens for the HTTP transport: settings, hashing and the access decision.

Tokens live in the config only as hashes (`sha256:<hex>`). A secret is 32 random bytes
(`secrets.token_urlsafe`), so a fast hash is enough: there is nothing to brute-force that a
slow password hash would protect. Every presented secret is compared with every stored hash in
constant time, so timing tells nothing about which hash came close.

This module is pure: the HTTP face (`faces/http/server.py`) asks it who a secret belongs to and
whether that token may reach the served store, the MCP face (`faces/mcp/access.py`) whether it may
call a tool; the CLI uses it to mint tokens. `is_loopback` is here too: both the HTTP face and
the inspector (`faces/ui`) ask it whether a bind address needs tokens, and the inspector must
not load the MCP SDK the HTTP face imports.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memory_orchestrator.errors import OrchestratorError

__all__ = [
    "ANY",
    "TOOL_NAMES",
    "WRITE_TOOLS",
    "Denied",
    "HttpSettings",
    "TokenBook",
    "TokenSpec",
    "bearer",
    "hash_token",
    "is_loopback",
    "new_secret",
]

log = logging.getLogger(__name__)

ANY = "*"
TOOL_NAMES = (
    "memory_context",
    "memory_search",
    "memory_expand",
    "memory_write",
    "memory_explain",
    "memory_health",
    "memory_forget",
)
WRITE_TOOLS = frozenset({"memory_write", "memory_forget"})
_PREFIX = "sha256:"
_HASH = r"^sha256:[0-9a-f]{64}$"
_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
StoreName = Annotated[str, Field(pattern=r"^(\*|[A-Za-z0-9][A-Za-z0-9_-]{0,63})$")]


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 (bracketed or not) and `localhost`; False for anything else
    (0.0.0.0 too). Where a face binds decides whether it asks for a bearer token."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class TokenSpec(_Section):
    """One bearer token: who it is, what it may call and on which stores."""

    name: str = Field(pattern=_NAME, description="who holds it (shown in logs, never the secret)")
    hash: str = Field(pattern=_HASH, description="sha256:<hex> of the secret")
    tools: list[str] = Field(
        default_factory=lambda: [ANY], description='tool names it may call; "*" = all'
    )
    stores: list[StoreName] = Field(
        default_factory=lambda: [ANY],
        description='store (backend) names it may reach; "*" = any',
    )
    read_only: bool = Field(
        default=False, description="never allowed to call memory_write or memory_forget"
    )

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: list[str]) -> list[str]:
        unknown = [t for t in value if t != ANY and t not in TOOL_NAMES]
        if unknown:
            raise ValueError(
                f"unknown tool(s) {', '.join(unknown)}; known: {', '.join(TOOL_NAMES)} or *"
            )
        return value

    def toml(self) -> str:
        """The `[[http.tokens]]` table that configures this token."""
        return (
            "[[http.tokens]]\n"
            f"name = {_quote(self.name)}\n"
            f"hash = {_quote(self.hash)}\n"
            f"tools = [{', '.join(_quote(t) for t in self.tools)}]\n"
            f"stores = [{', '.join(_quote(s) for s in self.stores)}]\n"
            f"read_only = {'true' if self.read_only else 'false'}\n"
        )


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class HttpSettings(_Section):
    """The streamable-HTTP transport (`orchestrator serve --transport http`)."""

    host: str = Field(default="127.0.0.1", description="bind address; loopback by default")
    port: int = Field(default=8765, ge=1, le=65535, description="the port to serve on")
    tokens: list[TokenSpec] = Field(
        default_factory=list, description="bearer tokens; none = the server refuses to start"
    )
    max_sessions_per_token: int = Field(
        default=64,
        ge=1,
        description="MCP sessions one token may hold open at once; one more is refused (429)",
    )
    session_idle_timeout_s: float = Field(
        default=600.0,
        gt=0,
        allow_inf_nan=False,
        description="an MCP session with no request for this long is closed",
    )


def new_secret() -> str:
    """A fresh bearer secret: 32 random bytes, URL-safe."""
    return "mo_" + secrets.token_urlsafe(32)


def hash_token(secret: str) -> str:
    """What the config keeps instead of the secret."""
    return _PREFIX + hashlib.sha256(secret.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Denied:
    """Why a known token may not do something; `status` is the HTTP answer (403)."""

    reason: str
    status: int = 403


class TokenBook:
    """The configured tokens, and the access decisions made from them."""

    def __init__(
        self,
        tokens: Sequence[TokenSpec],
        *,
        shared: Callable[[], Sequence[TokenSpec]] | None = None,
    ) -> None:
        names = [t.name for t in tokens]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ValueError(f"token names must be unique: {', '.join(duplicated)}")
        self._tokens = tuple(tokens)
        # `shared`: the token list replicas share (`postgres.state.SharedTokens.tokens`), read at
        # each authentication (it caches); when it cannot be read, the config's tokens hold
        self._shared = shared

    def _all(self) -> tuple[TokenSpec, ...]:
        if self._shared is None:
            return self._tokens
        try:
            return (*self._tokens, *self._shared())
        except (OrchestratorError, OSError, ValueError) as exc:  # unreachable, or a bad row
            log.warning("the shared token list cannot be read: %s", exc)
            return self._tokens

    def __len__(self) -> int:
        return len(self._tokens)

    @property
    def shared(self) -> bool:
        """Whether a shared list is read too (over the network: call `authenticate` off the
        event loop)."""
        return self._shared is not None

    def authenticate(self, secret: str | None) -> TokenSpec | None:
        """The token whose hash matches `secret`, or None. Every hash is compared."""
        if not secret:
            return None
        presented = hash_token(secret).encode("ascii")
        found: TokenSpec | None = None
        for token in self._all():
            if hmac.compare_digest(presented, token.hash.encode("ascii")) and found is None:
                found = token
        return found

    @staticmethod
    def check_store(token: TokenSpec, store: str) -> Denied | None:
        if ANY in token.stores or store in token.stores:
            return None
        return Denied(f"token {token.name!r} may not use store {store!r}")

    @staticmethod
    def check_tool(token: TokenSpec, tool: str) -> Denied | None:
        if token.read_only and tool in WRITE_TOOLS:
            return Denied(f"token {token.name!r} is read-only and may not call {tool}")
        if ANY in token.tools or tool in token.tools:
            return None
        return Denied(f"token {token.name!r} may not call {tool}")


def bearer(header: str | None) -> str | None:
    """The secret from an `Authorization: Bearer <secret>` header, else None."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    value = value.strip()
    return value if scheme.lower() == "bearer" and value else None
