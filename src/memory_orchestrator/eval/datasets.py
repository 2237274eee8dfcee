"""Evaluation datasets: the records every loader produces, and the LoCoMo loader.

A dataset is a list of *cases*. Each case is evaluated on its own fresh store: its memories
are ingested, its questions asked, then its write checks run. Every memory has a *key* (a
LoCoMo `dia_id`, or the id a hand-made set gives it) which travels with the memory into the
store twice, in `metadata[key_field]` and as the tag `{tag_prefix}{key}`, so that whatever
the store returns maps back to the dataset, even from a store that keeps tags but no metadata.

LoCoMo (`../shared/reference/eval-protocol.md`):
- one case per conversation; every turn with text becomes one episodic memory whose content is
  `"{speaker}: {text}"` plus `" [shared a photo: {blip_caption}]"` when the turn has one, whose
  entity is the speaker, and whose time is its session's `session_N_date_time` ("1:56 pm on
  8 May, 2023", read as UTC) plus one second per earlier turn of the session, so turn order
  is kept; date keys of sessions without turns are ignored;
- every QA item is a question (its text alone). Categories 1-4 (multi-hop, temporal,
  open-domain, single-hop) make the headline; category 5 (adversarial) is reported apart;
- evidence ids are read leniently: split on ';' (and ',' or spaces), stray characters
  tolerated ("D:11:26" is D11:26, "D30:05" is D30:5); ids that name no turn are dropped, and a
  question left with no evidence is skipped and counted;
- "now" (`as_of`) is the time of the conversation's last turn: the date of its last session.

The hand-made JSONL format lives in `memory_orchestrator.eval.jsonl`; `load_dataset` picks
the loader by name or file suffix.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

from memory_orchestrator.errors import DatasetError
from memory_orchestrator.eval.cases import (
    Dataset,
    EvalCase,
    EvalMemory,
    EvalQuestion,
    WriteCheck,
    memory_keys,
)
from memory_orchestrator.eval.jsonl import load_jsonl, parse_jsonl
from memory_orchestrator.transfer.sources.transcripts import (
    DIA_FIELD,
    DIA_TAG,
    locomo_turn,
    session_time,
    sessions_of,
    turn_ids,
)

__all__ = [
    "GOLDEN",
    "LOCOMO_CATEGORIES",
    "Dataset",
    "DatasetError",
    "EvalCase",
    "EvalMemory",
    "EvalQuestion",
    "WriteCheck",
    "load_dataset",
    "load_locomo",
    "memory_keys",
    "normalize_evidence",
    "parse_session_time",
]

GOLDEN = "golden"
AGENT_FACTS = "agent-facts"
KNOWLEDGE_UPDATES = "knowledge-updates"
# Sets shipped in the package, by name: the golden set (one question per use case of the
# brief), agent-style facts (short memories, paraphrased questions) and knowledge updates
# (corrections, restatements and look-alikes written through memory_write; built by
# scripts/make_knowledge_updates.py).
SHIPPED = {
    GOLDEN: "golden.jsonl",
    AGENT_FACTS: "agent_facts.jsonl",
    KNOWLEDGE_UPDATES: "knowledge_updates.jsonl",
    "knowledge-updates-heldout": "knowledge_updates_heldout.jsonl",  # never tuned on
    "knowledge-updates-heldout-b": "knowledge_updates_heldout_b.jsonl",  # written after A
    "knowledge-updates-heldout-c": "knowledge_updates_heldout_c.jsonl",  # six new domains
    # facts that differ in one identifier, beside restatements and corrections
    # (scripts/make_identifier_pairs.py)
    "identifier-pairs": "identifier_pairs.jsonl",
}
LOCOMO_CATEGORIES: dict[str, str] = {
    "1": "multi-hop",
    "2": "temporal",
    "3": "open-domain",
    "4": "single-hop",
    "5": "adversarial",
}
_LOCOMO_HEADLINE = ("1", "2", "3", "4")
_LOCOMO_APART = {"5": "adversarial"}


# ---------------------------------------------------------------- dispatch


def load_dataset(source: str | Path) -> Dataset:
    """A shipped set by name (`"golden"`, `"agent-facts"`, `"knowledge-updates"`), a `.jsonl`
    file, or a LoCoMo `.json` file."""
    if str(source) in SHIPPED:
        name = str(source)
        text = resources.files("memory_orchestrator.eval").joinpath(SHIPPED[name])
        return parse_jsonl(text.read_text(encoding="utf-8"), name=name)
    path = Path(source)
    if not path.is_file():
        raise DatasetError(f"dataset not found: {path}")
    if path.suffix.lower() == ".jsonl":
        return load_jsonl(path)
    return load_locomo(path)


# ---------------------------------------------------------------- LoCoMo


def parse_session_time(value: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" as a UTC datetime."""
    try:
        return session_time(value)
    except ValueError as exc:
        raise DatasetError(str(exc)) from None


