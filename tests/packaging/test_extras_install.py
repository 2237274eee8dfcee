"""Each extra installed alone (`pip install 'mnemon-memory-orchestrator[EXTRA]'`), running
its own feature: `semantic` (the semantic stage, wordllama out of the box and
all-MiniLM-L6-v2 from a model folder put where a pip user can put it), `postgres` (the
store and the shared state, on a real PostgreSQL), `plots` (the eval's PNGs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.packaging.conftest import Installer
from tests.packaging.installs import EXTRAS, REPO, Install, cli_json, run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

QUERY = "recent issues with Vendor X"
MINILM = REPO / ".tools" / "models" / "all-MiniLM-L6-v2"  # `make models` builds it


def _only(app: Install) -> None:
    assert app.extra is not None
    assert app.present() == set(EXTRAS[app.extra])


def _demo(app: Install, home: Path) -> Path:
    run(app, home, "demo", "--data-dir", "./demo-data")
    return home / "demo-data"


def _semantic_check(app: Install, data_dir: Path) -> str:
    report = cli_json(app, data_dir, "health")
    assert report["status"] == "ok", report
    check = next(c for c in report["checks"] if c["name"] == "semantic")
    assert check["status"] == "ok", check
    return str(check["detail"])


def test_semantic_runs_wordllama_out_of_the_box_and_minilm_from_a_model_folder(
    installer: Installer, tmp_path: Path
) -> None:
    app = installer("semantic")
    _only(app)
    data_dir = _demo(app, tmp_path)
    detail = _semantic_check(app, data_dir)
    assert detail.startswith("wordllama-l2_supercat-256, 40 memories indexed (auto fell back")
    assert "minilm: the all-MiniLM-L6-v2 ONNX model was not found" in detail
    found = cli_json(app, data_dir, "search", QUERY)
    assert any(item["breakdown"]["semantic"] for item in found["items"])

    if not (MINILM / "model.onnx").is_file():
        pytest.skip(f"no all-MiniLM-L6-v2 folder at {MINILM} (`make models` builds it)")
    # where a pip user puts the folder: <data_dir>/models/ (or [semantic] model_dir)
    shutil.copytree(MINILM, data_dir / "models" / MINILM.name)
    package = cli_json(app, data_dir, "context", QUERY)  # embeds the store with minilm
    assert any(item["breakdown"]["semantic"] for item in package["items"])
    detail = _semantic_check(app, data_dir)
    assert detail.startswith("all-MiniLM-L6-v2, 40 memories indexed;"), detail


def test_postgres_serves_the_store_and_the_shared_state(
    installer: Installer, tmp_path: Path, pg_dsn: str
) -> None:
    app = installer("postgres")
    _only(app)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    store = {"backend": "postgres", "postgres__dsn": pg_dsn}
    written = cli_json(
        app, data_dir, "write", "Vendor X ships firmware 2.5 with the LTE fix on December 15",
        "--entity", "Vendor X", **store,
    )  # fmt: skip
    assert written["action"] == "added", written
    found = cli_json(app, data_dir, "search", "Vendor X firmware", **store)
    assert [item["memory_id"] for item in found["items"]] == [written["id"]]
    report = cli_json(app, data_dir, "health", **store, shared__state="postgres")
    assert report["status"] == "ok", report
    assert report["backend"] == "postgres"


def test_plots_draws_the_eval_report(installer: Installer, tmp_path: Path) -> None:
    app = installer("plots")
    _only(app)
    done = run(app, tmp_path, "eval", "--dataset", "golden", "--out", "out")
    assert "no plots" not in done.stderr
    pngs = sorted(p.name for p in (tmp_path / "out").glob("*.png"))
    assert pngs == ["latency.png", "recall_at_k.png", "recall_by_category.png"]
    assert all((tmp_path / "out" / name).stat().st_size > 10_000 for name in pngs)
