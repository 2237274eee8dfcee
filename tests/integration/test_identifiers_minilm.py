"""Identifiers are facts, with the real all-MiniLM-L6-v2 model reading meaning (as the write
path does wherever the semantic model runs): a memory with one identifier changed is
`added`, never skipped as a restatement nor superseding the first, and both memories are in
the context block. The model took "bob77" for "bob78", "k8s-worker-12" for "k8s-worker-21".
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_orchestrator.backends.embedded import EmbeddedBackend
from memory_orchestrator.derived.embedders import MiniLMEmbedder
from memory_orchestrator.models import (
    ContextRequest,
    NewMemory,
    WriteAction,
    WriteReport,
    WriteRequest,
)
from memory_orchestrator.pipeline.paraphrase import Meaning
from memory_orchestrator.pipeline.writer import WritePolicy, write_memory
from memory_orchestrator.service import Orchestrator
from memory_orchestrator.settings import Settings
from memory_orchestrator.state.traces import TraceStore
from tests.factories import NOW
from tests.integration.test_write_meaning_minilm import minilm
from tests.long_notes import long_note
from tests.property.support import PROPS

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def model(minilm_dir: Path) -> MiniLMEmbedder:
    return MiniLMEmbedder(minilm_dir)


# What the memory is about, named by an identifier before its verb, and what it says of it.
THINGS = (
    "Host",
    "User",
    "Ticket",
    "Room",
    "Build",
    "The key",
    "Bucket",
    "Printer",
    "Branch",
    "Account",
    "Server",
    "Pipeline",
)
SAID = (
    "has admin rights on the wiki.",
    "runs out of disk every night.",
    "is blocked by the vendor.",
    "needs a new battery.",
    "was shipped to the wrong address.",
    "expires in March.",
    "is stuck in review.",
    "belongs to the design team.",
)
_LOWER = "abcdefghijklmnopqrstuvwxyz"
_DIGITS = "0123456789"


@st.composite
def identifiers(draw: st.DrawFn) -> str:
    """A code as agents write them: letters and digits in parts joined by - _ . / @ :,
    always with a digit or a mark (a host, a user, a ticket, a key path, an address)."""
    part = st.text(_LOWER + _DIGITS, min_size=1, max_size=6)
    head = draw(st.text(_LOWER, min_size=1, max_size=5))
    parts = draw(st.lists(part, min_size=0, max_size=3))
    marks = draw(st.lists(st.sampled_from("-_./@:"), min_size=len(parts), max_size=len(parts)))
    code = head + "".join(m + p for m, p in zip(marks, parts, strict=True))
    if not any(c.isdigit() or c in "-_./@:" for c in code):
        code += draw(st.text(_DIGITS, min_size=1, max_size=3))
    return code


@st.composite
def changed(draw: st.DrawFn) -> tuple[str, str]:
    """An identifier and the same with one letter or digit changed."""
    code = draw(identifiers())
    spots = [i for i, c in enumerate(code) if c.isalnum()]
    at = draw(st.sampled_from(spots))
    pool = _DIGITS if code[at].isdigit() else _LOWER
    other = draw(st.sampled_from([c for c in pool if c != code[at]]))
    return code, code[:at] + other + code[at + 1 :]


@PROPS
@given(pair=changed(), thing=st.sampled_from(THINGS), said=st.sampled_from(SAID))
def test_a_memory_with_one_identifier_changed_is_added(
    model: MiniLMEmbedder, pair: tuple[str, str], thing: str, said: str
) -> None:
    first, then = (f"{thing} {code} {said}" for code in pair)
    policy = WritePolicy(
        threshold=0.85,
        on_duplicate="skip",
        link_related=0,
        timeout_s=30,
        meaning=Meaning(lambda: model),
    )

    async def main() -> tuple[WriteAction, WriteAction, str | None, str]:
        with tempfile.TemporaryDirectory() as folder:
            store = EmbeddedBackend(Path(folder) / "memories.db")
            try:
                a = await write_memory(store, NewMemory(content=first), policy)
                b = await write_memory(store, NewMemory(content=then), policy)
            finally:
                await store.close()
        return a.action, b.action, b.supersedes, b.reason

    one, two, supersedes, reason = anyio.run(main)
    assert (one, two, supersedes) == (WriteAction.ADDED, WriteAction.ADDED, None), reason


# ---------------------------------------------------------------- examples, write and read

PAIRS = [  # (kind, first, then, question): each failed before (skipped, or one shown)
    (
        "user",
        "User bob77 has admin rights on the wiki.",
        "User bob78 has admin rights on the wiki.",
        "who has admin rights on the wiki",
    ),
    (
        "user",
        "User mkumar has write access to the billing repo.",
        "User mkumaar has write access to the billing repo.",
        "who has write access to the billing repo",
    ),
    (
        "user",
        "User alice_w can approve invoices.",
        "User alice_v can approve invoices.",
        "who can approve invoices",
    ),
    (
        "host",
        "The node k8s-worker-12 was cordoned for maintenance.",
        "The node k8s-worker-21 was cordoned for maintenance.",
        "which nodes were cordoned for maintenance",
    ),
    (
        "host",
        "Service account svc-backup-01 has no password expiry.",
        "Service account svc-backup-02 has no password expiry.",
        "which service accounts have no password expiry",
    ),
    (
        "path",
        "File ~/.ssh/id_rsa is shared with the build agent.",
        "File ~/.ssh/id_dsa is shared with the build agent.",
        "which files are shared with the build agent",
    ),
    (
        "path",
        "The key /etc/ssl/private/web.key expires in March.",
        "The key /etc/ssl/private/api.key expires in March.",
        "which keys expire in March",
    ),
    (
        "code",
        "Pipeline deploy-web-17 is stuck in review.",
        "Pipeline deploy-web-19 is stuck in review.",
        "which pipelines are stuck in review",
    ),
    (
        "code",
        "Printer P-12 on the second floor is out of toner.",
        "Printer P-19 on the second floor is out of toner.",
        "which printers are out of toner",
    ),
    (
        "room",
        "Parking spot 41 belongs to the design team.",
        "Parking spot 42 belongs to the design team.",
        "which parking spots belong to the design team",
    ),
    (
        "room",
        "Room B-204 is booked for the onboarding workshop.",
        "Room B-206 is booked for the onboarding workshop.",
        "which rooms are booked for the onboarding workshop",
    ),
    (
        "ticket",
        "Pull request 907 breaks the nightly build.",
        "Pull request 915 breaks the nightly build.",
        "which pull requests break the nightly build",
    ),
    (
        "ticket",
        "Ticket JIRA-4521 is blocked by the vendor.",
        "Ticket JIRA-4528 is blocked by the vendor.",
        "which tickets are blocked by the vendor",
    ),
    (
        "place",
        "Train line S3 is delayed this morning.",
        "Train line S8 is delayed this morning.",
        "which train lines are delayed this morning",
    ),
]


@pytest.fixture
def orch(settings: Settings, minilm_dir: Path) -> Iterator[Orchestrator]:
    tuned = minilm(settings, minilm_dir)
    o = Orchestrator(
        EmbeddedBackend(tuned.embedded_path()),
        tuned,
        traces=TraceStore(tuned.trace_path()),
        clock=lambda: NOW,
    )
    yield o
    anyio.run(o.close)


def write(orch: Orchestrator, content: str) -> WriteReport:
    request = WriteRequest(memory=NewMemory(content=content, created_at=NOW))
    return anyio.run(lambda: orch.write(request))


@pytest.mark.parametrize(
    ("first", "then", "question"),
    [p[1:] for p in PAIRS],
    ids=[f"{p[0]}-{n}" for n, p in enumerate(PAIRS)],
)
def test_two_facts_that_differ_in_an_identifier_are_written_and_shown(
    orch: Orchestrator, first: str, then: str, question: str
) -> None:
    a, b = write(orch, first), write(orch, then)
    assert (a.action, b.action, b.supersedes) == (WriteAction.ADDED, WriteAction.ADDED, None)
    package = anyio.run(lambda: orch.context(ContextRequest(query=question)))
    shown = [i.memory_id for i in package.items]
    assert {a.id, b.id} <= set(shown), package.context_block
    for text in (first, then):
        assert text.rstrip(".") in package.context_block


def test_a_correction_of_an_identifier_value_is_not_lost_as_a_restatement(
    orch: Orchestrator,
) -> None:
    """The model read "pg-main-01 ~ pg-main-02" and skipped the correction."""
    first = write(orch, "The primary database runs on host pg-main-01.")
    fixed = write(orch, "The primary database runs on host pg-main-02.")
    assert (fixed.action, fixed.supersedes) == (WriteAction.UPDATED, first.id)
    package = anyio.run(lambda: orch.context(ContextRequest(query="primary database host")))
    assert "pg-main-02" in package.context_block
    assert "pg-main-01" not in package.context_block


def test_a_long_note_whose_identifier_at_7900_changes_is_kept(orch: Orchestrator) -> None:
    """Both texts are compared whole: a code that differs at the end of two notes of 7,900
    characters makes two facts (the model read "db-stage-05 ~ db-stage-06" in them)."""
    body = long_note(2, 0, size=7885)
    first = write(orch, f"{body} Host db-stage-05")
    then = write(orch, f"{body} Host db-stage-06")
    assert f"{body} Host db-stage-06".index("06") >= 7890
    assert (first.action, then.action, then.supersedes) == (
        WriteAction.ADDED,
        WriteAction.ADDED,
        None,
    ), then.reason
