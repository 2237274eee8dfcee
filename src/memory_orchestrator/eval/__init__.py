"""The evaluation harness: does orchestration beat the store's own retrieval?

Its own package, a client of the service like any other: `datasets` and `jsonl` load
LoCoMo and hand-made sets; `systems` (with `runner` and `records`) runs raw / orchestrated /
expanded on the same fresh store per case; `metrics` holds the pure metric functions;
`diagnose` explains missed questions from their traces; `report` builds the JSON of the
protocol's output contract, `markdown` renders it for people, and `plots` draws PNGs
(matplotlib, the optional `plots` extra). The protocol is `shared/reference/eval-protocol.md`;
the CLI face is `orchestrator eval`.
"""

from memory_orchestrator.errors import DatasetError
from memory_orchestrator.eval.datasets import Dataset, load_dataset
from memory_orchestrator.eval.markdown import to_markdown
from memory_orchestrator.eval.report import build_report, write_report
from memory_orchestrator.eval.systems import SYSTEMS, EvalRun, Progress, RunOptions, run_eval

__all__ = [
    "SYSTEMS",
    "Dataset",
    "DatasetError",
    "EvalRun",
    "Progress",
    "RunOptions",
    "build_report",
    "load_dataset",
    "run_eval",
    "to_markdown",
    "write_report",
]
