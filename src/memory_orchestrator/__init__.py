"""mnemon-memory-orchestrator: plans, retrieves, expands, re-ranks and packs agent memory in
front of a memory store (Mnemon first of all).

The public API, for programs that embed the orchestrator rather than call its MCP server or
CLI: build an `Orchestrator` (`Orchestrator.from_settings(load_settings())`), send it the
request models, read the result models; errors come from one tree (`OrchestratorError`).
A store of your own plugs in behind `MemoryBackend` with `register_backend`. Everything else
is internal and may change.
"""

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.backends.registry import register as register_backend
from memory_orchestrator.errors import (
    BackendError,
    CapabilityMissing,
    ConfigError,
    InvalidRequest,
    OrchestratorError,
    TraceNotFound,
)
from memory_orchestrator.models import (
    Capabilities,
    ContextPackage,
    ContextRequest,
    ExpandRequest,
    ExplainRequest,
    Explanation,
    HealthReport,
    MemoryType,
    NewMemory,
    OutboxReport,
    ReplayReport,
    ResponseBudget,
    SearchFilters,
    SearchRequest,
    SearchResult,
    Status,
    TimeRange,
    Trace,
    WriteAction,
    WriteReport,
    WriteRequest,
)
from memory_orchestrator.service import Orchestrator, queued_writes, request_stats
from memory_orchestrator.settings import Settings, load_settings

__all__ = [
    "BackendError",
    "Capabilities",
    "CapabilityMissing",
    "ConfigError",
    "ContextPackage",
    "ContextRequest",
    "ExpandRequest",
    "ExplainRequest",
    "Explanation",
    "HealthReport",
    "InvalidRequest",
    "MemoryBackend",
    "MemoryType",
    "NewMemory",
    "Orchestrator",
    "OrchestratorError",
    "OutboxReport",
    "ReplayReport",
    "ResponseBudget",
    "SearchFilters",
    "SearchRequest",
    "SearchResult",
    "Settings",
    "Status",
    "TimeRange",
    "Trace",
    "TraceNotFound",
    "WriteAction",
    "WriteReport",
    "WriteRequest",
    "load_settings",
    "queued_writes",
    "register_backend",
    "request_stats",
]
