"""Where the minilm model is looked for, and what a missing extra or model says: always the
command that fixes it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memory_orchestrator.derived.embedders import MINILM_FOLDER, MiniLMEmbedder, find_minilm
from memory_orchestrator.errors import SemanticUnavailable
from memory_orchestrator.settings import load_settings


def model_folder(at: Path) -> Path:
    at.mkdir(parents=True)
    for name in ("model.onnx", "tokenizer.json"):
        (at / name).write_text("stand-in")
    return at


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A search with nothing to find: no model above it, an empty fastembed cache."""
    monkeypatch.setenv("FASTEMBED_CACHE_PATH", str(tmp_path / "fastembed_cache"))
    (tmp_path / "work" / "deep").mkdir(parents=True)
    return tmp_path


def test_an_explicit_model_dir_is_the_only_place_looked_at(nowhere: Path) -> None:
    model_folder(nowhere / "work" / ".tools" / "models" / MINILM_FOLDER)
    with pytest.raises(SemanticUnavailable, match=r"missing: model\.onnx, tokenizer\.json") as info:
        find_minilm(nowhere / "empty", starts=[nowhere / "work"])
    assert "orchestrator models install" in str(info.value)
    assert "ORCHESTRATOR_SEMANTIC__MODEL_DIR" in str(info.value)
    given = model_folder(nowhere / "given")
    assert find_minilm(given, starts=[nowhere / "work"]) == given


def test_the_project_folder_is_found_from_below(nowhere: Path) -> None:
    built = model_folder(nowhere / "work" / ".tools" / "models" / MINILM_FOLDER)
    assert find_minilm(starts=[nowhere / "work" / "deep"]) == built


def test_the_data_dir_then_fastembeds_cache_are_looked_in_next(nowhere: Path) -> None:
    snapshot = nowhere / "fastembed_cache/models--qdrant--all-MiniLM-L6-v2-onnx/snapshots/abc"
    cached = model_folder(snapshot)
    assert find_minilm(data_dir=nowhere / "data", starts=[nowhere / "work"]) == cached
    copied = model_folder(nowhere / "data" / "models" / MINILM_FOLDER)
    assert find_minilm(data_dir=nowhere / "data", starts=[nowhere / "work"]) == copied


def test_no_model_anywhere_names_the_command_that_builds_it(nowhere: Path) -> None:
    with pytest.raises(SemanticUnavailable, match="was not found") as info:
        find_minilm(data_dir=nowhere / "data", starts=[nowhere / "work"])
    assert "`orchestrator models install`" in str(info.value)


def test_a_missing_runtime_says_to_reinstall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if not installed
    with pytest.raises(SemanticUnavailable, match=r"come with the package: reinstall it"):
        MiniLMEmbedder(model_folder(tmp_path / "m"))


def test_a_broken_model_file_is_unavailable_not_a_crash(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    with pytest.raises(SemanticUnavailable, match="cannot load the model") as info:
        MiniLMEmbedder(model_folder(tmp_path / "m"))
    assert "orchestrator models install" in str(info.value)


def test_model_and_model_dir_are_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings(data_dir=tmp_path)
    assert (settings.semantic.model, settings.semantic.model_dir) == ("auto", None)
    folder = tmp_path / "models"
    folder.mkdir()
    monkeypatch.setenv("ORCHESTRATOR_SEMANTIC__MODEL", "minilm")
    monkeypatch.setenv("ORCHESTRATOR_SEMANTIC__MODEL_DIR", str(folder))
    settings = load_settings(data_dir=tmp_path)
    assert (settings.semantic.model, settings.semantic.model_dir) == ("minilm", folder.resolve())
