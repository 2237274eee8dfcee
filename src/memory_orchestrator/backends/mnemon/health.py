"""`MnemonBackend.health`: the binary, `--version` and `status` (at once: two process starts
in a row can pass a caller's time limit), whether the store file is read directly, and the
fallbacks in use."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import anyio

from memory_orchestrator.backends.mnemon.features import Features
from memory_orchestrator.backends.mnemon.store_file import NoDirectRead
from memory_orchestrator.errors import BackendError
from memory_orchestrator.models import HealthCheck, Status


class Checked(Protocol):
    """What the checks read of a `MnemonBackend`."""

    features: Features
    store: str
    store_error: str | None
    db_path: Path

    @property
    def notes(self) -> tuple[str, ...]: ...

    def binary(self) -> Path: ...

    async def status(self, *, fresh: bool = False) -> dict[str, Any]: ...

    async def direct_reads_ok(self) -> str: ...


ORDER = ("binary", "version", "store", "direct_reads", "features")


class _Degraded(Exception):
    """A health check that passed with a reservation."""


async def health_checks(backend: Checked) -> list[HealthCheck]:
    """The checks, in `ORDER`; a failing one is an `error` check (a bug is raised)."""
    checks: list[HealthCheck] = []

    async def check(name: str, probe: Callable[[], Awaitable[str]]) -> bool:
        started = time.perf_counter()
        try:
            detail, status = await probe(), Status.OK
        except (NoDirectRead, _Degraded) as exc:
            detail, status = str(exc), Status.DEGRADED
        except (BackendError, OSError, sqlite3.Error) as exc:
            detail, status = str(exc) or type(exc).__name__, Status.ERROR
        ms = round((time.perf_counter() - started) * 1000, 3)
        checks.append(HealthCheck(name=name, status=status, detail=detail, latency_ms=ms))
        return status is not Status.ERROR

    async def binary() -> str:
        return str(backend.binary())

    async def version() -> str:
        found = await backend.features.version()
        if found.parts is None:  # `go install` builds: the version is set only on release
            return f"mnemon version {found.text} (a build without a release number)"
        return f"mnemon version {found.text}"

    async def store() -> str:
        if backend.store_error is not None:
            raise BackendError(backend.store_error)
        data = await backend.status()
        return (
            f"store {backend.store!r}: {data.get('total_insights', '?')} memories,"
            f" {data.get('edge_count', '?')} edges; {data.get('db_path', backend.db_path)}"
        )

    async def features() -> str:
        if backend.notes:
            raise _Degraded("; ".join(backend.notes))
        return "no fallbacks in use"

    if await check("binary", binary):
        async with anyio.create_task_group() as group:  # two process starts at once
            group.start_soon(check, "version", version)
            group.start_soon(check, "store", store)
    await check("direct_reads", backend.direct_reads_ok)
    await check("features", features)
    return sorted(checks, key=lambda c: ORDER.index(c.name))
