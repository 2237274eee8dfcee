"""`orchestrator ui`: what it refuses before it serves (a data dir without a store, no token
off loopback, a port in use), and that it serves every page of a demo store as a real
process (the pages themselves: tests/integration/test_inspector.py and tests/browser)."""

from __future__ import annotations

import socket
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from memory_orchestrator.faces.cli import app
from tests.inspector_process import inspector

pytestmark = pytest.mark.integration

ORCHESTRATOR = Path(sys.executable).parent / "orchestrator"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def store(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    result = invoke("demo", "--data-dir", str(data))
    assert result.exit_code == 0, result.output
    return data


def test_ui_is_listed_in_the_help() -> None:
    result = invoke("--help")
    assert "ui" in result.stdout
    assert "memory inspector" in invoke("ui", "--help").stdout


def test_a_data_dir_without_a_store_is_refused_not_served_empty(tmp_path: Path) -> None:
    result = invoke("ui", "--data-dir", str(tmp_path / "typo"))
    assert result.exit_code == 2
    assert "no memory store at" in result.stderr
    assert not (tmp_path / "typo").exists()


def test_off_loopback_without_a_token_it_refuses_to_start(store: Path) -> None:
    result = invoke("ui", "--data-dir", str(store), "--host", "0.0.0.0")
    assert result.exit_code == 2
    assert "asks for a bearer token off loopback" in result.stderr


def test_a_port_in_use_is_one_clear_line(store: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = invoke("ui", "--data-dir", str(store), "--port", str(port))
    assert result.exit_code == 1
    assert f"cannot serve on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.output


def test_orchestrator_ui_serves_every_page_of_the_demo_store(store: Path) -> None:
    argv = [str(ORCHESTRATOR), "ui", "--data-dir", str(store), "--port", "0"]
    with inspector(argv, cwd=store.parent) as url:
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url, timeout=60) as first:
            html = first.read().decode()
        memory = html.split('href="/memories/', 1)[1].split('"', 1)[0]
        for path in (
            "",
            "?q=vendor+firmware",
            f"memories/{memory}",
            f"memories/{memory}/forget",
            "traces",
            f"graph?memory={memory}",
            "graph?entity=Vendor+X",
            "health",
            "eval",
        ):
            with urllib.request.urlopen(url + path, timeout=60) as answer:
                assert answer.status == 200, path
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(url + "memories/mem_nothere", timeout=60)
        assert missing.value.code == 404
        missing.value.close()
