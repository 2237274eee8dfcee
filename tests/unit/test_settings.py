"""The example config documents the defaults, and settings validate what they are given."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from memory_orchestrator.models import MemoryType
from memory_orchestrator.settings import ConfigError, Settings, load_settings

EXAMPLE = Path(__file__).resolve().parents[2] / "orchestrator.example.toml"


def test_the_example_config_loads_and_matches_the_defaults() -> None:
    example, default = load_settings(EXAMPLE), Settings()
    for section in (
        "retrieval",
        "expansion",
        "dedup",
        "packaging",
        "write",
        "embedded",
        "mnemon",
        "mnemon_mcp",
        "kg_memory",
        "mnemonic",
        "fused",
        "http",
    ):
        assert getattr(example, section) == getattr(default, section), section
    assert example.ranking.weights == default.ranking.weights
    assert example.ranking.model_dump(exclude={"half_life_days"}) == default.ranking.model_dump(
        exclude={"half_life_days"}
    )
    assert example.preset == default.preset
    for kind in MemoryType:
        assert example.ranking.half_life_days.get(kind) == default.ranking.half_life_days.get(kind)
    assert example.traces.verbosity == default.traces.verbosity


def test_env_overrides_the_file_and_flags_override_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "o.toml"
    config.write_text('backend = "from-file"\n[retrieval]\ntop_k = 3\n')
    assert load_settings(config).retrieval.top_k == 3
    monkeypatch.setenv("ORCHESTRATOR_RETRIEVAL__TOP_K", "7")
    assert load_settings(config).retrieval.top_k == 7
    assert load_settings(config).backend == "from-file"
    assert load_settings(config, backend="embedded").backend == "embedded"


def test_unknown_keys_and_bad_values_are_rejected(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[retrieval]\ntop_k = -1\n")
    with pytest.raises(ValidationError):
        load_settings(bad)
    typo = tmp_path / "typo.toml"
    typo.write_text("[retreival]\ntop_k = 5\n")
    with pytest.raises(ValidationError):
        load_settings(typo)
    with pytest.raises(ConfigError):
        load_settings(tmp_path / "missing.toml")
