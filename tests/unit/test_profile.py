"""The ranking profile: every coefficient of the order in one place (`settings/profile.py`),
few knobs in all, and a configuration written for an earlier version read or refused clearly."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from memory_orchestrator.settings import RankingProfile, Settings, load_settings
from memory_orchestrator.settings.renamed import MOVED, REMOVED

SRC = Path(__file__).resolve().parents[2] / "src" / "memory_orchestrator"

# Settings and profile fields together, at most 100 (issue 52): lower this as
# settings go, never raise it; a new knob has to make room first.
CEILING = 100

# The modules of the read path's scoring: fusion, relevance, the score, dedup, neighbours,
# retrieval, the derived indexes' lists, the run itself.
SCORING = [
    "pipeline/fusion.py",
    "pipeline/relevance.py",
    "pipeline/reranker.py",
    "pipeline/deduper.py",
    "pipeline/neighbours.py",
    "pipeline/retriever.py",
    "derived/indexes.py",
    "service/reading.py",
]
# Module-level numbers there that decide no order, each with why.
NOT_COEFFICIENTS = {
    "_DAY",  # seconds in a day: a unit
    "RECENT_DAYS",  # how a reason words an age ("recent"), not the score
    "_CLOSE_IN_MEANING",  # from which cosine a reason says "close in meaning", not the score
    "DISPATCH_WAIT_S",  # how long lists wait for the store's searches: time, not order
    "SYNC_INTERVAL_S",  # how often the derived indexes ask the store for news: time, not order
    "INDEX_WAIT_S",  # how long a query waits for new memories' embedding: time, not order
}


def leaves(model: type[BaseModel], prefix: str = "") -> list[str]:
    out = []
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            out += leaves(kind, f"{prefix}{name}.")
        else:
            out.append(prefix + name)
    return out


def test_settings_and_profile_together_stay_under_the_ceiling() -> None:
    every = leaves(Settings)
    assert len(every) <= CEILING, f"{len(every)} settings and profile fields"
    # the profile is the `ranking` section: counted once
    assert {f"ranking.{name}" for name in leaves(RankingProfile)} <= set(every)


# Settings that ship switched off (false, 0, empty, or None where None means "none of it",
# not "the default place"), each with the use that keeps it: a user's feature, or where
# its use is measured. A new one has to say why here, or not ship off.
SHIPPED_OFF = {
    "passthrough": "the off switch of the orchestrator: the agent gets the store's own search",
    "mnemon.readonly": "a user's feature: serve a memory that must not change",
    "mnemon_mcp.native_search": "measured: the bare column of quality.md's per-store table",
    "kg_memory.native_search": "measured: the bare column of quality.md's per-store table",
    "mnemonic.git_commit": "a user's feature: each write a commit in the notes' repository",
    "fused.stores": "a user's list: empty unless backend = fused",
    "fused.mirror_writes": "a user's feature: every write to every store",
    "expansion.enabled": "a user's feature; measured: the eval's `expanded` system",
    "http.tokens": "a user's list: empty until `orchestrator token add`",
}


def _shipped_off(model: type[BaseModel], prefix: str = "") -> set[str]:
    out = set()
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            out |= _shipped_off(kind, f"{prefix}{name}.")
            continue
        default = field.get_default(call_default_factory=True)
        numbers = {int, float, bool}
        none_is_off = default is None and set(typing.get_args(kind)) - {type(None)} <= numbers
        if default is False or default in (0, []) or none_is_off:
            out.add(prefix + name)
    return out


def test_no_setting_ships_switched_off_without_its_use() -> None:
    assert _shipped_off(Settings) == set(SHIPPED_OFF)


def test_the_shipped_off_check_sees_an_option_left_off() -> None:
    class Section(BaseModel):
        on: bool = True
        off: bool = False
        share: float = 0.0
        floor: float | None = None
        place: Path | None = None  # None: the default place, not off

    assert _shipped_off(Section) == {"off", "share", "floor"}


def test_every_profile_field_says_why() -> None:
    def described(model: type[BaseModel]) -> None:
        for name, field in model.model_fields.items():
            kind = field.annotation
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                described(kind)
            else:
                assert field.description, name
                assert len(field.description) > 20, name

    described(RankingProfile)


def module_numbers(path: Path) -> list[str]:
    """Names bound at module level to a number (int or float literal, signed or not)."""
    found = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if isinstance(value, ast.UnaryOp):
            value = value.operand
        if isinstance(value, ast.Constant) and type(value.value) in (int, float):
            found += [t.id for t in targets if isinstance(t, ast.Name)]
    return found


def test_no_ranking_coefficient_lives_at_module_level_outside_the_profile() -> None:
    stray = {
        f"{module}: {name}"
        for module in SCORING
        for name in module_numbers(SRC / module)
        if name not in NOT_COEFFICIENTS
    }
    assert not stray, "move these into settings/profile.py (with a reason each)"


def test_a_moved_setting_is_read_under_its_new_name(tmp_path: Path) -> None:
    config = tmp_path / "orchestrator.toml"
    config.write_text("[local_index]\nweight = 2.5\nk1 = 1.1\n[retrieval]\nrrf_k = 20\n")
    settings = load_settings(config)
    assert settings.ranking.local_list_weight == 2.5
    assert settings.ranking.bm25_k1 == 1.1
    assert settings.ranking.rrf_k == 20
    assert set(MOVED.values()) <= {("ranking", n) for n in RankingProfile.model_fields}


def test_a_moved_setting_is_read_from_the_environment_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHESTRATOR_SEMANTIC__WEIGHT", "0.5")
    assert Settings().ranking.semantic_list_weight == 0.5


@pytest.mark.parametrize(("section", "name"), sorted(REMOVED))
def test_a_removed_setting_stops_the_program_with_why(
    tmp_path: Path, section: str, name: str
) -> None:
    config = tmp_path / "orchestrator.toml"
    config.write_text(f"[{section}]\n{name} = 0\n")
    with pytest.raises(ValidationError, match=rf"{section}\.{name} was removed: .*delete it"):
        load_settings(config)
    model: BaseModel = Settings()
    for part in section.split("."):
        model = getattr(model, part)
    assert name not in type(model).model_fields


def test_one_setting_under_its_old_and_new_names_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "orchestrator.toml"
    config.write_text("[local_index]\nweight = 2.5\n[ranking]\nlocal_list_weight = 3.0\n")
    with pytest.raises(ValidationError, match=r"now ranking\.local_list_weight, and both"):
        load_settings(config)


def test_no_weight_defaults_to_its_own_upper_bound() -> None:
    for name, field in RankingProfile.model_fields.items():
        bounds = [m.le for m in field.metadata if getattr(m, "le", None) is not None]
        if bounds and isinstance(field.default, int | float):
            assert field.default < bounds[0], name
