"""The package's name and version, as installed (`orchestrator --version`, the MCP server's
`serverInfo`, the model installer's messages)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["DIST", "package_version"]

DIST = "mnemon-memory-orchestrator"


def package_version() -> str:
    """The installed distribution's version; "0.0.0" when running from a source tree that
    was never installed."""
    try:
        return version(DIST)
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "0.0.0"
