"""mnemon-memory-orchestrator: plans, retrieves, expands, re-ranks and packs agent memory in
front of a memory store (Mnemon first of all).

The public API, for programs that embed the orchestrator rather than call its MCP server or
CLI: build an `Orchestrator` (`Orchestrator.from_settings(load_settings())`), send it the
request models, read the result models; errors come from one tree (`OrchestratorError`).
A store of your own plugs in behind `MemoryBackend` with `register_backend`. Everything else
is internal and may change.

The names are loaded on first use (PEP 562): importing a part of the package that needs only
the standard library (the stdio relay and the hook client of `faces.shared`) does not load the
service, the models and their libraries, which an agent would wait for at every start.
"""

from __future__ import annotations

from importlib import import_module

# `typing` is not imported: a relay that starts per agent session would pay for it (mypy reads
# a constant named TYPE_CHECKING as true)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

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

# where each public name lives: (module, its name there)
_WHERE = {
    "MemoryBackend": ("backends.base", "MemoryBackend"),
    "register_backend": ("backends.registry", "register"),
    **{
        name: ("errors", name)
        for name in (
            "BackendError",
            "CapabilityMissing",
            "ConfigError",
            "InvalidRequest",
            "OrchestratorError",
            "TraceNotFound",
        )
    },
    **{name: ("service", name) for name in ("Orchestrator", "queued_writes", "request_stats")},
    **{name: ("settings", name) for name in ("Settings", "load_settings")},
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _WHERE.get(name, ("models", name))
    value = getattr(import_module(f"{__name__}.{module}"), attribute)
    globals()[name] = value  # found once; later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
