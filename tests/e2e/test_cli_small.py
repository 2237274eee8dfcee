"""What a new user tripped on: `--version`, a malformed `orchestrator.toml` picked up from the
working directory, `serve --transport http` on a port in use, and explain's wording."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from memory_orchestrator.faces.cli import app
from memory_orchestrator.models import Dropped, DropReason
from memory_orchestrator.pipeline.explainer import drop_line

ORCHESTRATOR = Path(sys.executable).with_name("orchestrator")


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def one_error_line(result: Result | subprocess.CompletedProcess[str], code: int) -> str:
    exit_code = result.exit_code if isinstance(result, Result) else result.returncode
    assert exit_code == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_prints_the_package_version(flag: str) -> None:
    done = subprocess.run(
        [str(ORCHESTRATOR), flag], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"mnemon-memory-orchestrator {version('mnemon-memory-orchestrator')}\n"


def test_a_malformed_config_in_the_working_directory_is_named(tmp_path: Path) -> None:
    (tmp_path / "orchestrator.toml").write_text("[retrieval\ntop_k = 3\n")
    line = one_error_line(invoke("--data-dir", str(tmp_path / "d"), "health"), 2)
    assert f"config file {tmp_path / 'orchestrator.toml'}: not valid TOML" in line
    assert "(at line 1, column 11)" in line


def test_serve_over_http_on_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        argv = [str(ORCHESTRATOR), "--data-dir", str(tmp_path), "serve", "--transport", "http"]
        argv += ["--port", str(port), "--insecure-no-auth"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    line = one_error_line(done, 1)
    assert f"cannot serve on 127.0.0.1:{port}: " in line
    assert done.stdout == ""


def test_a_drop_says_its_reason_once() -> None:
    superseded = Dropped(
        id="m1",
        reason=DropReason.SUPERSEDED,
        stage="currency",
        detail="superseded by m2 on 2026-11-26; ask with history to see it",
    )
    assert drop_line(superseded) == (
        "m1: superseded by m2 on 2026-11-26; ask with history to see it (currency stage)"
    )
    duplicate = Dropped(id="m3", reason=DropReason.DUPLICATE, stage="deduper", detail="of m4")
    assert drop_line(duplicate) == "m3: duplicate: of m4 (deduper stage)"
    bare = Dropped(id="m5", reason=DropReason.OVER_BUDGET, stage="packager")
    assert drop_line(bare) == "m5: over budget (packager stage)"


def test_explain_of_a_correction_says_superseded_once(tmp_path: Path) -> None:
    data = str(tmp_path / "d")
    rate = "The API rate limit for the billing service is {} requests per minute."
    for value, day in ((100, "01"), (500, "03")):
        done = invoke(
            "--data-dir", data, "write", rate.format(value), "--created-at", f"2026-11-{day}"
        )
        assert done.exit_code == 0, done.output
    found = invoke("--data-dir", data, "--json", "search", "billing rate limit")
    trace_id = json.loads(found.stdout)["trace_id"]
    text = json.loads(invoke("--data-dir", data, "--json", "explain", trace_id).stdout)["text"]
    (line,) = [x for x in text.splitlines() if "superseded by" in x]
    assert line.count("superseded") == 1, line
    assert line.endswith("ask with history to see it (currency stage)")


def test_the_inspector_s_ready_line_counts_in_words() -> None:
    from memory_orchestrator.faces.ui.app import ready_detail

    assert ready_detail(1, 1, "ok") == "1 memory listed, 1 request read, health ok"
    assert ready_detail(2, 0, "ok") == "2 memories listed, 0 requests read, health ok"
    assert ready_detail(None, 3, "degraded").startswith("the store cannot list its memories, 3")
