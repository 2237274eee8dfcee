"""Every error the orchestrator raises on purpose, in one tree.

::

    OrchestratorError                     anything raised on purpose; never a bug
    +-- UsageError                        the caller can fix it by asking differently
    |   +-- InvalidRequest (ValueError)   a request breaks a rule or a limit; nothing was done
    |   +-- ConfigError (ValueError)      settings that cannot work (a path, a name, a token)
    |   |   +-- UnknownBackend            `backend = "..."` names no registered store
    |   +-- DatasetError (ValueError)     an eval dataset that cannot be read
    |   +-- TransferError (ValueError)    a file to import or restore that cannot be used, or
    |                                     a store that cannot take it (not empty, no listing)
    +-- NotFound (LookupError)
    |   +-- TraceNotFound                 no stored trace has this id
    +-- BackendError                      a store failed; `transient` means a retry may work
    |   +-- CapabilityMissing             the store has no such operation
    |   +-- StoreTimeout                  a store process ran past its limit and was stopped
    |   +-- StoreUnreadable               no search reached the store: an empty answer would lie
    +-- OutboxError                       the write outbox itself cannot be used
    +-- ForgetError                       the list of forgotten memories cannot be used
    +-- EmbeddingFailed                   the semantic model failed on memories to index
    +-- MissingExtra                      an optional extra is not installed (names it)
    |   +-- SemanticUnavailable           the embedding model cannot be loaded
    +-- ModelInstallError                 `orchestrator models install` cannot get the model

Each face maps this tree once: the MCP server to tool-error messages
(`faces.mcp.tools.tool_error`), the CLI and its eval command to one stderr line and an exit code
(`faces/cli/common.py`). Backends raise only `BackendError` and its subclasses; anything else that
escapes a store is a bug and is reported as one.

A bug is never caught where it happens: it fails the request that met it. Only the process
edges (the MCP server's tool calls, the background workers) catch everything, and each hands
what it caught to `unexpected`, which logs it with its traceback and counts it by place (the
metrics' `orchestrator_unexpected_errors`, and a health check while any were counted).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter

__all__ = [
    "STORE_ERRORS",
    "BackendError",
    "CapabilityMissing",
    "ConfigError",
    "DatasetError",
    "EmbeddingFailed",
    "ForgetError",
    "InvalidRequest",
    "MissingExtra",
    "ModelInstallError",
    "NotFound",
    "OrchestratorError",
    "OutboxError",
    "SemanticUnavailable",
    "StoreTimeout",
    "StoreUnreadable",
    "TraceNotFound",
    "TransferError",
    "UnknownBackend",
    "UsageError",
    "describe",
    "unexpected",
    "unexpected_errors",
]


class OrchestratorError(Exception):
    """The root: everything the orchestrator raises on purpose."""


class UsageError(OrchestratorError):
    """The caller can fix it (bad arguments, bad settings, a bad dataset)."""


class InvalidRequest(UsageError, ValueError):
    """A request that passed the schema but breaks a rule or a configured limit; nothing was
    done."""


class ConfigError(UsageError, ValueError):
    """Settings that cannot work; the message names the setting."""


class UnknownBackend(ConfigError):
    """No store is registered under the configured name."""


class DatasetError(UsageError, ValueError):
    """A dataset file that cannot be read, with the place and the reason."""


class TransferError(UsageError, ValueError):
    """An import, export, restore or backup that cannot be done as asked: a file that cannot
    be read (with the place and the reason), or a store that cannot take it (a restore into a
    store that is not empty). Nothing was written."""


class NotFound(OrchestratorError, LookupError):
    """Something asked for by id does not exist."""


class TraceNotFound(NotFound):
    """No stored trace has this id (it was never made, or it aged out)."""


class BackendError(OrchestratorError):
    """A store failed to do what was asked. `transient` errors may be retried."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class CapabilityMissing(BackendError):
    """The store has no such operation (see its `capabilities`)."""


class StoreTimeout(BackendError):
    """A store call ran past its time limit and was stopped (transient by default)."""

    def __init__(self, message: str, *, transient: bool = True) -> None:
        super().__init__(message, transient=transient)


class StoreUnreadable(BackendError):
    """Every search of a read failed (the store is missing, locked, hung or gone) and nothing
    came back from elsewhere: answering "nothing found" would pass a broken store off as an
    empty memory. `trace_id` names the request's stored trace."""

    def __init__(self, message: str, *, transient: bool = False, trace_id: str = "") -> None:
        super().__init__(message, transient=transient)
        self.trace_id = trace_id


class OutboxError(OrchestratorError):
    """The outbox file itself cannot be used."""


class ForgetError(OrchestratorError):
    """The list of forgotten memories (`state/forgotten.py`) cannot be read or written: a
    read fails rather than return a memory that may have been forgotten."""


class EmbeddingFailed(OrchestratorError):
    """The semantic model failed on memories the semantic index had to embed (an evaluation
    waits for all of them, and would otherwise measure without them)."""


class MissingExtra(OrchestratorError):
    """An optional dependency is not installed; the message names the extra to install."""


class SemanticUnavailable(MissingExtra):
    """The embedding model cannot be loaded (extra not installed, weights missing)."""


class ModelInstallError(OrchestratorError):
    """The semantic model cannot be fetched, checked or exported (offline, another file
    than the pinned one, a disk that cannot hold it); one line says which."""


STORE_ERRORS: tuple[type[Exception], ...] = (BackendError, OSError)
"""What a call to a store can raise: its `BackendError`s, the caller's time limit (`TimeoutError`,
an `OSError`) and an I/O error it let through. A caller that goes on without the answer catches
these and nothing else: any other error is a bug, and fails the request."""


def describe(exc: BaseException) -> str:
    """`ExcName: message` (or the name alone): how a trace note or health check names an
    error that was caught and survived."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


_bugs = logging.getLogger("memory_orchestrator.bugs")
_tally: Counter[str] = Counter()
_tally_lock = threading.Lock()


def unexpected(place: str, exc: BaseException, *, logged: bool = False) -> None:
    """A bug caught at a process edge (`place` names it): logged with its traceback (unless
    `logged`: whoever caught it already did) and counted, for this process's lifetime."""
    if not logged:
        _bugs.error("unexpected error in %s: %s", place, describe(exc), exc_info=exc)
    with _tally_lock:
        _tally[place] += 1


def unexpected_errors() -> dict[str, int]:
    """How many bugs each process edge has caught so far (`unexpected`)."""
    with _tally_lock:
        return dict(_tally)
