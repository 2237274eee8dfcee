"""The `mnemon` contract double (`double.py`, run by the executable `mnemon` next to it) and
helpers to find it or a real Mnemon binary. The double is a test stand-in, not Mnemon: its
ranking and its timings say nothing about Mnemon's."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOUBLE = HERE / "mnemon"
REPO = HERE.parents[1]


def fast_launcher(folder: Path) -> Path:
    """An executable `mnemon` in `folder` running the same double with this interpreter and
    `-S`: no site-packages scan and no version-manager shim in between (`#!/usr/bin/env
    python3` may go through one), so a call costs ~30 ms instead of ~90 ms here."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "mnemon"
    path.write_text(
        f"#!{sys.executable} -S\n"
        "import sys\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "from double import main\n"
        "sys.exit(main(sys.argv[1:]))\n",
        encoding="utf-8",
    )
    path.chmod(0o755)
    return path


def real_binary() -> Path | None:
    """A real Mnemon: $MNEMON_REAL_BINARY, else `.tools/bin/mnemon` in this checkout (where
    `make mnemon` installs it), else `mnemon` on PATH; never this double."""
    candidates = [os.environ.get("MNEMON_REAL_BINARY"), str(REPO / ".tools/bin/mnemon")]
    candidates.append(shutil.which("mnemon"))
    for candidate in candidates:
        if not candidate:
            continue
        path = Path(candidate).resolve()
        if path.is_file() and os.access(path, os.X_OK) and HERE not in path.parents:
            return path
    return None
