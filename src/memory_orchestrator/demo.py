"""The built-in sample: a small, coherent team memory to try the orchestrator on.

The story: a team builds "Project Atlas", an edge gateway for the launch customer Acme Corp.
Vendor X supplies the radio module and its firmware; the firmware is unstable, Vendor X misses
its support SLA, the Infra team escalates a procurement risk, and the March delivery milestone
is declared missed. Around that sit facts (who is who, preferences), procedures (how to deploy
atlas-core, flash firmware, escalate to the vendor), resources (runbooks, dashboards), a few
near-duplicates (to show de-duplication) and some noise (to show it is filtered out).

Dates run from late July to 2026-11-20 (UTC). `SAMPLE` is in time order; `LINKS` holds explicit
relations as (source index, target index, relation, weight) into `SAMPLE`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from memory_orchestrator.models import MemoryType, NewMemory, WriteAction

if TYPE_CHECKING:
    from memory_orchestrator.service import Orchestrator

__all__ = ["DEFAULT_QUERY", "DEFAULT_TASK", "LINKS", "SAMPLE", "load_demo"]

DEFAULT_QUERY = "recent issues with Vendor X"
DEFAULT_TASK = "draft vendor update"

_SOURCE = "demo"

E = MemoryType.EPISODIC
S = MemoryType.SEMANTIC
P = MemoryType.PROCEDURAL
R = MemoryType.RESOURCE


def _at(month: int, day: int, hour: int = 10, minute: int = 0) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=UTC)


def _m(
    when: datetime,
    kind: MemoryType,
    content: str,
    entities: list[str],
    tags: list[str],
    *,
    importance: float | None = None,
) -> NewMemory:
    return NewMemory(
        content=content,
        type=kind,
        entities=entities,
        tags=tags,
        created_at=when,
        source=_SOURCE,
        importance=importance,
    )


# (key, memory), in time order. Keys name memories for LINKS below.
_ENTRIES: tuple[tuple[str, NewMemory], ...] = (
    (
        "atlas_overview",
        _m(
            _at(7, 21, 9),
            S,
            "Project Atlas is the edge gateway platform for Acme Corp's warehouses. The board "
            "uses Vendor X's radio module and firmware; atlas-core is the cloud service the "
            "gateways report to.",
            ["Project Atlas", "Acme Corp", "Vendor X", "atlas-core"],
            ["project", "overview"],
            importance=0.8,
        ),
    ),
    (
        "kickoff",
        _m(
            _at(7, 21, 14),
            E,
            "Project Atlas kickoff with Dana, Priya and Marco. Scope agreed: 200 pilot gateways "
            "for Acme Corp, Vendor X as sole radio supplier.",
            ["Project Atlas", "Dana", "Priya", "Marco", "Acme Corp", "Vendor X"],
            ["meeting", "kickoff"],
            importance=0.6,
        ),
    ),
    (
        "dana_role",
        _m(
            _at(7, 22),
            S,
            "Dana is the project lead for Project Atlas and owns the relationship with Vendor X "
            "and with Acme Corp.",
            ["Dana", "Project Atlas", "Vendor X", "Acme Corp"],
            ["people", "roles"],
            importance=0.7,
        ),
    ),
    (
        "priya_role",
        _m(
            _at(7, 22, 10, 5),
            S,
            "Priya leads firmware integration on Project Atlas and is the technical contact "
            "for Vendor X's firmware team.",
            ["Priya", "Project Atlas", "Vendor X"],
            ["people", "roles", "firmware"],
            importance=0.6,
        ),
    ),
    (
        "marco_role",
        _m(
            _at(7, 22, 10, 10),
            S,
            "Marco is on the Infra team; he runs the atlas-core deployment pipeline and the "
            "hardware procurement tracker.",
            ["Marco", "Infra team", "atlas-core"],
            ["people", "roles", "infra"],
            importance=0.6,
        ),
    ),
    (
        "milestones",
        _m(
            _at(7, 24),
            S,
            "Project Atlas milestones: M1 lab prototypes by mid-September 2026, M2 pilot "
            "firmware freeze in December 2026, and the March delivery milestone: 200 pilot "
            "units shipped to Acme Corp in March 2027.",
            ["Project Atlas", "Acme Corp"],
            ["milestone", "plan"],
            importance=0.9,
        ),
    ),
    (
        "dana_pref",
        _m(
            _at(7, 28),
            S,
            "Dana prefers short written updates over meetings: five bullets at most, risks "
            "first, then asks.",
            ["Dana"],
            ["preference", "communication"],
            importance=0.7,
        ),
    ),
    (
        "vendor_contract",
        _m(
            _at(7, 30),
            S,
            "Vendor X contract terms: P1 firmware bugs must be fixed within 5 business days; "
            "the account manager is Tom Reyes.",
            ["Vendor X", "Tom Reyes"],
            ["contract", "sla"],
            importance=0.8,
        ),
    ),
    (
        "deploy_procedure",
        _m(
            _at(8, 3),
            P,
            "How to deploy atlas-core: 1) merge to main and wait for CI to build the image; "
            "2) run `make release` to tag it; 3) `atlasctl deploy --env staging`; 4) run the "
            "smoke tests; 5) `atlasctl promote --env prod`; 6) watch the error dashboard for "
            "30 minutes.",
            ["atlas-core", "Project Atlas"],
            ["how-to", "deploy"],
            importance=0.7,
        ),
    ),
    (
        "deploy_runbook",
        _m(
            _at(8, 3, 10, 30),
            R,
            "Runbook: atlas-core deployment and rollback - "
            "https://wiki.example.com/atlas/runbooks/deploy",
            ["atlas-core", "Project Atlas"],
            ["runbook", "deploy", "link"],
        ),
    ),
    (
        "fw_21_resets",
        _m(
            _at(8, 5),
            E,
            "Priya: Vendor X firmware 2.1 boots on the Atlas board but the radio module resets "
            "under sustained load.",
            ["Vendor X", "Priya", "Project Atlas"],
            ["firmware", "bug"],
            importance=0.6,
        ),
    ),
    (
        "lunch",
        _m(
            _at(8, 7, 12),
            E,
            "lunch order: two veggie burritos and a pad thai",
            ["Marco"],
            ["chat"],
        ),
    ),
    (
        "flash_procedure",
        _m(
            _at(8, 10),
            P,
            "How to flash Vendor X firmware on an Atlas board: put the board in recovery mode "
            "(hold BOOT, tap RESET), run `vxflash --port /dev/ttyUSB0 firmware.bin`, then "
            "verify the version with `atlasctl radio info`.",
            ["Vendor X", "Project Atlas"],
            ["how-to", "firmware"],
            importance=0.6,
        ),
    ),
    (
        "fw_22_lte",
        _m(
            _at(8, 18),
            E,
            "Vendor X firmware 2.2 still drops the LTE link every few hours in soak tests. "
            "Priya filed ticket VX-1142 with Vendor X as P1.",
            ["Vendor X", "Priya", "VX-1142"],
            ["firmware", "bug", "soak"],
            importance=0.7,
        ),
    ),
    (
        "soak_procedure",
        _m(
            _at(8, 20),
            P,
            "How to run the Atlas soak test: flash 10 boards with the candidate firmware, "
            "start `atlasctl soak --hours 72`, and check reboots and LTE drops on the soak "
            "dashboard every morning.",
            ["Project Atlas", "Vendor X"],
            ["how-to", "soak", "testing"],
            importance=0.5,
        ),
    ),
    (
        "soak_dashboard",
        _m(
            _at(8, 20, 11),
            R,
            "Soak test dashboard (reboots, LTE drops, memory per unit) - "
            "https://grafana.example.com/d/atlas-soak",
            ["Project Atlas"],
            ["dashboard", "soak", "link"],
        ),
    ),
    (
        "fw_leak",
        _m(
            _at(9, 2),
            E,
            "Soak test: 3 of 10 Atlas units rebooted overnight. Watchdog traces point at a "
            "memory leak in Vendor X firmware 2.2.",
            ["Vendor X", "Project Atlas", "Priya"],
            ["firmware", "bug", "soak"],
            importance=0.8,
        ),
    ),
    (
        "escalation_procedure",
        _m(
            _at(9, 4),
            P,
            "How to escalate to Vendor X: open a ticket on the Vendor X portal; for a P1, "
            "email Tom Reyes and cc Dana; if there is no fix after 5 business days, Dana "
            "escalates to Vendor X's VP of engineering.",
            ["Vendor X", "Tom Reyes", "Dana"],
            ["how-to", "escalation"],
            importance=0.7,
        ),
    ),
    (
        "m1_done",
        _m(
            _at(9, 15),
            E,
            "M1 done: lab prototypes of the Atlas gateway delivered on time.",
            ["Project Atlas"],
            ["milestone"],
            importance=0.5,
        ),
    ),
    (
        "late_standup",
        _m(
            _at(9, 16, 8, 55),
            E,
            "running 5 min late to standup",
            ["Priya"],
            ["chat"],
        ),
    ),
    (
        "decision_freeze",
        _m(
            _at(9, 22),
            S,
            "Decision: the pilot stays on Vendor X firmware 2.3; no new radio features until "
            "the stability bugs are fixed.",
            ["Vendor X", "Project Atlas", "Dana", "Priya"],
            ["decision", "firmware"],
            importance=0.8,
        ),
    ),
    (
        "acme_pref",
        _m(
            _at(9, 25),
            S,
            "Acme Corp wants every vendor-related update to go through Dana; Helen, their "
            "operations director, is the only recipient.",
            ["Acme Corp", "Helen", "Dana"],
            ["preference", "customer", "communication"],
            importance=0.7,
        ),
    ),
    (
        "fw_notes",
        _m(
            _at(9, 29),
            R,
            "Vendor X firmware release notes (2.3 and later) - "
            "https://partners.vendorx.example.com/firmware/atlas/release-notes",
            ["Vendor X"],
            ["firmware", "link"],
        ),
    ),
    (
        "sla_missed",
        _m(
            _at(10, 6),
            E,
            "Vendor X missed the SLA on VX-1142: 12 business days without a fix. Dana "
            "escalated to Tom Reyes.",
            ["Vendor X", "VX-1142", "Dana", "Tom Reyes"],
            ["sla", "escalation"],
            importance=0.8,
        ),
    ),
    (
        "procurement_lead_time",
        _m(
            _at(10, 13),
            E,
            "Infra team flagged a procurement risk: Vendor X radio module lead time went from "
            "8 to 20 weeks, so the order for the March units must be placed by November 30.",
            ["Infra team", "Vendor X", "Marco", "Project Atlas"],
            ["procurement", "risk"],
            importance=0.8,
        ),
    ),
    (
        "ok_thanks",
        _m(
            _at(10, 14, 16),
            E,
            "ok thanks",
            ["Marco"],
            ["chat"],
        ),
    ),
    (
        "infra_escalation",
        _m(
            _at(10, 20),
            E,
            "Marco: the Infra team escalated the Vendor X procurement risk to the steering "
            "committee and asked for a go/no-go on the radio module order.",
            ["Marco", "Infra team", "Vendor X"],
            ["procurement", "escalation", "risk"],
            importance=0.7,
        ),
    ),
    (
        "procurement_tracker",
        _m(
            _at(10, 21),
            R,
            "Procurement tracker for Atlas hardware orders - "
            "https://sheets.example.com/atlas-procurement",
            ["Infra team", "Project Atlas"],
            ["procurement", "link"],
        ),
    ),
    (
        "fw_24_rc",
        _m(
            _at(10, 28),
            E,
            "Vendor X firmware 2.4 RC is still unstable: LTE drops every 6 hours in soak and "
            "the memory leak fix is incomplete.",
            ["Vendor X", "Priya", "Project Atlas"],
            ["firmware", "bug", "soak"],
            importance=0.8,
        ),
    ),
    (
        "milestone_slip",
        _m(
            _at(11, 3),
            E,
            "Milestone slip: the Atlas March delivery milestone is missed. Vendor X firmware "
            "instability means the pilot units cannot ship to Acme Corp in March; the new "
            "target is May 2027.",
            ["Project Atlas", "Vendor X", "Acme Corp"],
            ["milestone", "risk"],
            importance=0.9,
        ),
    ),
    (
        "milestone_slip_dup",
        _m(
            _at(11, 4, 9),
            E,
            "Milestone slip: the Atlas March delivery milestone was missed. Vendor X firmware "
            "instability means pilot units cannot ship to Acme Corp in March; new target is "
            "May 2027.",
            ["Project Atlas", "Vendor X", "Acme Corp"],
            ["milestone"],
            importance=0.7,
        ),
    ),
    (
        "acme_told",
        _m(
            _at(11, 5),
            E,
            "Dana told Helen at Acme Corp about the slip. Acme Corp accepts May 2027 but wants "
            "a short written status every Friday.",
            ["Dana", "Helen", "Acme Corp", "Project Atlas"],
            ["customer", "communication"],
            importance=0.8,
        ),
    ),
    (
        "update_format",
        _m(
            _at(11, 6),
            P,
            "How to write the weekly vendor update: subject 'Atlas / Vendor X - week N'; three "
            "to five bullets: open tickets with age, firmware status, risks, asks; send to "
            "Dana, who forwards to Acme Corp.",
            ["Vendor X", "Dana", "Acme Corp", "Project Atlas"],
            ["how-to", "communication", "template"],
            importance=0.7,
        ),
    ),
    (
        "dana_pref_dup",
        _m(
            _at(11, 6, 15),
            S,
            "Reminder: Dana prefers short written updates over meetings, five bullets at most, "
            "risks first.",
            ["Dana"],
            ["preference"],
            importance=0.5,
        ),
    ),
    (
        "decision_vendor_y",
        _m(
            _at(11, 10),
            S,
            "Decision: evaluate Vendor Y as a fallback radio supplier. Priya runs a two-week "
            "bench comparison against Vendor X.",
            ["Vendor Y", "Vendor X", "Priya", "Project Atlas"],
            ["decision", "risk"],
            importance=0.8,
        ),
    ),
    (
        "hotfix_241",
        _m(
            _at(11, 12),
            E,
            "Vendor X hotfix 2.4.1 fixes the memory leak; LTE drops are down to one per 48 "
            "hours in soak. Better, but not acceptable for the pilot.",
            ["Vendor X", "Priya", "Project Atlas"],
            ["firmware", "soak"],
            importance=0.8,
        ),
    ),
    (
        "vendor_call",
        _m(
            _at(11, 17),
            E,
            "Call with Tom Reyes (Vendor X): they commit to firmware 2.5 with the LTE fix by "
            "December 15 and offer a 10% credit for the missed SLA.",
            ["Vendor X", "Tom Reyes", "Dana"],
            ["meeting", "firmware", "sla"],
            importance=0.9,
        ),
    ),
    (
        "partial_order",
        _m(
            _at(11, 19),
            E,
            "Infra team: procurement approved a partial Vendor X order of 60 radio modules as "
            "a hedge; the rest waits for firmware 2.5.",
            ["Infra team", "Vendor X", "Marco"],
            ["procurement", "decision"],
            importance=0.8,
        ),
    ),
    (
        "standup_link",
        _m(
            _at(11, 19, 16),
            R,
            "Atlas standup notes doc - https://docs.example.com/atlas/standup",
            ["Project Atlas"],
            ["notes", "link"],
        ),
    ),
    (
        "vendor_y_samples",
        _m(
            _at(11, 20),
            E,
            "Priya: Vendor Y sample modules arrived; bench tests start Monday.",
            ["Priya", "Vendor Y"],
            ["hardware", "testing"],
            importance=0.6,
        ),
    ),
)

SAMPLE: tuple[NewMemory, ...] = tuple(memory for _, memory in _ENTRIES)

_INDEX: dict[str, int] = {key: i for i, (key, _) in enumerate(_ENTRIES)}

_LINK_KEYS: tuple[tuple[str, str, str, float], ...] = (
    # causes
    ("fw_22_lte", "milestone_slip", "causal", 0.8),
    ("fw_leak", "milestone_slip", "causal", 0.8),
    ("fw_24_rc", "milestone_slip", "causal", 0.9),
    ("fw_22_lte", "sla_missed", "causal", 0.7),
    ("procurement_lead_time", "infra_escalation", "causal", 0.8),
    ("milestone_slip", "acme_told", "causal", 0.8),
    ("milestone_slip", "decision_vendor_y", "causal", 0.7),
    ("fw_leak", "decision_freeze", "causal", 0.6),
    # later news about the same thing
    ("hotfix_241", "fw_leak", "update", 0.9),
    ("hotfix_241", "fw_24_rc", "update", 0.8),
    ("vendor_call", "sla_missed", "update", 0.8),
    ("partial_order", "infra_escalation", "update", 0.9),
    ("vendor_y_samples", "decision_vendor_y", "update", 0.7),
    ("milestone_slip", "milestones", "update", 0.9),
    # related
    ("deploy_procedure", "deploy_runbook", "related", 0.9),
    ("flash_procedure", "fw_notes", "related", 0.6),
    ("soak_procedure", "soak_dashboard", "related", 0.9),
    ("escalation_procedure", "vendor_contract", "related", 0.8),
    ("sla_missed", "escalation_procedure", "related", 0.6),
    ("procurement_lead_time", "procurement_tracker", "related", 0.7),
    ("update_format", "dana_pref", "related", 0.8),
    ("update_format", "acme_pref", "related", 0.7),
)

LINKS: tuple[tuple[int, int, str, float], ...] = tuple(
    (_INDEX[source], _INDEX[target], relation, weight)
    for source, target, relation, weight in _LINK_KEYS
)


async def load_demo(orchestrator: Orchestrator) -> int:
    """Write `SAMPLE` to the orchestrator's store and add `LINKS`; return how many were written.

    Memories the store skipped (e.g. as duplicates) are not counted; links to them go to the
    memory the store kept. Links are left out when the store has no graph.
    """
    outcomes = await orchestrator.ingest(SAMPLE, LINKS)
    return sum(outcome.action is not WriteAction.SKIPPED for outcome in outcomes)
