"""Benchmark: what an agent reads of each read tool, through the MCP SDK's client over stdio.

For every question, on a store the script builds, it calls `memory_context` (the default
budget) and `memory_search` (the default `top_k`) as an agent would, with no extra arguments,
and records the characters of each answer's text content (what the model reads), of its
structured content (serialized as JSON, default separators) and of the context block. It also
measures `tools/list` (the tools serialized as JSON, default separators: what a client puts in
the model's context at every session start).

Stores:
- `demo`: the built-in sample (`orchestrator demo`'s memories) and QUESTIONS about it;
- `locomo`: each conversation of the LoCoMo development split in its own embedded store (the
  eval protocol's ingest) and each of its questions of categories 1-4, asked `as_of` the
  conversation's last session.

The targets of issue 48: over all `memory_context` calls, text content at most 1.5x the
block's characters, no call's text more than its block + 300 characters, structured content
at most 2.5x the block; `tools/list` at most 20,000 characters. Not a test: it asserts only
that the tools answer.

    .venv/bin/python bench/bench_agent_payload.py [--stores demo,locomo] [--limit N]
        [--json OUT] [--dataset PATH]

Run it on an older commit (for a before/after in one hour) with that checkout's `src` first
on PYTHONPATH: the server processes inherit it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

from memory_orchestrator.demo import load_demo
from memory_orchestrator.eval.datasets import load_dataset
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import load_settings

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "locomo" / "locomo-dev.json"
QUESTIONS = (
    "recent issues with Vendor X",
    "who leads Project Atlas?",
    "how do I deploy atlas-core?",
    "what is the new target date for the Atlas pilot?",
    "what did we decide about Vendor Y?",
    "how do I flash firmware on an Atlas board?",
    "how does Dana like to get updates?",
    "what happened with ticket VX-1142?",
    "what did Vendor X promise on the last call?",
    "where is the soak test dashboard?",
    "what did the Infra team escalate?",
    "who at Acme Corp gets the status updates?",
)
START_S, CALL_S = 60.0, 120.0


@dataclass
class Calls:
    """The characters of every call of one tool on one store."""

    text: list[int] = field(default_factory=list)
    structured: list[int] = field(default_factory=list)
    block: list[int] = field(default_factory=list)  # the context block of the same question

    def add(self, result: CallToolResult, block: int) -> None:
        if result.is_error:
            raise RuntimeError(f"a tool failed: {_text(result)[:300]}")
        self.text.append(len(_text(result)))
        self.structured.append(len(json.dumps(result.structured_content, ensure_ascii=False)))
        self.block.append(block)

    def summary(self) -> dict[str, Any]:
        blocks = sum(self.block) or 1
        over = [t - b for t, b in zip(self.text, self.block, strict=True)]
        ratios = [t / b for t, b in zip(self.text, self.block, strict=True) if b]
        return {
            "calls": len(self.text),
            "text_chars_mean": round(statistics.fmean(self.text), 1),
            "block_chars_mean": round(statistics.fmean(self.block), 1),
            "text_per_block": round(sum(self.text) / blocks, 3),
            "text_per_block_max": round(max(ratios), 3),
            "text_minus_block_max": max(over),
            "structured_per_block": round(sum(self.structured) / blocks, 3),
            "structured_per_block_max": round(
                max(s / b for s, b in zip(self.structured, self.block, strict=True) if b), 3
            ),
            "tokens_per_call": round(statistics.fmean(self.text) / 4, 1),
        }


def _text(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


def _block(result: CallToolResult) -> str:
    content = result.structured_content or {}
    block = content.get("context_block")
    if not isinstance(block, str):
        raise RuntimeError(f"no context block: {_text(result)[:300]}")
    return block


@asynccontextmanager
async def _session(data_dir: Path) -> AsyncIterator[ClientSession]:
    env = {**os.environ, "ORCHESTRATOR_DATA_DIR": str(data_dir)}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memory_orchestrator.faces.mcp.server"], env=env
    )
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            with anyio.fail_after(START_S):
                await session.initialize()
                await _warmed(session)
            yield session


async def _warmed(session: ClientSession) -> None:
    """Until the server's warm-up has loaded its indexes (health says so)."""
    while True:
        health = await session.call_tool("memory_health", {})
        content = health.structured_content or {}
        details = " ".join(str(c.get("detail", "")) for c in content.get("checks", []))
        if "loading" not in details and "warming up" not in details:
            return
        await anyio.sleep(0.1)


async def _tool_list(session: ClientSession) -> dict[str, int]:
    tools = (await session.list_tools()).tools
    dumped = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
    sizes = {t["name"]: len(json.dumps(t)) for t in dumped}
    return {"total": len(json.dumps({"tools": dumped})), **sizes}


async def _ask(
    session: ClientSession,
    questions: Sequence[tuple[str, datetime | None]],
    context: Calls,
    search: Calls,
) -> None:
    for question, as_of in questions:
        arguments: dict[str, Any] = {"query": question}
        if as_of is not None:
            arguments["as_of"] = as_of.isoformat()
        with anyio.fail_after(CALL_S):
            package = await session.call_tool("memory_context", arguments)
            block = len(_block(package))
            context.add(package, block)
            search.add(await session.call_tool("memory_search", arguments), block)


async def _demo(folder: Path, report: dict[str, Any]) -> None:
    data = folder / "demo"
    orchestrator = Orchestrator.from_settings(load_settings(data_dir=data))
    try:
        await load_demo(orchestrator)
        await orchestrator.settle()
    finally:
        await orchestrator.close()
    context, search = Calls(), Calls()
    async with _session(data) as session:
        report["tools_list"] = await _tool_list(session)
        await _ask(session, [(q, None) for q in QUESTIONS], context, search)
    report["demo"] = {"memory_context": context.summary(), "memory_search": search.summary()}


async def _locomo(folder: Path, dataset: Path, limit: int | None, report: dict[str, Any]) -> None:
    data = load_dataset(dataset)
    context, search = Calls(), Calls()
    for case in data.cases:
        where = folder / f"locomo-{case.id}"
        orchestrator = Orchestrator.from_settings(load_settings(data_dir=where))
        try:
            await orchestrator.ingest([m.memory for m in case.memories])
            await orchestrator.settle()
        finally:
            await orchestrator.close()
        asked = [
            (q.text, q.as_of or case.as_of)
            for q in case.questions
            if q.skip_reason is None and q.category in ("1", "2", "3", "4")
        ][:limit]
        async with _session(where) as session:
            await _ask(session, asked, context, search)
        print(f"  {case.id}: {len(asked)} questions", file=sys.stderr)
    report["locomo"] = {"memory_context": context.summary(), "memory_search": search.summary()}


async def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="demo,locomo")
    parser.add_argument("--limit", type=int, default=None, help="questions per conversation")
    parser.add_argument("--dataset", type=Path, default=LOCOMO)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    stores = args.stores.split(",")
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with tempfile.TemporaryDirectory(prefix="agent-payload-") as folder:
        if "demo" in stores:
            await _demo(Path(folder), report)
        if "locomo" in stores:
            if not args.dataset.is_file():
                sys.exit(f"no LoCoMo split at {args.dataset} (--dataset PATH)")
            await _locomo(Path(folder), args.dataset, args.limit, report)
    report["ended"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    text = json.dumps(report, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    anyio.run(main)
