"""Backends by name. The service asks the registry; it never imports a backend module."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.errors import MissingExtra, UnknownBackend

if TYPE_CHECKING:
    from memory_orchestrator.settings import Settings

Factory = Callable[["Settings"], MemoryBackend]

# name -> "module:function"; loaded lazily so an unused backend costs no import time.
_BUILTIN: dict[str, str] = {
    "embedded": "memory_orchestrator.backends.embedded:from_settings",
    "mnemon": "memory_orchestrator.backends.mnemon:from_settings",
    "mnemon-mcp": "memory_orchestrator.backends.mnemon_mcp:from_settings",
    "kg-memory": "memory_orchestrator.backends.kg_memory:from_settings",
    "mnemonic": "memory_orchestrator.backends.mnemonic:from_settings",
    "fused": "memory_orchestrator.backends.fused:from_settings",
    "postgres": "memory_orchestrator.backends.postgres:from_settings",
}
# backend -> the optional extra that brings its packages
_EXTRAS = {"postgres": "postgres"}
_extra: dict[str, Factory] = {}


def register(name: str, factory: Factory) -> None:
    """Register a backend factory under `name` (for plug-ins and fault-injection tests)."""
    _extra[name] = factory


def names() -> list[str]:
    return sorted({*_BUILTIN, *_extra})


def create(name: str, settings: Settings) -> MemoryBackend:
    if name in _extra:
        return _extra[name](settings)
    target = _BUILTIN.get(name)
    if target is None:
        raise UnknownBackend(f"unknown backend {name!r}; known: {', '.join(names())}")
    module_name, _, attr = target.partition(":")
    try:
        module = import_module(module_name)
    except ImportError as exc:  # an optional extra (e.g. `postgres`) is not installed
        extra = _EXTRAS.get(name)
        fix = f"pip install 'mnemon-memory-orchestrator[{extra}]'" if extra else "reinstall"
        raise MissingExtra(
            f"backend {name!r} needs a package that is not installed ({exc}); {fix}"
        ) from exc
    factory: Factory = getattr(module, attr)
    return factory(settings)
