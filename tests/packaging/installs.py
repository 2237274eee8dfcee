"""Installs as a user makes them: the package built as a wheel, installed into fresh virtual
environments (no dev group; no extra, or one extra alone), and the installed `orchestrator`
run as a process.

One wheel per test session; every environment is made by the uv of `make setup`
(`.tools/uv/bin/uv`) from the download cache inside the project (`$UV_CACHE_DIR`, which the
Makefile points at `.tools/uv-cache`, the cache `make setup` filled), with the versions of
`uv.lock` as constraints: what gets installed is what the wheel's metadata asks for, at the
versions the rest of the suite ran with. The environments live outside the checkout, so the
installed package cannot find the checkout's `.tools/models` (as a user's could not).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DIST = "mnemon-memory-orchestrator"
# extra -> the modules it brings (keep in step with [project.optional-dependencies])
EXTRAS: dict[str, tuple[str, ...]] = {
    "semantic": ("wordllama",),
    "postgres": ("psycopg", "psycopg_pool"),
    "plots": ("matplotlib",),
}
OPTIONAL = tuple(module for modules in EXTRAS.values() for module in modules)
# the semantic stage's runtime and its model's exporter: in every install
SEMANTIC_RUNTIME = ("onnxruntime", "tokenizers", "threadpoolctl", "onnx", "safetensors")
# the modules that are an extra's feature: they alone import its packages at load time
FEATURE_MODULES = {
    "memory_orchestrator.backends.postgres": "psycopg",
    "memory_orchestrator.backends.postgres_restore": "psycopg",
    "memory_orchestrator.postgres.changes": "psycopg",
    "memory_orchestrator.postgres.database": "psycopg",
    "memory_orchestrator.postgres.state": "psycopg",
}
INSTALL_TIMEOUT_S = 480.0  # a cold download cache fetches the `semantic` extra's large wheels
RUN_TIMEOUT_S = 90.0


def uv() -> Path:
    found = REPO / ".tools" / "uv" / "bin" / "uv"
    if not found.is_file():
        raise AssertionError(f"no uv at {found}: run `make setup` (the packaging tests need it)")
    return found


def uv_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.setdefault("UV_CACHE_DIR", str(REPO / ".tools" / "uv-cache"))
    env.pop("UV_PROJECT_ENVIRONMENT", None)
    env["UV_PYTHON_DOWNLOADS"] = "never"
    env.setdefault("UV_SYSTEM_CERTS", "1")  # as the Makefile: the system's certificate store
    env["UV_LINK_MODE"] = "hardlink"  # the cache and /tmp share a disk here; copies otherwise
    return env


def _uv(*args: str | Path, cwd: Path = REPO) -> str:
    done = subprocess.run(
        [str(uv()), *map(str, args)],
        cwd=cwd,
        env=uv_env(),
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"uv {' '.join(map(str, args))} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def build_wheel(out: Path) -> Path:
    """The wheel of this checkout (the same build a `pip install .` makes), into `out`."""
    _uv("build", "--wheel", "--quiet", "--out-dir", out, REPO)
    (wheel,) = out.glob("*.whl")
    return wheel


def lock_constraints(out: Path) -> Path:
    """uv.lock's versions of every runtime package (no dev group), as a constraints file."""
    path = out / "constraints.txt"
    _uv(
        "export", "--frozen", "--no-dev", "--all-extras", "--no-hashes", "--no-emit-project",
        "--quiet", "--output-file", path,
    )  # fmt: skip
    return path


@dataclass(frozen=True)
class Install:
    """One fresh environment holding the wheel (with `extra`, or none)."""

    root: Path
    extra: str | None

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def orchestrator(self) -> Path:
        return self.root / "bin" / "orchestrator"

    def present(self, modules: tuple[str, ...] = OPTIONAL) -> set[str]:
        """Which of `modules` (default: the extras' modules) this environment can import."""
        code = (
            "import importlib.util, json, sys\n"
            "print(json.dumps([m for m in sys.argv[1:] if importlib.util.find_spec(m)]))"
        )
        done = self.run_python(code, *modules)
        return set(json.loads(done.stdout))

    def run_python(self, code: str, *args: str) -> subprocess.CompletedProcess[str]:
        return _run([str(self.python), "-c", code, *args], self.root, user_env(self.root))


@dataclass(frozen=True)
class Built:
    wheel: Path
    constraints: Path


def install(built: Built, root: Path, extra: str | None = None) -> Install:
    _uv("venv", "--quiet", "--python", sys.executable, root)
    target = f"{DIST}[{extra}]" if extra else DIST
    _uv(
        "pip", "install", "--quiet", "--python", root / "bin" / "python",
        "--constraints", built.constraints, f"{target} @ {built.wheel.as_uri()}",
    )  # fmt: skip
    return Install(root, extra)


def uvx(built: Built, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`uvx --from WHEEL orchestrator ARGS` (in an environment of its own, `--isolated`)."""
    argv = [
        str(uv()), "tool", "run", "--isolated", "--python", sys.executable,
        "--constraints", str(built.constraints), "--from", str(built.wheel), "orchestrator", *args,
    ]  # fmt: skip
    env = {**user_env(cwd), **{k: v for k, v in uv_env().items() if k.startswith("UV_")}}
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
        check=False,
    )  # fmt: skip


def user_env(home: Path, **settings: str) -> dict[str, str]:
    """A user's environment: no `ORCHESTRATOR_*` variable but `settings` (as
    ORCHESTRATOR_<NAME>), no fastembed cache with a model in it, PATH and locale kept, and the
    test's runtime directory (where `orchestrator serve` starts its shared process: stopped
    when the test ends, tests/shared_processes.py)."""
    kept = ("PATH", "LANG", "LC_ALL", "TMPDIR", "XDG_RUNTIME_DIR")
    env = {k: v for k, v in os.environ.items() if k in kept}
    env["HOME"] = str(home)
    env["XDG_DATA_HOME"] = str(home / "xdg-data")
    env["FASTEMBED_CACHE_PATH"] = str(home / "fastembed-cache")
    env["COLUMNS"] = "200"
    env.update({f"ORCHESTRATOR_{name.upper()}": value for name, value in settings.items()})
    return env


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )


def run(
    app: Install, cwd: Path, *args: str, ok: bool = True, **settings: str
) -> subprocess.CompletedProcess[str]:
    """`orchestrator ARGS` installed in `app`, run from `cwd` as a user would (see
    `user_env`); asserts exit 0 when `ok`."""
    done = _run([str(app.orchestrator), *args], cwd, user_env(cwd, **settings))
    if ok:
        assert done.returncode == 0, f"{' '.join(args)}: exit {done.returncode}\n{done.stderr}"
    return done


def cli_json(app: Install, data_dir: Path, *args: str, **settings: str) -> Any:
    """`orchestrator --data-dir DATA_DIR --json ARGS`, from `data_dir`'s parent, parsed;
    asserts exit 0."""
    argv = [str(app.orchestrator), "--data-dir", str(data_dir), "--json", *args]
    done = _run(argv, data_dir.parent, user_env(data_dir.parent, **settings))
    assert done.returncode == 0, f"{' '.join(args)}: exit {done.returncode}\n{done.stderr}"
    return json.loads(done.stdout)
