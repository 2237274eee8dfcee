"""The `orchestrator` console script: `orchestrator serve` over stdio (what an agent's MCP
config runs) is dispatched before the command line is loaded: the stdio relay, which imports
only the standard library, or with `--in-process` the stdio server; the rest is the Typer
CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

# the console script with the server's `run` stubbed out (it says how it was called), then
# which of the command line's heavy imports were loaded
PROBE = """
import sys
sys.argv = ["orchestrator", *sys.argv[1:]]
from memory_orchestrator.faces.mcp import server
server.run = lambda settings, transport, *a, **k: print("served", transport, settings.data_dir)
from memory_orchestrator.faces.launch import main
try:
    main()
finally:
    heavy = ("typer", "rich", "structlog", "memory_orchestrator.faces.cli.app")
    print("loaded", sorted(m for m in heavy if m in sys.modules))
"""
SCRIPT = "import sys; from memory_orchestrator.faces.launch import main; sys.exit(main())"


def probe(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return _run(tmp_path, PROBE, *args, **env)


def _run(tmp_path: Path, code: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,  # no stray ./orchestrator.toml is read
        env={**os.environ, "ORCHESTRATOR_DATA_DIR": str(tmp_path), **env},
        check=False,
    )


def test_serve_in_process_starts_the_stdio_server_without_the_command_line(
    tmp_path: Path,
) -> None:
    done = probe(tmp_path, "serve", "--in-process")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"served stdio {tmp_path}", "loaded []"]


def test_root_options_before_serve_take_the_same_way(tmp_path: Path) -> None:
    data = tmp_path / "elsewhere"
    done = probe(tmp_path, "--data-dir", str(data), "serve", "--transport", "stdio", "--in-process")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"served stdio {data}", "loaded []"]


def test_anything_else_goes_through_the_command_line(tmp_path: Path) -> None:
    done = probe(tmp_path, "--json", "serve", "--in-process")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"served stdio {tmp_path}"
    assert "'memory_orchestrator.faces.cli.app'" in done.stdout.splitlines()[1]


# what importing the relay, the hook client and the console script loads, as
# `python -X importtime` reports it (one line per module, to stderr)
RELAY_IMPORTS = (
    "import memory_orchestrator.faces.launch, memory_orchestrator.faces.shared.relay,"
    " memory_orchestrator.faces.shared.client"
)
OURS = {
    "memory_orchestrator",
    "memory_orchestrator.faces",
    "memory_orchestrator.faces.launch",
    "memory_orchestrator.faces.shared",
    "memory_orchestrator.faces.shared.address",
    "memory_orchestrator.faces.shared.client",
    "memory_orchestrator.faces.shared.relay",
}


def imported(tmp_path: Path, code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    return [line.rsplit("|", 1)[1].strip() for line in lines[1:]]  # (the first is a header)


def test_the_relay_and_the_hook_client_import_only_the_standard_library(tmp_path: Path) -> None:
    """`orchestrator serve` and a hook start per agent session and per prompt: they must not
    wait for pydantic, the MCP SDK, numpy or the service (`python -X importtime`)."""
    at_start = set(imported(tmp_path, "pass"))  # the interpreter's own (site, sitecustomize)
    modules = [m for m in imported(tmp_path, RELAY_IMPORTS) if m not in at_start]
    assert set(OURS) <= set(modules)
    others = [
        m for m in modules if m not in OURS and m.split(".")[0] not in sys.stdlib_module_names
    ]
    assert others == []
    assert "typing" not in modules  # (milliseconds, and nothing here needs it)


def test_the_importtime_reader_sees_a_third_party_import(tmp_path: Path) -> None:
    modules = imported(tmp_path, "import memory_orchestrator.settings")
    assert "pydantic" in modules


def test_serve_alone_fails_as_the_command_line_does(tmp_path: Path) -> None:
    fast = _run(tmp_path, SCRIPT, "serve", ORCHESTRATOR_BACKEND="nope")
    typer = _run(tmp_path, SCRIPT, "serve", "--transport", "stdio", ORCHESTRATOR_BACKEND="nope")
    assert fast.returncode == typer.returncode == 2
    assert fast.stderr == typer.stderr
    assert fast.stderr.startswith("error: unknown backend 'nope'")
    assert fast.stderr.count("\n") == 1


# what a request's stages import from other packages, loaded once the server module is
LOADED = """
import sys
from memory_orchestrator.faces.mcp import server
print(sorted(m for m in ("numpy", "rapidfuzz", "prometheus_client") if m in sys.modules))
"""


def test_the_packages_a_request_uses_are_loaded_before_the_server_answers(tmp_path: Path) -> None:
    """The stdio server answers `initialize` only once these are imported: made lazy, a first
    request would import them while the warm-up's threads may (ONNX Runtime's import reaches
    numpy in the middle of its own), and two first imports of numpy, or of rapidfuzz, at once
    leave one thread with a half-made module (seen: the server ended, a first request failed;
    docs/explanation/performance.md, 2026-11-28)."""
    done = _run(tmp_path, LOADED)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "['numpy', 'prometheus_client', 'rapidfuzz']"
