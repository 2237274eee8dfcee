"""The one settings model.

Precedence, highest first: values passed in code or by CLI flags (`--backend`), environment
variables (`ORCHESTRATOR_...`, `__` between nested names, e.g.
`ORCHESTRATOR_RETRIEVAL__TOP_K=5`), the TOML file (`--config PATH`, else `$ORCHESTRATOR_CONFIG`,
else `./orchestrator.toml` when it exists), then the defaults below.
Only the entry points (CLI, MCP server, eval) build settings; the core receives them.
"""

from __future__ import annotations

import os
import tomllib
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    Field,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from memory_orchestrator.errors import ConfigError
from memory_orchestrator.settings.base import _dir_path, default_data_dir
from memory_orchestrator.settings.postgres import PostgresSettings, SharedSettings
from memory_orchestrator.settings.presets import apply_preset
from memory_orchestrator.settings.profile import RankingProfile
from memory_orchestrator.settings.renamed import renamed
from memory_orchestrator.settings.stores import (
    EmbeddedSettings,
    FusedSettings,
    KgMemorySettings,
    MnemonicSettings,
    MnemonMcpSettings,
    MnemonSettings,
)
from memory_orchestrator.settings.tuning import (
    DedupSettings,
    ExpansionSettings,
    LimitsSettings,
    LocalIndexSettings,
    OutboxSettings,
    PackagingSettings,
    RetrievalSettings,
    RetrySettings,
    SemanticSettings,
    SharedProcessSettings,
    TraceSettings,
    WriteSettings,
)
from memory_orchestrator.state.tokens import HttpSettings

_config_file: ContextVar[Path | None] = ContextVar("config_file", default=None)


class Settings(BaseSettings):
    """All settings of the orchestrator (see module docstring for precedence)."""

    model_config = SettingsConfigDict(
        env_prefix="ORCHESTRATOR_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_assignment=True,
    )

    backend: str = Field(default="embedded", description="store to use (see `backends`)")
    data_dir: Annotated[Path, AfterValidator(_dir_path)] = Field(
        default_factory=default_data_dir,
        description="where the store file, the traces, the outbox and the forgotten list are kept",
    )
    passthrough: bool = Field(
        default=False, description="search returns the store's raw results unchanged"
    )
    cache_ttl_s: float = Field(
        default=30.0,
        ge=0,
        description="how long what the store says about itself (its entity names; Mnemon's"
        " version and status) is reused",
    )
    preset: str | None = Field(
        default=None,
        description="named tuned values (see `settings/presets.py`); explicit settings win",
    )
    embedded: EmbeddedSettings = Field(default_factory=EmbeddedSettings)
    mnemon: MnemonSettings = Field(default_factory=MnemonSettings)
    mnemon_mcp: MnemonMcpSettings = Field(default_factory=MnemonMcpSettings)
    kg_memory: KgMemorySettings = Field(default_factory=KgMemorySettings)
    mnemonic: MnemonicSettings = Field(default_factory=MnemonicSettings)
    fused: FusedSettings = Field(default_factory=FusedSettings)
    postgres: PostgresSettings = Field(default_factory=PostgresSettings)
    shared: SharedSettings = Field(default_factory=SharedSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    expansion: ExpansionSettings = Field(default_factory=ExpansionSettings)
    ranking: RankingProfile = Field(default_factory=RankingProfile)
    dedup: DedupSettings = Field(default_factory=DedupSettings)
    packaging: PackagingSettings = Field(default_factory=PackagingSettings)
    traces: TraceSettings = Field(default_factory=TraceSettings)
    retry: RetrySettings = Field(default_factory=RetrySettings)
    outbox: OutboxSettings = Field(default_factory=OutboxSettings)
    write: WriteSettings = Field(default_factory=WriteSettings)
    semantic: SemanticSettings = Field(default_factory=SemanticSettings)
    local_index: LocalIndexSettings = Field(default_factory=LocalIndexSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    shared_process: SharedProcessSettings = Field(default_factory=SharedProcessSettings)

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        return apply_preset(renamed(data)) if isinstance(data, dict) else data

    @field_validator("backend")
    @classmethod
    def _backend_name(cls, value: str) -> str:
        if not value.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"invalid backend name {value!r}")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = _config_file.get()
        if path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)

    def embedded_path(self) -> Path:
        return self.embedded.path or self.data_dir / "memories.db"

    def store_file(self) -> Path | None:
        """The file the configured store keeps its memories in, when this process makes it on
        first use (the embedded store); None for stores kept elsewhere."""
        return self.embedded_path() if self.backend == "embedded" else None

    def trace_path(self) -> Path:
        return self.data_dir / "traces.db"

    def outbox_path(self) -> Path:
        return self.data_dir / "outbox.db"

    def forgotten_path(self) -> Path:
        """The memories forgotten through the orchestrator (`state/forgotten.py`)."""
        return self.data_dir / "forgotten.db"


def find_config(explicit: Path | None) -> Path | None:
    """The TOML file to read: explicit path, else $ORCHESTRATOR_CONFIG, else ./orchestrator.toml."""
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"config file not found: {explicit}")
        return explicit
    env = os.environ.get("ORCHESTRATOR_CONFIG")
    if env:
        path = Path(env)
        if not path.is_file():
            raise ConfigError(f"ORCHESTRATOR_CONFIG points to a missing file: {path}")
        return path
    local = Path("orchestrator.toml")
    return local if local.is_file() else None


def load_settings(config: Path | None = None, **overrides: Any) -> Settings:
    """Build settings from defaults, the TOML file, the environment and `overrides`. A file
    that is not TOML, or cannot be read, is a ConfigError that names it (it may have been
    picked up from the working directory without the user knowing)."""
    path = find_config(config)
    token = _config_file.set(path)
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {_shown(path)}: not valid TOML: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        if path is None:
            raise
        raise ConfigError(f"config file {_shown(path)}: cannot be read: {exc}") from exc
    finally:
        _config_file.reset(token)


def _shown(path: Path | None) -> str:
    return str(path.absolute()) if path is not None else "(none)"
