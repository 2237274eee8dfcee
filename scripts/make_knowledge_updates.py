r"""Build the shipped knowledge-update sets: `src/memory_orchestrator/eval/knowledge_updates.jsonl`,
`knowledge_updates_heldout.jsonl` and `knowledge_updates_heldout_b.jsonl`.

Write sequences as agents leave them in a memory store over weeks: a fact, then its
correction (a number, a date or time, a person, a place, a negation, an opposite, a chain of
several values, a reversal back to an old value, an update in other words), a restatement
that must be skipped, look-alikes about another subject that must be left alone, and new
facts of the same shape. Every sequence is written through `memory_write`, in time order
across the case, and asked about its current value.

Two parts. The first six cases (platform team ... support desk) come from the templates
below, one filler set per case. The *hard* cases, one per domain (software, team, travel,
health, money), come from the facts of `knowledge_update_facts.py`: each fact gives a
one-word correction (`swap-branch`, `swap-city`, `swap-owner`, `swap-tool`, ...), a
negation ("no longer", "not", "never", "stopped", sometimes with another verb), a reversal
(an antonym), restatements (`restated-reordered`, `restated-passive`, `restated-synonym`)
and two look-alikes (`lookalike-other`: another subject with another value;
`lookalike-same`: another subject, the same value), each on a subject of its own, so that
every sequence of a fact is also a look-alike of the others. The held-out facts
(`knowledge_update_heldout.py`: other sentences, other words, never tuned on) are built the
same way into their own file, and so are the second batch of held-out facts
(`knowledge_update_heldout_b.py`), written once every rule was fixed.

The sentences and the fillers are written by hand; this script only combines them, dates the
writes, and interleaves the sequences. Deterministic: the same files every run.

    .venv/bin/python scripts/make_knowledge_updates.py   # rewrites both .jsonl, prints counts
    .venv/bin/orchestrator eval --dataset knowledge-updates --backend embedded
    .venv/bin/orchestrator eval --dataset knowledge-updates-heldout --backend embedded
    .venv/bin/orchestrator eval --dataset knowledge-updates-heldout-b --backend embedded
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import knowledge_update_facts
import knowledge_update_heldout
import knowledge_update_heldout_b
import knowledge_update_heldout_c
from knowledge_update_facts import Domain, Fact

EVAL = Path(__file__).resolve().parents[1] / "src" / "memory_orchestrator" / "eval"
OUT = EVAL / "knowledge_updates.jsonl"
HELDOUT = EVAL / "knowledge_updates_heldout.jsonl"
HELDOUT_B = EVAL / "knowledge_updates_heldout_b.jsonl"
HELDOUT_C = EVAL / "knowledge_updates_heldout_c.jsonl"
START = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)


@dataclass
class Step:
    content: str
    expect: str  # added / updated / skipped
    supersedes: int | None = None  # index of the step it corrects
    lookalike_of: int | None = None  # index of the step it resembles


@dataclass
class Sequence:
    kind: str
    steps: list[Step]
    questions: list[tuple[str, list[int], list[int]]]  # query, relevant steps, stale steps


@dataclass
class Case:
    name: str
    description: str
    fill: dict[str, list[str]]
    sequences: list[Sequence] = field(default_factory=list)


# ---------------------------------------------------------------- fillers, one set per case

CASES = [
    Case(
        "platform-team",
        "a platform team's coding agent: services, limits, deploys, on-call",
        {
            "svc": ["billing", "search", "ingest", "notifications"],
            "Svc": ["Atlas", "Hermes", "Orion", "Vega"],
            "person": ["Dana", "Marco", "Priya", "Lena", "Tomas", "Aiko"],
            "city": ["Lisbon", "Berlin", "Porto", "Warsaw"],
            "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"],
            "flag": ["new-checkout", "async-export", "dark-mode", "bulk-import"],
            "meeting": ["architecture review", "capacity planning", "incident retro"],
            "feature": ["gzip responses", "HTTP/2", "webhooks", "idempotency keys"],
        },
    ),
    Case(
        "billing-ops",
        "a finance operations agent: invoices, prices, vendors, approvals",
        {
            "svc": ["invoicing", "payments", "refunds", "ledger"],
            "Svc": ["Stripe", "Chargebee", "Adyen", "Xero"],
            "person": ["Helen", "Omar", "Sofia", "Jonas", "Mei", "Ravi"],
            "city": ["Dublin", "Amsterdam", "Madrid", "Prague"],
            "day": ["Tuesday", "Thursday", "Friday", "Monday", "Wednesday"],
            "flag": ["auto-dunning", "multi-currency", "tax-preview", "instant-payouts"],
            "meeting": ["budget review", "vendor call", "month-end close"],
            "feature": ["partial refunds", "SEPA debits", "credit notes", "usage billing"],
        },
    ),
    Case(
        "mobile-team",
        "a mobile team's assistant: releases, devices, crash rates, owners",
        {
            "svc": ["sync", "login", "upload", "push"],
            "Svc": ["Falcon", "Kestrel", "Osprey", "Heron"],
            "person": ["Nina", "Kofi", "Elena", "Sam", "Yuki", "Pablo"],
            "city": ["Munich", "Vienna", "Zurich", "Milan"],
            "day": ["Wednesday", "Friday", "Monday", "Thursday", "Tuesday"],
            "flag": ["offline-mode", "new-onboarding", "biometric-login", "photo-backup"],
            "meeting": ["release sign-off", "design critique", "QA triage"],
            "feature": ["background sync", "deep links", "widgets", "split view"],
        },
    ),
    Case(
        "personal-assistant",
        "a personal assistant agent: travel, appointments, preferences, family",
        {
            "svc": ["gym", "school", "dentist", "library"],
            "Svc": ["Bellevue", "Riverside", "Oakwood", "Lakeview"],
            "person": ["Anna", "Ben", "Clara", "David", "Emma", "Felix"],
            "city": ["Paris", "Rome", "Vienna", "Copenhagen"],
            "day": ["Saturday", "Sunday", "Friday", "Tuesday", "Thursday"],
            "flag": ["vegetarian-menu", "window-seat", "quiet-hours", "auto-reorder"],
            "meeting": ["parent-teacher meeting", "dentist appointment", "car service"],
            "feature": ["online booking", "late checkout", "free parking", "pet stays"],
        },
    ),
    Case(
        "research-lab",
        "a research lab's agent: experiments, datasets, GPUs, deadlines",
        {
            "svc": ["training", "eval", "labeling", "inference"],
            "Svc": ["Phoenix", "Titan", "Nimbus", "Aurora"],
            "person": ["Ingrid", "Hamza", "Lucia", "Viktor", "Maya", "Chen"],
            "city": ["Toronto", "Montreal", "Edinburgh", "Zurich"],
            "day": ["Monday", "Thursday", "Tuesday", "Friday", "Wednesday"],
            "flag": ["mixed-precision", "gradient-checkpointing", "early-stopping", "data-dedup"],
            "meeting": ["paper reading group", "compute allocation review", "lab meeting"],
            "feature": ["multi-node jobs", "preemptible GPUs", "spot instances", "shared scratch"],
        },
    ),
    Case(
        "support-desk",
        "a customer support agent: SLAs, escalations, customers, policies",
        {
            "svc": ["chat", "email", "phone", "enterprise"],
            "Svc": ["Acme", "Globex", "Initech", "Umbrella"],
            "person": ["Grace", "Leo", "Rosa", "Ivan", "Zara", "Noah"],
            "city": ["Austin", "Denver", "Seattle", "Boston"],
            "day": ["Thursday", "Monday", "Friday", "Wednesday", "Tuesday"],
            "flag": ["auto-triage", "sentiment-routing", "weekend-coverage", "csat-survey"],
            "meeting": ["escalation review", "quarterly business review", "training session"],
            "feature": ["live chat", "callback requests", "ticket merging", "SLA pausing"],
        },
    ),
]


# ---------------------------------------------------------------- templates, by kind of change


def seq(kind: str, steps: list[Step], *questions: tuple[str, list[int], list[int]]) -> Sequence:
    return Sequence(kind, steps, list(questions))


def number(f: Callable[[str, int], str], i: int) -> Iterator[Sequence]:
    svc, Svc = f("svc", i), f("Svc", i)
    a, b = (100, 250, 500, 1000)[i % 4], (500, 1000, 200, 1500)[i % 4]
    text = "The API rate limit for the {} service is {} requests per minute."
    yield seq(
        "number",
        [Step(text.format(svc, a), "added"), Step(text.format(svc, b), "updated", 0)],
        (f"What is the rate limit of the {svc} API?", [1], [0]),
    )
    budget = "The {} project's cloud budget is capped at {} dollars a month."
    x, y = (4000, 6500, 12000, 3000)[i % 4], (5500, 8000, 9000, 4500)[i % 4]
    yield seq(
        "number",
        [Step(budget.format(Svc, x), "added"), Step(budget.format(Svc, y), "updated", 0)],
        (f"How much can {Svc} spend on cloud each month?", [1], [0]),
    )
    keep = "Logs of the {} service are kept for {} days before deletion."
    d1, d2 = (30, 14, 90, 7)[i % 4], (90, 30, 60, 21)[i % 4]
    yield seq(
        "number",
        [Step(keep.format(svc, d1), "added"), Step(keep.format(svc, d2), "updated", 0)],
        (f"How long are {svc} logs retained?", [1], [0]),
    )


def chain(f: Callable[[str, int], str], i: int) -> Iterator[Sequence]:
    Svc = f("Svc", i + 1)
    text = "{} runs {} replicas in the production cluster."
    v = ((3, 5, 8), (2, 4, 6), (6, 4, 10), (4, 8, 12))[i % 4]
    yield seq(
        "chain",
        [
            Step(text.format(Svc, v[0]), "added"),
            Step(text.format(Svc, v[1]), "updated", 0),
            Step(text.format(Svc, v[2]), "updated", 1),
        ],
        (f"How many replicas does {Svc} run in production?", [2], [0, 1]),
    )


def dates(f: Callable[[str, int], str], i: int) -> Iterator[Sequence]:
    who, meeting = f("person", i), f("meeting", i)
    d1, d2 = f("day", i), f("day", i + 2)
    text = "{} moved the {} to {}."
    yield seq(
        "date",
        [
            Step(text.format(who, meeting, d1), "added"),
            Step(text.format(who, meeting, d2), "updated", 0),
        ],
        (f"When is the {meeting} now?", [1], [0]),
    )
    Svc = f("Svc", i + 2)
    months = (
        ("March 14", "April 2"),
        ("May 3", "May 24"),
        ("June 9", "July 1"),
        ("October 5", "November 16"),
    )
    m1, m2 = months[i % 4]
    launch = "The {} launch is scheduled for {}."
    yield seq(
        "date",
        [Step(launch.format(Svc, m1), "added"), Step(launch.format(Svc, m2), "updated", 0)],
        (f"When does {Svc} launch?", [1], [0]),
    )
    svc = f("svc", i + 1)
    times = (("9:30", "10:15"), ("8am", "9am"), ("2pm", "4pm"), ("11:00", "11:30"))
    t1, t2 = times[i % 4]
    standup = "The {} team's daily standup starts at {}."
    yield seq(
        "time",
        [Step(standup.format(svc, t1), "added"), Step(standup.format(svc, t2), "updated", 0)],
        (f"What time is the {svc} team's standup?", [1], [0]),
    )


def people(f: Callable[[str, int], str], i: int) -> Iterator[Sequence]:
    p1, p2, svc = f("person", i + 1), f("person", i + 3), f("svc", i + 2)
    text = "{} is the primary on-call engineer for the {} service."
    yield seq(
        "person",
        [Step(text.format(p1, svc), "added"), Step(text.format(p2, svc), "updated", 0)],
        (f"Who is on call for {svc}?", [1], [0]),
    )


def places(f: Callable[[str, int], str], i: int) -> Iterator[Sequence]:
    c1, c2, meeting = f("city", i), f("city", i + 1), f("meeting", i + 1)
    text = "The next {} will take place in {}."
    yield seq(
        "place",
        [Step(text.format(meeting, c1), "added"), Step(text.format(meeting, c2), "updated", 0)],
        (f"Where is the next {meeting}?", [1], [0]),
    )


def negations(f: Callable[[str, int], str], i: int) -> Iterator[Sequence]:
    who, meeting, day = f("person", i + 2), f("meeting", i + 2), f("day", i + 1)
    yield seq(
        "negation",
        [
            Step(f"{who} will attend the {meeting} on {day}.", "added"),
            Step(f"{who} will not attend the {meeting} on {day}.", "updated", 0),
        ],
        (f"Is {who} coming to the {meeting}?", [1], [0]),
    )
    Svc, feature = f("Svc", i + 3), f("feature", i)
    yield seq(
        "negation",
        [
            Step(f"The {Svc} integration does not support {feature} yet.", "added"),
            Step(f"The {Svc} integration now supports {feature}.", "updated", 0),
        ],
        (f"Does {Svc} support {feature}?", [1], [0]),
    )


def opposites(f: Callable[[str, int], str], i: int) -> Iterator[Sequence]:
    flag = f("flag", i)
    on = f"The {flag} feature flag is enabled in production."
    off = f"The {flag} feature flag is disabled in production."
    yield seq(
        "reversal",
        [Step(on, "added"), Step(off, "updated", 0), Step(on, "updated", 1)],
        (f"Is {flag} turned on in production?", [2], [0, 1]),
    )
    Svc = f("Svc", i + 1)
    yield seq(
        "opposite",
        [
            Step(f"The security team approved the {Svc} data export request.", "added"),
            Step(f"The security team rejected the {Svc} data export request.", "updated", 0),
        ],
        (f"What did security decide about the {Svc} data export?", [1], [0]),
    )


def reworded(f: Callable[[str, int], str], i: int) -> Iterator[Sequence]:
    svc = f("svc", i + 3)
    a, b = (30, 60, 45, 20)[i % 4], (60, 90, 30, 40)[i % 4]
    yield seq(
        "reworded-update",
        [
            Step(f"Requests to the {svc} API time out after {a} seconds.", "added"),
            Step(f"Requests to the {svc} API now time out after {b} seconds.", "updated", 0),
        ],
        (f"What is the {svc} API timeout?", [1], [0]),
    )


def restatements(f: Callable[[str, int], str], i: int) -> Iterator[Sequence]:
    who, Svc = f("person", i + 4), f("Svc", i)
    yield seq(
        "restatement",
        [
            Step(f"{who} is the product manager for {Svc}.", "added"),
            Step(f"The product manager for {Svc} is {who}.", "skipped"),
        ],
        (f"Who is the product manager of {Svc}?", [0], []),
    )
    svc, day = f("svc", i), f("day", i + 3)
    yield seq(
        "restatement",
        [
            Step(f"Deploys of the {svc} service are frozen every {day} after 3pm.", "added"),
            Step(f"Every {day} after 3pm, deploys of the {svc} service are frozen.", "skipped"),
        ],
        (f"When are {svc} deploys frozen?", [0], []),
    )


def lookalikes(f: Callable[[str, int], str], i: int) -> Iterator[Sequence]:
    svc = f("svc", i + 1)
    n1, n2 = (7, 14, 30, 3)[i % 4], (30, 90, 7, 14)[i % 4]
    text = "Backups of the {} {} database are kept for {} days."
    yield seq(
        "lookalike",
        [
            Step(text.format("staging", svc, n1), "added"),
            Step(text.format("production", svc, n2), "added", lookalike_of=0),
        ],
        (f"How long are production {svc} database backups kept?", [1], []),
        (f"How long are staging {svc} database backups kept?", [0], []),
    )
    p1, p2, city = f("person", i), f("person", i + 5), f("city", i + 2)
    d1, d2 = f("day", i), f("day", i + 1)
    yield seq(
        "lookalike",
        [
            Step(f"{p1}'s flight to {city} leaves on {d1} morning.", "added"),
            Step(f"{p2}'s flight to {city} leaves on {d2} morning.", "added", lookalike_of=0),
        ],
        (f"When does {p2} fly to {city}?", [1], []),
    )
    s1, s2 = f("svc", 2 * i), f("svc", 2 * i + 1)
    limit = "The {} queue accepts messages of up to {} kilobytes."
    k1, k2 = (256, 512, 64, 128)[i % 4], (1024, 128, 256, 32)[i % 4]
    yield seq(
        "lookalike",
        [
            Step(limit.format(s1, k1), "added"),
            Step(limit.format(s2, k2), "added", lookalike_of=0),
        ],
        (f"What is the message size limit of the {s2} queue?", [1], []),
    )


def new_facts(f: Callable[[str, int], str], i: int) -> Iterator[Sequence]:
    who, Svc = f("person", i + 1), f("Svc", i + 2)
    yield seq(
        "new-fact",
        [Step(f"{who} prefers written status updates over meetings for {Svc}.", "added")],
        (f"How does {who} like to get {Svc} updates?", [0], []),
    )


FAMILIES = (number, chain, dates, people, places, negations, opposites, reworded)
KEEP = (restatements, lookalikes, new_facts)


# ---------------------------------------------------------------- the hard cases, from facts

_RESTATED = ("reordered", "passive", "synonym")


def _said(form: str, subject: str, value: str) -> str:
    text = form.format(s=subject, v=value)
    return text[:1].upper() + text[1:]


def fact_sequences(fact: Fact, with_verbs: bool = True) -> Iterator[Sequence]:
    """Every kind of write `fact` gives, each on a subject of its own (see the docstring)."""
    subjects = iter(fact.subjects)
    first, fixed, other = fact.values

    def ask(subject: str) -> str:
        return _said(fact.question, subject, first)

    s = next(subjects)
    kind = "reversal" if fact.swap == "state" else f"swap-{fact.swap}"
    yield seq(
        kind,
        [Step(_said(fact.text, s, first), "added"), Step(_said(fact.text, s, fixed), "updated", 0)],
        (ask(s), [1], [0]),
    )
    for name, kind in (("negated", "negation"), ("reversed", "reversal")):
        if name in fact.forms:
            s = next(subjects)
            steps = [
                Step(_said(fact.text, s, first), "added"),
                Step(_said(fact.forms[name], s, first), "updated", 0),
            ]
            yield seq(kind, steps, (ask(s), [1], [0]))
    for name in _RESTATED:
        if name in fact.forms:
            s = next(subjects)
            steps = [
                Step(_said(fact.text, s, first), "added"),
                Step(_said(fact.forms[name], s, first), "skipped"),
            ]
            yield seq(f"restated-{name}", steps, (ask(s), [0], []))
    for kind, value in (("lookalike-other", other), ("lookalike-same", first)):
        s, s2 = next(subjects), next(subjects)
        steps = [
            Step(_said(fact.text, s, first), "added"),
            Step(_said(fact.text, s2, value), "added", lookalike_of=0),
        ]
        yield seq(kind, steps, (ask(s2), [1], []), (ask(s), [0], []))
    if with_verbs and "otherverb" in fact.forms:
        yield other_verb(fact, next(subjects))


def other_verb(fact: Fact, subject: str) -> Sequence:
    """The same memory with another verb: another fact, added beside the first."""
    first = fact.values[0]
    steps = [
        Step(_said(fact.text, subject, first), "added"),
        Step(_said(fact.forms["otherverb"], subject, first), "added", lookalike_of=0),
    ]
    return seq("lookalike-verb", steps, (_said(fact.question, subject, first), [0], []))


def domain_case(domain: Domain, part: str, with_verbs: bool = True) -> Case:
    case = Case(f"{part}-{domain.name}", domain.description, {})
    for fact in domain.facts:
        case.sequences.extend(fact_sequences(fact, with_verbs))
    return case


def verbs_case(domains: tuple[Domain, ...], part: str) -> Case:
    """Every fact's `otherverb` form, each on the fact's first subject, in a case of its own
    (so that the sequences of the other cases stay as they were)."""
    case = Case(f"{part}-other-verbs", "the same memories with another verb: other facts", {})
    for domain in domains:
        for fact in domain.facts:
            if "otherverb" in fact.forms:
                case.sequences.append(other_verb(fact, fact.subjects[0]))
    return case


# ---------------------------------------------------------------- writing the file


def build(case: Case, rounds: int) -> None:
    def f(slot: str, i: int) -> str:
        values = case.fill[slot]
        return values[i % len(values)]

    for i in range(rounds):
        for family in (*FAMILIES, *KEEP):
            case.sequences.extend(family(f, i))


def records(case: Case) -> Iterator[dict[str, Any]]:
    """The case line, then every write in time order (sequences interleaved), then the
    questions."""
    writes: list[tuple[datetime, str, Step, list[str]]] = []
    questions: list[dict[str, Any]] = []
    for n, sequence in enumerate(case.sequences):
        keys = [f"{sequence.kind}-{n:02d}-{s}" for s in range(len(sequence.steps))]
        first = START + timedelta(days=(n * 7) % 40, minutes=n * 13)
        for s, step in enumerate(sequence.steps):
            when = first + timedelta(days=s * (5 + n % 9), hours=s * 2)
            writes.append((when, keys[s], step, keys))
        for q, (query, relevant, stale) in enumerate(sequence.questions):
            questions.append(
                {
                    "id": f"q-{sequence.kind}-{n:02d}-{q}",
                    "query": query,
                    "relevant": [keys[r] for r in relevant],
                    "stale": [keys[s] for s in stale],
                    "category": sequence.kind,
                }
            )
    writes.sort(key=lambda w: w[0])
    as_of = max(w[0] for w in writes) + timedelta(days=1)
    yield {
        "case": case.name,
        "as_of": as_of.isoformat().replace("+00:00", "Z"),
        "description": case.description,
        "ingest": "write",
    }
    for when, key, step, keys in writes:
        memory: dict[str, Any] = {
            "id": key,
            "content": step.content,
            "created_at": when.isoformat().replace("+00:00", "Z"),
            "expect": step.expect,
        }
        if step.supersedes is not None:
            memory["supersedes"] = keys[step.supersedes]
        if step.lookalike_of is not None:
            memory["lookalike_of"] = keys[step.lookalike_of]
        yield {"memory": memory}
    yield from questions


HEADER = [
    "# Knowledge updates: write sequences as agents leave them (a fact, its correction, a",
    "# restatement, look-alikes about something else), each written through memory_write in",
    "# time order, then questions about the current value. Built by",
    "# scripts/make_knowledge_updates.py from hand-written sentences; do not edit by hand.",
]


def write_set(path: Path, cases: list[Case], note: str) -> None:
    lines = [*HEADER, f"# {note}"]
    counts: dict[str, int] = {}
    for case in cases:
        for sequence in case.sequences:
            counts[sequence.kind] = counts.get(sequence.kind, 0) + 1
        lines.extend(json.dumps(r, ensure_ascii=False) for r in records(case))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    total = sum(counts.values())
    print(f"{path.name}: {total} sequences in {len(cases)} cases: {dict(sorted(counts.items()))}")


def main() -> None:
    for case in CASES:
        build(case, rounds=2)
    dev = knowledge_update_facts.DOMAINS
    hard = [domain_case(d, "hard", with_verbs=False) for d in dev]
    hard.append(verbs_case(dev, "hard"))
    write_set(OUT, [*CASES, *hard], "Development set: the six agent cases, then the hard cases.")
    held = [domain_case(d, "heldout") for d in knowledge_update_heldout.DOMAINS]
    write_set(HELDOUT, held, "Held out: facts never used to build or tune the write path.")
    held = [domain_case(d, "heldout-b") for d in knowledge_update_heldout_b.DOMAINS]
    write_set(HELDOUT_B, held, "Held out, second batch: written after the rules were fixed.")
    held = [domain_case(d, "heldout-c") for d in knowledge_update_heldout_c.DOMAINS]
    write_set(HELDOUT_C, held, "Held out, third batch: six new domains, run once at the end.")


if __name__ == "__main__":
    main()
