"""Every store kind the suite can start, by name, in a folder of its own: the embedded store,
Mnemon (the contract double, the double acting as the June 2026 build, the real binary), the
real npm servers behind mnemon-mcp and kg-memory, Mnemonic files, PostgreSQL (a DSN from
`pg_dsn`) and a fused pair (Mnemonic first, the embedded store beside it)."""

from __future__ import annotations

from pathlib import Path

import anyio

from memory_orchestrator.backends.base import MemoryBackend
from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.backends.fused import FusedBackend, Member
from memory_orchestrator.backends.kg_memory import KgMemoryBackend
from memory_orchestrator.backends.mnemon import MnemonBackend
from memory_orchestrator.backends.mnemon_mcp import MnemonMcpBackend
from memory_orchestrator.backends.mnemonic import MnemonicBackend
from memory_orchestrator.demo import load_demo
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import MnemonSettings, Settings
from tests.mnemon_double import JUNE_2026, fast_launcher, real_binary
from tests.npm_servers import require_script

MNEMONS = ("mnemon", "mnemon-june", "mnemon-real")


def make_store(kind: str, folder: Path, pg_dsn: str | None = None) -> MemoryBackend:
    if kind == "embedded":
        return EmbeddedBackend(folder / "e.db")
    if kind == "mnemon-mcp":
        return MnemonMcpBackend(folder / "m.db", script=require_script("mnemon-mcp"), timeout_s=20)
    if kind == "kg-memory":
        script = require_script("@modelcontextprotocol/server-memory")
        return KgMemoryBackend(folder / "g.jsonl", script=script, timeout_s=20)
    if kind == "mnemonic":
        return MnemonicBackend(folder / "notes", rescan_s=0.0)
    if kind in MNEMONS:
        version = JUNE_2026 if kind == "mnemon-june" else None
        binary = real_binary() if kind == "mnemon-real" else fast_launcher(folder / "bin", version)
        return MnemonBackend(MnemonSettings(binary=binary, data_dir=folder / "mnemon"))
    if kind == "postgres":
        from memory_orchestrator.backends.postgres import PostgresBackend

        return PostgresBackend(pg_dsn)
    assert kind == "fused", kind
    primary = MnemonicBackend(folder / "notes", rescan_s=0.0)
    other = EmbeddedBackend(folder / "e.db")
    return FusedBackend([Member("notes", primary), Member("embedded", other)], primary="notes")


def demo_store(settings: Settings) -> Path:
    """The embedded store under `settings` with the built-in sample loaded; its path."""

    async def load() -> None:
        o = Orchestrator(EmbeddedBackend(settings.embedded_path()), settings)
        try:
            await load_demo(o)
        finally:
            await o.close()

    anyio.run(load)
    return settings.embedded_path()
