"""What an agent waits for when it starts the MCP server over stdio.

For each store (the 40-memory demo store, and `--sizes` stores of LoCoMo turns then synthetic
memories, as `bench_context.py` builds them), each round starts `orchestrator serve
--in-process` as an agent does (a real process, JSON-RPC lines on its stdin and stdout; in its
own process: the shared process that `orchestrator serve` relays to is measured by
`bench_footprint.py`) and times:

- `initialize`: from starting the process to the answer;
- the first `memory_context` after it, and the median of `--later` ones after that (each a
  different LoCoMo question);
- and, in the same round, `python -c "import mcp.server"`: the SDK's own import time, the
  floor any Python MCP server pays;
- when the warm-up is done ("ready": `memory_health` no longer says the indexes are loading,
  polled every 0.1 s), and the median of `--later` more calls then (the semantic index may
  still be embedding a cold store's memories in the background).

"cold": the first start over the store: no semantic vectors kept yet (the semantic folder
under the data dir is removed before each round), so the model has every memory to embed;
"warm": a restart, once every vector is kept (embedded untimed before the warm rounds). The
operating system's file cache is warm in both (this script does not drop it). Not a test:
it asserts nothing. Timings move with the machine's load: compare within one run.

    .venv/bin/python bench/bench_startup.py [--sizes 10000] [--rounds 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_context

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.models import ContextRequest
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import load_settings

VENV_BIN = Path(sys.executable).parent
REPLY_TIMEOUT_S = 600.0


def build_store(folder: Path, size: int) -> None:
    """An embedded store of `size` memories in `folder` (the demo sample when size is 0)."""
    if size == 0:
        subprocess.run(
            [str(VENV_BIN / "orchestrator"), "demo", "--data-dir", str(folder)],
            check=True,
            capture_output=True,
        )
        return
    turns, _ = bench_context.locomo_turns()
    memories = (turns + bench_context.synthetic(max(0, size - len(turns))))[:size]
    folder.mkdir(parents=True, exist_ok=True)

    async def write() -> None:
        backend = EmbeddedBackend(load_settings(data_dir=folder).embedded_path())
        for i in range(0, len(memories), 1000):
            await backend.write_many(memories[i : i + 1000])
        await backend.close()

    anyio.run(write)


@contextlib.contextmanager
def vectors_aside(data: Path, aside: bool) -> Iterator[None]:
    """With `aside`, the kept vectors are moved away for the block (a first start) and put
    back after it (what the block's server embedded is dropped)."""
    if not aside:
        yield
        return
    kept, away = data / "semantic", data / "semantic.kept"
    kept.rename(away)
    try:
        yield
    finally:
        shutil.rmtree(kept, ignore_errors=True)
        away.rename(kept)


async def settle(data: Path) -> None:
    """Embed every memory of the store in `data` and keep the vectors (untimed)."""
    settings = load_settings(data_dir=data)
    orch = Orchestrator.from_settings(settings)
    await orch.context(ContextRequest(query="warm up"))
    await bench_context.settled(orch)
    await orch.close()


def sdk_import_s() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import mcp.server"], check=True)
    return time.perf_counter() - started


class Server:
    """`orchestrator serve` over stdio, as an agent's MCP config starts it (the data dir in
    ORCHESTRATOR_DATA_DIR), spoken to line by line. `entry` ("module:function"): that
    function as the console script instead (another checkout's, for an A/B)."""

    def __init__(self, data: Path, entry: str | None = None) -> None:
        # in its own process, as before the shared process (bench_footprint.py measures the
        # relay): each round starts it cold
        command = [str(VENV_BIN / "orchestrator"), "serve", "--in-process"]
        if entry is not None:
            module, function = entry.split(":")
            script = f"import sys; from {module} import {function}; sys.exit({function}())"
            command = [sys.executable, "-c", script, "serve"]
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "ORCHESTRATOR_DATA_DIR": str(data)},
        )
        self.next_id = 0

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            line = _line(self.proc.stdout)
            message = json.loads(line)
            if message.get("id") == self.next_id:
                return dict(message)

    def notify(self, method: str) -> None:
        self._send({"jsonrpc": "2.0", "method": method})

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def context(self, query: str) -> float:
        started = time.perf_counter()
        reply = self.request(
            "tools/call", {"name": "memory_context", "arguments": {"query": query}}
        )
        if reply.get("result", {}).get("isError") or "error" in reply:
            raise RuntimeError(f"memory_context failed: {str(reply)[:300]}")
        return time.perf_counter() - started

    def ready(self) -> float:
        """Seconds from the start until the warm-up is done (`memory_health` no longer says
        the indexes are loading; every memory need not be embedded yet), polled."""
        while True:
            reply = self.request("tools/call", {"name": "memory_health", "arguments": {}})
            text = json.dumps(reply)
            if "loading" not in text and "warming up" not in text:
                return time.perf_counter() - self.started
            time.sleep(0.1)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _line(stream: IO[str]) -> str:
    line = stream.readline()
    if not line:
        raise RuntimeError("the server closed its stdout")
    return line


