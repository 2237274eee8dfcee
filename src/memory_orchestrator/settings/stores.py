"""The settings of each store the orchestrator can front (`backend = "..."`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import (
    AfterValidator,
    Field,
)

from memory_orchestrator.settings.base import DirPath, FilePath, Section, StoreName, _executable


class EmbeddedSettings(Section):
    """The zero-setup SQLite store."""

    path: FilePath = Field(default=None, description="SQLite file; default <data_dir>/memories.db")


class MnemonSettings(Section):
    """The Mnemon store, reached through its `mnemon` CLI (see `backends/mnemon/`)."""

    binary: Annotated[Path | None, AfterValidator(_executable)] = Field(
        default=None, description="mnemon executable; default ./.tools/bin/mnemon, then PATH"
    )
    data_dir: DirPath = Field(
        default=None, description="Mnemon's --data-dir; default $MNEMON_DATA_DIR, else ~/.mnemon"
    )
    store: StoreName = Field(
        default=None,
        description="store name; default $MNEMON_STORE, else <data_dir>/active, else default",
    )
    readonly: bool = Field(
        default=False,
        description="run every command with --readonly: reads leave no trace, writes are refused",
    )
    timeout_s: float = Field(default=10.0, gt=0, le=600, description="per mnemon process")
    direct_reads: bool = Field(
        default=True,
        description="read memories by id, graph neighbours and entity names from the store file "
        "(read-only SQLite, schema-checked); false = only through the CLI",
    )


class NpmServerSettings(Section):
    """A store behind an npm MCP server spawned over stdio (`make npm-servers` installs it)."""

    script: FilePath = Field(
        default=None,
        description="the package's dist/index.js; default .tools/npm/node_modules/<pkg>/...",
    )
    node: Annotated[str | None, AfterValidator(_executable)] = Field(
        default=None, description="node executable; default node on PATH"
    )
    timeout_s: float = Field(default=10.0, gt=0, le=600, description="per tool call")
    native_search: bool = Field(
        default=False,
        description="send the query to the server as is, without the adapter's workarounds:"
        " the bare store, the baseline of docs/explanation/quality.md's per-store table",
    )


class MnemonMcpSettings(NpmServerSettings):
    """The mnemon-mcp store (npm `mnemon-mcp@1.3.0`, see `backends/mnemon_mcp.py`)."""

    path: FilePath = Field(
        default=None,
        description="the SQLite file (MNEMON_DB_PATH); default <data_dir>/mnemon-mcp.db",
    )
    scope: StoreName = Field(
        default=None, description="scope written and searched (a store name); None = all"
    )


class KgMemorySettings(NpmServerSettings):
    """The MCP knowledge-graph memory server (see `backends/kg_memory.py`)."""

    path: FilePath = Field(
        default=None,
        description="the JSONL file (MEMORY_FILE_PATH); default <data_dir>/kg-memory.jsonl",
    )


class MnemonicSettings(Section):
    """Mnemonic's markdown files with YAML frontmatter (see `backends/mnemonic.py`)."""

    path: DirPath = Field(
        default=None, description="the memory directory; default <data_dir>/mnemonic"
    )
    git_commit: bool = Field(default=False, description="commit every write in the root (git)")


class FusedStore(Section):
    backend: str = Field(description="a backend name (not `fused`)")
    weight: float = Field(default=1.0, gt=0, le=100, description="its share in the RRF fusion")
    label: StoreName = Field(
        default=None,
        description="how items and ids name the store; default the backend name",
    )


class FusedSettings(Section):
    """Several stores at once (`backend = "fused"`, see `backends/fused.py`)."""

    stores: list[FusedStore] = Field(
        default_factory=list, description="the member stores; writes go to the first"
    )
    mirror_writes: bool = Field(
        default=False, description="write to every store, not only the primary"
    )
