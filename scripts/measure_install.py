"""What each extra costs a user: `pip install` of this checkout's wheel into a fresh virtual
environment, with no extra and with each extra alone, from an empty pip cache (downloads
included, so the time depends on the network), and the size of what it installed.

    .venv/bin/python scripts/measure_install.py [--python python3] [--extras semantic,...]

Prints a Markdown table: install time, environment size, and the size added over the core.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DIST = "mnemon-memory-orchestrator"


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def _install(python: str, wheel: Path, extra: str | None, where: Path) -> tuple[float, int]:
    """Seconds `pip install` took, and the bytes of the environment's site-packages."""
    venv = where / (extra or "core")
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    subprocess.run([*pip, "install", "--quiet", "--upgrade", "pip"], check=True)
    empty = _size(next(venv.glob("lib/python*/site-packages")))
    target = f"{DIST}[{extra}] @ {wheel.as_uri()}" if extra else str(wheel)
    start = time.perf_counter()
    subprocess.run(
        [*pip, "install", "--quiet", "--no-cache-dir", "--disable-pip-version-check", target],
        check=True,
    )
    took = time.perf_counter() - start
    return took, _size(next(venv.glob("lib/python*/site-packages"))) - empty


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="interpreter for the venvs")
    parser.add_argument("--extras", default="semantic,postgres,plots")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        uv = REPO / ".tools" / "uv" / "bin" / "uv"
        subprocess.run([str(uv), "build", "--wheel", "-q", "-o", str(where), str(REPO)], check=True)
        (wheel,) = where.glob("*.whl")
        rows = [(None, *_install(args.python, wheel, None, where))]
        rows += [(e, *_install(args.python, wheel, e, where)) for e in args.extras.split(",")]
    core = rows[0][2]
    print("| install | pip install time | installed size | added to the core |")
    print("|---|---|---|---|")
    for extra, took, size in rows:
        name = f"`{DIST}[{extra}]`" if extra else f"`{DIST}`"
        added = f"+{(size - core) / 1e6:.0f} MB" if extra else "—"
        print(f"| {name} | {took:.1f} s | {size / 1e6:.0f} MB | {added} |")


if __name__ == "__main__":
    main()
