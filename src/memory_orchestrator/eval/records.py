"""The records of an evaluation run: options, one system's answer, per-question and per-case
results, and the `Progress` seam the CLI draws its bars from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from memory_orchestrator.eval.datasets import Dataset, EvalQuestion
from memory_orchestrator.models import MAX_TOP_K

__all__ = [
    "SYSTEMS",
    "Answer",
    "CaseResult",
    "EvalRun",
    "NoProgress",
    "Progress",
    "QuestionResult",
    "RunOptions",
    "SystemName",
    "WriteCheckResult",
]

SystemName = Literal["raw", "orchestrated", "expanded"]
SYSTEMS: tuple[SystemName, ...] = ("raw", "orchestrated", "expanded")


class Progress(Protocol):
    """Told how far each phase ("ingest", "queries") has got; the CLI draws bars from it."""

    def update(self, phase: str, completed: int, total: int) -> None: ...


class NoProgress:
    def update(self, phase: str, completed: int, total: int) -> None:
        return None


@dataclass(frozen=True)
class RunOptions:
    backend: str
    k: tuple[int, ...] = (5, 10)
    systems: tuple[SystemName, ...] = SYSTEMS
    limit_questions: int | None = None  # the first N questions of each case
    cases: int | tuple[str, ...] | None = None  # the first N cases, or these ids
    measure_context: bool = True
    diagnose: bool = True
    # "protocol": each memory as the dataset gives it (LoCoMo: the speaker as its entity, its
    # turn id as tag and metadata); "content": as an agent writes it, content (and the time
    # it was written) only, so whatever entities it gets come from the orchestrator
    ingest: Literal["protocol", "content"] = "protocol"
    # ask the questions of the store the settings name, as it is loaded: nothing ingested,
    # no write check run (`systems.run_eval`)
    store: bool = False

    def __post_init__(self) -> None:
        if not self.k or any(not 1 <= k <= MAX_TOP_K for k in self.k):
            raise ValueError(f"every k must be within 1..{MAX_TOP_K}")
        if not self.systems or any(s not in SYSTEMS for s in self.systems):
            raise ValueError(f"systems must be among {', '.join(SYSTEMS)}")
        if self.limit_questions is not None and self.limit_questions < 1:
            raise ValueError("limit_questions must be at least 1")

    @property
    def max_k(self) -> int:
        return max(self.k)


@dataclass
class Answer:
    """One system's answer to one question."""

    ranking: tuple[frozenset[str], ...]  # dataset keys per returned item, best first
    ids: tuple[str, ...]
    texts: tuple[str, ...]
    latency_ms: float
    context_chars: int
    trace_id: str | None = None
    # what an agent reads (orchestrated systems): the dataset keys of each item the context
    # block shows whole enough, and the characters of the tool's text content
    shown: tuple[frozenset[str], ...] | None = None
    text_chars: int = 0


@dataclass
class QuestionResult:
    case: str
    question: EvalQuestion
    answers: dict[str, Answer]
    diagnosis: dict[str, Any] | None = None


@dataclass
class WriteCheckResult:
    id: str
    expect: str
    got: str
    passed: bool
    detail: str


@dataclass
class UpdateResult:
    """One write of a knowledge-update case: what it should answer and what it did."""

    key: str
    expect: str | None
    got: str
    supersedes: str | None  # expected, by key
    superseded: str | None  # what the write superseded, by key (None: nothing)
    lookalike_of: str | None
    detail: str


@dataclass
class CaseResult:
    id: str
    memories: int
    stored: int
    ingest_s: float
    questions: list[QuestionResult] = field(default_factory=list)
    skipped: list[EvalQuestion] = field(default_factory=list)
    writes: list[WriteCheckResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    updates: list[UpdateResult] = field(default_factory=list)


@dataclass
class EvalRun:
    dataset: Dataset
    options: RunOptions
    cases: list[CaseResult]
    dedup_threshold: float  # near-duplicate similarity, for duplicate rates
