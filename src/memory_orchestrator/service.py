"""The Orchestrator: the one object both faces (MCP, CLI) and the eval harness call.

(Skeleton: bodies are being written; signatures are fixed.)
"""

from __future__ import annotations

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.models import (
    ContextPackage,
    ContextRequest,
    ExpandRequest,
    Explanation,
    ExplainRequest,
    HealthReport,
    ReplayReport,
    SearchRequest,
    SearchResult,
    WriteReport,
    WriteRequest,
)
from memory_orchestrator.settings import Settings


class TraceNotFound(LookupError):
    pass


class Orchestrator:
    def __init__(self, backend: MemoryBackend, settings: Settings) -> None:
        self.backend = backend
        self.settings = settings

    @classmethod
    def from_settings(cls, settings: Settings) -> Orchestrator:
        raise NotImplementedError

    async def search(self, request: SearchRequest) -> SearchResult:
        raise NotImplementedError

    async def context(self, request: ContextRequest) -> ContextPackage:
        raise NotImplementedError

    async def expand(self, request: ExpandRequest) -> SearchResult:
        raise NotImplementedError

    async def write(self, request: WriteRequest) -> WriteReport:
        raise NotImplementedError

    async def explain(self, request: ExplainRequest) -> Explanation:
        """Raises TraceNotFound for an unknown trace id."""
        raise NotImplementedError

    async def replay(self, trace_id: str) -> ReplayReport:
        """Raises TraceNotFound for an unknown trace id."""
        raise NotImplementedError

    async def health(self) -> HealthReport:
        raise NotImplementedError

    async def close(self) -> None:
        await self.backend.close()