def normalize_evidence(raw: Sequence[object]) -> list[str]:
    """Evidence ids in canonical form ("D3:14"), in order, without repeats (`turn_ids`)."""
    return turn_ids(raw)


def load_locomo(path: Path) -> Dataset:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path}: not a readable JSON file: {exc}") from exc
    if not isinstance(data, list) or not all(isinstance(c, dict) for c in data):
        raise DatasetError(f"{path}: expected a JSON list of LoCoMo conversations")
    cases = tuple(_locomo_case(conv, index, path) for index, conv in enumerate(data, start=1))
    return Dataset(
        name=path.name,
        cases=cases,
        key_field=DIA_FIELD,
        tag_prefix=DIA_TAG,
        headline_categories=_LOCOMO_HEADLINE,
        apart_categories=_LOCOMO_APART,
        category_names=LOCOMO_CATEGORIES,
    )


def _locomo_case(conv: dict[str, Any], index: int, path: Path) -> EvalCase:
    case_id = str(conv.get("sample_id") or f"conversation-{index}")
    sessions = conv.get("conversation")
    if not isinstance(sessions, dict):
        raise DatasetError(f"{path}: {case_id} has no 'conversation' object")
    memories = _locomo_memories(case_id, sessions)
    if not memories:
        raise DatasetError(f"{path}: {case_id} has no turns with text")
    turns = {m.key for m in memories}
    as_of = max(m.memory.created_at for m in memories if m.memory.created_at)
    questions = tuple(
        _locomo_question(case_id, number, item, turns)
        for number, item in enumerate(conv.get("qa") or [], start=1)
        if isinstance(item, dict)
    )
    return EvalCase(id=case_id, memories=memories, questions=questions, as_of=as_of)


def _locomo_memories(case_id: str, sessions: dict[str, Any]) -> tuple[EvalMemory, ...]:
    memories: list[EvalMemory] = []
    for number in sessions_of(sessions):
        stamp = sessions.get(f"session_{number}_date_time")
        if not isinstance(stamp, str):
            raise DatasetError(f"{case_id}: session {number} has turns but no date")
        start = parse_session_time(stamp)
        for offset, turn in enumerate(sessions[f"session_{number}"]):
            made = locomo_turn(turn, start + timedelta(seconds=offset))
            if made is not None:
                memories.append(EvalMemory(key=made[0], memory=made[1]))
    return tuple(memories)


def _locomo_question(
    case_id: str, number: int, item: dict[str, Any], turns: set[str]
) -> EvalQuestion:
    raw = item.get("evidence") or []
    cited = normalize_evidence(raw if isinstance(raw, list) else [raw])
    evidence = tuple(e for e in cited if e in turns)
    reason = None
    if not evidence:
        reason = f"no evidence id names a turn (given: {raw!r})"
    return EvalQuestion(
        id=f"{case_id}#q{number}",
        text=str(item.get("question") or "").strip(),
        evidence=evidence,
        category=str(item.get("category", "")),
        skip_reason=reason if str(item.get("question") or "").strip() else "no question text",
    )
