"""The example config documents the defaults, and settings validate what they are given."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from memory_orchestrator.errors import ConfigError
from memory_orchestrator.models import MemoryType
from memory_orchestrator.settings import Settings, load_settings

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
        "postgres",
        "shared",
        "http",
        "limits",
        "local_index",
        "semantic",
    ):
        assert getattr(example, section) == getattr(default, section), section
    assert example.ranking.weights == default.ranking.weights
    assert example.ranking.model_dump(exclude={"half_life_days"}) == default.ranking.model_dump(
        exclude={"half_life_days"}
    )
    assert example.preset == default.preset
    for kind in MemoryType:
        assert example.ranking.half_life_days.get(kind) == default.ranking.half_life_days.get(kind)
    assert example.traces == default.traces


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


# ---------------------------------------------------------------- paths and store names


def test_config_paths_are_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    loaded = Settings(
        data_dir=Path("rel/data"),
        embedded={"path": "~/m.db"},
        mnemon_mcp={"path": "x/../t.db"},
        mnemon={"binary": "./bin/mnemon", "data_dir": "mn"},
    )
    assert loaded.data_dir == tmp_path / "rel" / "data"
    assert loaded.embedded.path == tmp_path / "home" / "m.db"
    assert loaded.mnemon_mcp.path == tmp_path / "t.db"
    assert loaded.mnemon.binary == tmp_path / "bin" / "mnemon"
    assert loaded.mnemon.data_dir == tmp_path / "mn"
    # A bare executable name is kept for the PATH lookup at use.
    assert Settings(mnemon={"binary": "mnemon"}, kg_memory={"node": "node"}).mnemon.binary == Path(
        "mnemon"
    )


BAD_PATHS = [
    pytest.param({"data_dir": "a\x00b"}, "data_dir", "NUL", id="nul"),
    pytest.param({"embedded": {"path": "{file}/m.db"}}, "embedded.path", "is not a directory", id="parent-file"),
    pytest.param({"embedded": {"path": "{file}/deeper/still/m.db"}}, "embedded.path", "is not a directory", id="ancestor-file"),
    pytest.param({"mnemon_mcp": {"path": "{dir}"}}, "mnemon_mcp.path", "is a directory", id="file-is-dir"),
    pytest.param({"data_dir": "{file}"}, "data_dir", "not a directory", id="dir-is-file"),
    pytest.param({"mnemonic": {"path": "{file}"}}, "mnemonic.path", "not a directory", id="mnemonic"),
    pytest.param({"mnemon": {"binary": "{dir}"}}, "mnemon.binary", "not an executable", id="binary-dir"),
    pytest.param({"mnemon": {"binary": "  "}}, "mnemon.binary", "empty", id="binary-blank"),
    pytest.param({"kg_memory": {"node": "{file}/node"}}, "kg_memory.node", "is not a directory", id="node"),
    pytest.param({"mnemon_mcp": {"script": "{dir}"}}, "mnemon_mcp.script", "is a directory", id="script"),
]  # fmt: skip


@pytest.mark.parametrize(("values", "field", "phrase"), BAD_PATHS)
def test_bad_config_paths_are_clear_errors_at_load(
    tmp_path: Path, values: dict[str, object], field: str, phrase: str
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")

    def fill(value: object) -> object:
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        return value.format(file=afile, dir=tmp_path) if isinstance(value, str) else value

    with pytest.raises(ValidationError) as caught:
        Settings(**fill(values))  # type: ignore[arg-type]
    (error,) = caught.value.errors()
    assert ".".join(str(p) for p in error["loc"]) == field
    assert phrase in error["msg"]


@pytest.mark.parametrize(
    "name", ["../x", "a/b", "", "-lead", "has space", "ü", "a\x00", "x" * 201, ".hidden"]
)
def test_store_names_are_checked_at_load(name: str) -> None:
    for values in (
        {"mnemon": {"store": name}},
        {"mnemon_mcp": {"scope": name}},
        {"fused": {"stores": [{"backend": "embedded", "label": name}]}},
    ):
        with pytest.raises(ValidationError, match="invalid store name"):
            Settings(**values)


def test_good_store_names_pass() -> None:
    loaded = Settings(mnemon={"store": "work-2"}, mnemon_mcp={"scope": "project_x"})
    assert (loaded.mnemon.store, loaded.mnemon_mcp.scope) == ("work-2", "project_x")


def test_limits_stay_within_the_schema_caps() -> None:
    with pytest.raises(ValidationError, match="max_query_chars"):
        Settings(limits={"max_query_chars": 10**6})
    with pytest.raises(ValidationError, match="max_write_chars"):
        Settings(limits={"max_write_chars": 0})
