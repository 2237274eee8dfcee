"""The `mnemon` contract double (`double.py`, run by the executable `mnemon` next to it) and
helpers to find it or a real Mnemon binary. The double is a test stand-in, not Mnemon: its
ranking and its timings say nothing about Mnemon's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DOUBLE = HERE / "mnemon"
REPO = HERE.parents[1]


def fast_launcher(folder: Path, version: str | None = None) -> Path:
    """An executable `mnemon` in `folder` running the same double with this interpreter and
    `-S`: no site-packages scan and no version-manager shim in between (`#!/usr/bin/env
    python3` may go through one), so a call starts in a fraction of the time. With
    `version`, the double pretends to be that version (`MNEMON_DOUBLE_VERSION`, unless the
    environment names another): `JUNE_2026` acts as the real June 2026 build does."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "mnemon"
    pretend = f"os.environ.setdefault('MNEMON_DOUBLE_VERSION', {version!r})\n" if version else ""
    path.write_text(
        f"#!{sys.executable} -S\n"
        "import os, sys\n" + pretend + f"sys.path.insert(0, {str(HERE)!r})\n"
        "from double import main\n"
        "sys.exit(main(sys.argv[1:]))\n",
        encoding="utf-8",
    )
    path.chmod(0o755)
    return path


def npm_launcher(folder: Path, target: Path) -> Path:
    """An executable `mnemon` in `folder` shaped like Mnemon's npm launcher
    (`@mnemon-dev/mnemon`): it runs `target` as a child process with the same argv and
    stdio, forwards only SIGINT, SIGTERM and SIGHUP to it, and exits with its exit code.
    A SIGKILL sent to the launcher alone leaves the child running."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "mnemon"
    path.write_text(
        f"#!{sys.executable} -S\n"
        "import signal, subprocess, sys\n"
        f"child = subprocess.Popen([{str(target)!r}, *sys.argv[1:]])\n"
        "for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):\n"
        "    signal.signal(sig, lambda number, frame: child.send_signal(number))\n"
        "sys.exit(child.wait())\n",
        encoding="utf-8",
    )
    path.chmod(0o755)
    return path


RENAME = """
import json, re, subprocess, sys

def name(key, style):
    parts = key.split("_")
    if style == "no-id":
        return "uuid" if key == "id" else key
    if style == "go":
        return "".join("ID" if p == "id" else p.capitalize() for p in parts)
    return parts[0] + "".join(p.capitalize() for p in parts[1:])

def rename(data, style):
    if isinstance(data, list):
        return [rename(item, style) for item in data]
    if isinstance(data, dict):
        return {
            name(k, style): v if k == "metadata" else rename(v, style) for k, v in data.items()
        }
    return data

done = subprocess.run([TARGET, *sys.argv[1:]], capture_output=True, text=True)
sys.stderr.write(done.stderr)
try:
    document = json.loads(done.stdout)
except ValueError:
    sys.stdout.write(done.stdout)
else:
    sys.stdout.write(json.dumps(rename(document, STYLE), indent=2) + "\\n")
sys.exit(done.returncode)
"""


def renaming_binary(folder: Path, target: Path, style: str) -> Path:
    """An executable `mnemon` in `folder` that runs `target` and prints its JSON with the
    keys renamed as a newer Mnemon build might print them: `go` (Go field names: `ID`,
    `CreatedAt`, `ReplacedID`), `camel` (`id`, `createdAt`, `replacedId`) or `no-id` (the id
    field under another name, `uuid`)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "mnemon"
    head = f"#!{sys.executable} -S\nTARGET = {str(target)!r}\nSTYLE = {style!r}\n"
    path.write_text(head + RENAME, encoding="utf-8")
    path.chmod(0o755)
    return path


SHARED_BUILD = REPO.parent / "shared" / "mnemon" / "bin" / "mnemon"
JUNE_2026 = "0.1.14"  # MNEMON_DOUBLE_VERSION for the double that acts as that real build does


def _real_candidates() -> list[str | None]:
    """$MNEMON_REAL_BINARY, else the real build kept beside the checkout
    (`../shared/mnemon/bin/mnemon`; CI runs a clean clone that sits beside it too), else
    `.tools/bin/mnemon` (where `make mnemon` installs one), else `mnemon` on PATH."""
    named = os.environ.get("MNEMON_REAL_BINARY")
    if named:
        return [named]
    return [str(SHARED_BUILD), str(REPO / ".tools/bin/mnemon"), shutil.which("mnemon")]


def real_binary() -> Path | None:
    """A real Mnemon (see `_real_candidates`), never this double; None when none is found."""
    for candidate in _real_candidates():
        if not candidate:
            continue
        path = Path(candidate).resolve()
        if path.is_file() and os.access(path, os.X_OK) and HERE not in path.parents:
            return path
    return None


def real_expected() -> bool:
    """Whether this machine should have a real Mnemon: $MNEMON_REAL_BINARY is set, or the
    `../shared/mnemon` folder it comes from is there."""
    return bool(os.environ.get("MNEMON_REAL_BINARY")) or SHARED_BUILD.parents[1].is_dir()


def real_problem() -> str | None:
    """Why the real binary cannot be used (missing, or `--version` fails); None when it runs."""
    found = real_binary()
    if found is None:
        looked = ", ".join(str(c) for c in _real_candidates() if c)
        return f"no real mnemon binary (looked in: {looked})"
    try:
        done = subprocess.run(
            [str(found), "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{found} --version failed: {exc}"
    if done.returncode != 0 or "version" not in done.stdout:
        said = (done.stderr or done.stdout).strip()[:200]
        return f"{found} --version failed (exit {done.returncode}): {said}"
    return None


def kinds(*extra: str) -> list[Any]:
    """pytest params: "double" (the contract double, v0.2.9), each of `extra` ("june": the
    double acting as the June 2026 build does, `JUNE_2026`), and "real" (marked
    `mnemon_real`) where a real binary is found."""
    import pytest

    found = [pytest.param("real", marks=pytest.mark.mnemon_real)] if real_binary() else []
    return ["double", *extra, *found]
