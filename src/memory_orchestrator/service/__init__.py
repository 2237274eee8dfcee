"""The service: the `Orchestrator` facade and the paths a request walks through.

    orchestrator.py  the facade the faces, the demo and the eval call (search, context,
                     expand, write, explain, replay, health, ingest, ...)
    reading.py       ReadPath: one pipeline run per search / context / explain request
    expanding.py     ExpandPath: memory_expand, the graph around seeds
    writing.py       WritePath: limits, near-duplicates and corrections, the outbox
    recorder.py      TraceRecorder: begins, finishes, logs and keeps every trace
    store_calls.py   StoreCalls: one bounded store call, a trace note instead of a failure
    resilience.py    GuardedBackend: retries, timeouts and answer checks around the store
    inspecting.py    Inspection: what the inspector (faces/ui) reads beyond the tools, over
                     catalog.py (every memory, for pages with filters) and trace_index.py
                     (one line per kept trace)
    transfer.py      Transfer: export, restore and backup, and import through importing.py

Dependency direction: the faces -> the service -> the pipeline, the derived indexes, the
state and (through the registry) the backends. The service imports no face.
"""

from memory_orchestrator.service.orchestrator import (
    Orchestrator,
    queued_writes,
    request_stats,
    store_names,
)
from memory_orchestrator.service.writing import call_bound_s

__all__ = ["Orchestrator", "call_bound_s", "queued_writes", "request_stats", "store_names"]