def one_round(
    data: Path, questions: list[str], later: int, entry: str | None = None
) -> dict[str, float]:
    sdk = sdk_import_s()
    server = Server(data, entry)
    try:
        server.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench_startup", "version": "1"},
            },
        )
        initialize = time.perf_counter() - server.started
        server.notify("notifications/initialized")
        first = server.context(questions[0])
        rest = [server.context(q) for q in questions[1 : 1 + later]]
        ready = server.ready()
        loaded = [server.context(q) for q in questions[1 + later :]]
    finally:
        server.close()
    return {
        "sdk_import_s": round(sdk, 3),
        "initialize_s": round(initialize, 3),
        "first_context_ms": round(first * 1000, 1),
        "later_context_ms": round(statistics.median(rest) * 1000, 1),
        "ready_s": round(ready, 2),
        "loaded_context_ms": round(statistics.median(loaded) * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000", help="store sizes besides the demo store")
    parser.add_argument("--rounds", type=int, default=3, help="cold and warm rounds each")
    parser.add_argument("--later", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--keep", type=Path, default=None, help="keep the stores and their vectors in DIR"
    )
    parser.add_argument(
        "--entry",
        default=None,
        help="module:function to start instead of the console script (an A/B against"
        " another checkout: memory_orchestrator.faces.cli:main before faces.launch existed)",
    )
    args = parser.parse_args()
    _, questions = bench_context.locomo_turns()
    rng = random.Random(5)
    results: list[dict[str, Any]] = []
    sizes = [0, *(int(s) for s in args.sizes.split(",") if s)]
    with contextlib.ExitStack() as stack:
        where = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        for size in sizes:
            data = where / f"store-{size}"
            if not data.exists():
                build_store(data, size)
            if not (data / "semantic").exists():
                anyio.run(settle, data)  # every vector kept: what a restart finds
            for state in ("cold", "warm"):
                for _ in range(args.rounds):
                    asked = rng.sample(questions, 1 + 2 * args.later)
                    row: dict[str, Any] = {"store": size or "demo", "state": state}
                    with vectors_aside(data, state == "cold"):
                        row.update(one_round(data, asked, args.later, args.entry))
                    print(json.dumps(row), file=sys.stderr)
                    results.append(row)
    print(
        f"{'store':>6} {'state':<5} {'sdk import s':>12} {'initialize s':>12} {'- sdk s':>8}"
        f" {'1st context ms':>14} {'later ms':>9} {'1st/later':>9} {'ready s':>8}"
        f" {'then ms':>8}"
    )
    for r in results:
        print(
            f"{r['store']:>6} {r['state']:<5} {r['sdk_import_s']:>12.3f} {r['initialize_s']:>12.3f}"
            f" {r['initialize_s'] - r['sdk_import_s']:>8.3f} {r['first_context_ms']:>14.1f}"
            f" {r['later_context_ms']:>9.1f}"
            f" {r['first_context_ms'] / max(r['later_context_ms'], 1e-9):>9.1f}"
            f" {r['ready_s']:>8.2f} {r['loaded_context_ms']:>8.1f}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
