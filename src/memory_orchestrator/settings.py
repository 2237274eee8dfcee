"""The one settings model.

Precedence, highest first: values passed in code or by CLI flags (`--backend`), environment
variables (`ORCHESTRATOR_...`, `__` between nested names, e.g.
`ORCHESTRATOR_RETRIEVAL__TOP_K=5`), the TOML file (`--config PATH`, else `$ORCHESTRATOR_CONFIG`,
else `./orchestrator.toml` when it exists), then the defaults below.
Only the entry points (CLI, MCP server, eval) build settings; the core receives them.
"""

from __future__ import annotations

import os
import re
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
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

from memory_orchestrator.auth import HttpSettings
from memory_orchestrator.errors import ConfigError
from memory_orchestrator.models import (
    MAX_CONTENT_CHARS,
    MAX_IDS,
    MAX_LABEL_CHARS,
    MAX_LIST_ITEMS,
    MAX_QUERY_CHARS,
    MemoryType,
)
from memory_orchestrator.presets import apply_preset

_config_file: ContextVar[Path | None] = ContextVar("config_file", default=None)


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "memory-orchestrator"


# ---------------------------------------------------------------- checked values
# Paths and names from config are checked when settings load, so a bad value stops the
# program with one clear line instead of failing later inside a store or a subprocess.

MNEMON_STORE_NAME = r"^[a-zA-Z0-9][a-zA-Z0-9_-]*$"
_STORE_NAME = re.compile(MNEMON_STORE_NAME)
MAX_STORE_NAME_CHARS = 200  # mnemon-mcp's scope limit; far above any real store name


def check_store_name(value: str | None) -> str | None:
    """A store name (Mnemon `--store`, mnemon-mcp scope, a fused store label): letters,
    digits, '_' and '-', starting with a letter or digit; never a path."""
    if value is None:
        return None
    if len(value) > MAX_STORE_NAME_CHARS or not _STORE_NAME.match(value):
        raise ValueError(
            f"invalid store name {value[:60]!r}: use at most {MAX_STORE_NAME_CHARS} letters,"
            " digits, '_' and '-', starting with a letter or digit"
        )
    return value


def _plain(value: Path | str) -> str:
    text = str(value)
    if "\x00" in text:
        raise ValueError("path contains a NUL character")
    if not text.strip():
        raise ValueError("path is empty")
    return text


def _resolved(value: Path) -> Path:
    try:
        return value.expanduser().resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise ValueError(f"cannot resolve path {str(value)!r}: {exc}") from exc


def _check_parents(path: Path) -> None:
    """The nearest existing ancestor must be a directory, or the path can never be made."""
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"{parent} is not a directory, so {path} cannot be created")
            return


def _file_path(value: Path | None) -> Path | None:
    """A file the program reads or creates: no NUL, resolved, not a directory, and its
    nearest existing parent a directory."""
    if value is None:
        return None
    _plain(value)
    path = _resolved(value)
    if path.is_dir():
        raise ValueError(f"{path} is a directory; expected a file path")
    _check_parents(path)
    return path


def _dir_path(value: Path | None) -> Path | None:
    """A directory the program reads or creates: no NUL, resolved, not an existing file."""
    if value is None:
        return None
    _plain(value)
    path = _resolved(value)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{path} exists and is not a directory")
    _check_parents(path)
    return path


def _executable(value: Path | str | None) -> Path | str | None:
    """An executable: a bare name is looked up on PATH when used; anything with a directory
    part is resolved now and must not be a directory."""
    if value is None:
        return None
    text = _plain(value)
    if "/" not in text:
        return value
    path = _resolved(Path(text))
    if path.is_dir():
        raise ValueError(f"{path} is a directory, not an executable")
    _check_parents(path)
    return path if isinstance(value, Path) else str(path)


FilePath = Annotated[Path | None, AfterValidator(_file_path)]
DirPath = Annotated[Path | None, AfterValidator(_dir_path)]
StoreName = Annotated[str | None, AfterValidator(check_store_name)]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class EmbeddedSettings(Section):
    """The zero-setup SQLite store."""

    path: FilePath = Field(default=None, description="SQLite file; default <data_dir>/memories.db")
    temporal_links: bool = Field(
        default=True, description="link each new memory to the one before it in time"
    )


class MnemonSettings(Section):
    """The Mnemon store, reached through its `mnemon` CLI (see `backends/mnemon/`)."""

    binary: Annotated[Path | None, AfterValidator(_executable)] = Field(
        default=None, description="mnemon executable; default ./.tools/bin/mnemon, then PATH"
    )
    data_dir: DirPath = Field(
        default=None, description="Mnemon's --data-dir; default $MNEMON_DATA_DIR, else ~/.mnemon"
    )
    store: StoreName = Field(
        default=None,
        description="store name; default $MNEMON_STORE, else <data_dir>/active, else default",
    )
    readonly: bool = Field(
        default=False,
        description="run every command with --readonly: reads leave no trace, writes are refused",
    )
    timeout_s: float = Field(default=10.0, gt=0, le=600, description="per mnemon process")
    retries: int = Field(default=3, ge=0, le=10, description="retries on 'database is locked'")
    retry_backoff_s: float = Field(
        default=0.05, ge=0, le=5, description="first retry delay; doubles each retry"
    )
    max_processes: int = Field(
        default=4, ge=1, le=32, description="mnemon processes running at once"
    )
    embed_endpoint: str | None = Field(
        default=None,
        description="MNEMON_EMBED_ENDPOINT; None = an address that fails at once (no embeddings)",
    )
    embed_model: str | None = Field(default=None, description="--embed-model; None = Mnemon's")
    max_insights: int | None = Field(
        default=None, ge=0, description="MNEMON_MAX_INSIGHTS (auto-prune ceiling); None = Mnemon's"
    )
    entity_mode: Literal["merge", "provided", "auto"] = Field(
        default="merge", description="remember --entity-mode: how Mnemon adds entities it finds"
    )
    direct_reads: bool = Field(
        default=True,
        description="read memories by id, graph neighbours and entity names from the store file "
        "(read-only SQLite, schema-checked); false = only through the CLI",
    )
    cache_ttl_s: float = Field(
        default=30.0, ge=0, description="how long `--version` and `status` answers are reused"
    )


class NpmServerSettings(Section):
    """A store behind an npm MCP server spawned over stdio (`make npm-servers` installs it)."""

    script: FilePath = Field(
        default=None,
        description="the package's dist/index.js; default .tools/npm/node_modules/<pkg>/...",
    )
    node: Annotated[str | None, AfterValidator(_executable)] = Field(
        default=None, description="node executable; default node on PATH"
    )
    timeout_s: float = Field(default=10.0, gt=0, le=600, description="per tool call")
    native_search: bool = Field(
        default=False,
        description="send the query to the server as is, without the adapter's workarounds"
        " (to measure the bare store)",
    )


class MnemonMcpSettings(NpmServerSettings):
    """The mnemon-mcp store (npm `mnemon-mcp@1.3.0`, see `backends/mnemon_mcp.py`)."""

    path: FilePath = Field(
        default=None,
        description="the SQLite file (MNEMON_DB_PATH); default <data_dir>/mnemon-mcp.db",
    )
    scope: StoreName = Field(
        default=None, description="scope written and searched (a store name); None = all"
    )


class KgMemorySettings(NpmServerSettings):
    """The MCP knowledge-graph memory server (see `backends/kg_memory.py`)."""

    path: FilePath = Field(
        default=None,
        description="the JSONL file (MEMORY_FILE_PATH); default <data_dir>/kg-memory.jsonl",
    )


class MnemonicSettings(Section):
    """Mnemonic's markdown files with YAML frontmatter (see `backends/mnemonic.py`)."""

    path: DirPath = Field(
        default=None, description="the memory directory; default <data_dir>/mnemonic"
    )
    git_commit: bool = Field(default=False, description="commit every write in the root (git)")
    rescan_s: float = Field(
        default=1.0, ge=0, le=3600, description="how often the files are re-read for changes"
    )


class FusedStore(Section):
    backend: str = Field(description="a backend name (not `fused`)")
    weight: float = Field(default=1.0, gt=0, le=100, description="its share in the RRF fusion")
    label: StoreName = Field(
        default=None,
        description="how items and ids name the store; default the backend name",
    )


class FusedSettings(Section):
    """Several stores at once (`backend = "fused"`, see `backends/fused.py`)."""

    stores: list[FusedStore] = Field(default_factory=list, description="the member stores")
    primary: StoreName = Field(
        default=None, description="label of the store writes go to; default the first"
    )
    timeout_s: float = Field(
        default=3.0, gt=0, le=120, description="per store and call; a slower store is left out"
    )
    mirror_writes: bool = Field(
        default=False, description="write to every store, not only the primary"
    )


class RetrievalSettings(Section):
    top_k: int = Field(default=10, ge=1, le=100, description="items returned by default")
    candidate_k: int = Field(
        default=20, ge=1, le=500, description="candidates fetched per subquery (at least top_k)"
    )
    max_subqueries: int = Field(default=4, ge=1, le=12)
    rrf_k: int = Field(default=60, ge=1, description="RRF constant: 1 / (rrf_k + rank)")
    timeout_s: float = Field(default=5.0, gt=0, le=120, description="per backend call")


class ExpansionSettings(Section):
    enabled: bool = Field(default=False, description="expand on every search, not only when asked")
    hop_budget: int = Field(default=1, ge=0, le=4, description="default hops; planner may lower")
    max_hops: int = Field(default=3, ge=0, le=6, description="hard cap on any request")
    seeds: int = Field(default=5, ge=1, le=50, description="best candidates expanded from")
    fanout: int = Field(default=6, ge=1, le=100, description="neighbours kept per seed")
    max_expanded: int = Field(default=30, ge=1, le=500, description="new candidates per request")
    edge_types: list[str] = Field(
        default_factory=lambda: ["temporal", "entity", "causal", "semantic", "related", "update"]
    )


class Weights(Section):
    """The re-ranking formula. Penalties are subtracted."""

    relevance: float = 0.60
    recency: float = 0.10
    graph: float = 0.10
    type_match: float = 0.05
    cross_reference: float = 0.15
    duplicate: float = 0.40
    noise: float = 0.30


class RankingSettings(Section):
    weights: Weights = Field(default_factory=Weights)
    relevance_floor: float = Field(
        default=0.05, ge=0, le=1, description="items with less relevance are dropped as noise"
    )
    lexical_share: float = Field(
        default=0.6, ge=0, le=1, description="share of relevance from own term match vs store rank"
    )
    half_life_days: dict[MemoryType, float | None] = Field(
        default_factory=lambda: {
            MemoryType.EPISODIC: 30.0,
            MemoryType.SEMANTIC: None,
            MemoryType.PROCEDURAL: None,
            MemoryType.RESOURCE: 180.0,
        },
        description="recency half-life per memory type; null = never fades",
    )
    expansion_decay: float = Field(
        default=0.7, ge=0, le=1, description="relevance carried over one hop"
    )
    store_score_share: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="share of the store signal taken from the store's own scores (min-max "
        "scaled per subquery) rather than from the fused rank",
    )
    length_norm: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="BM25-like length normalization (b) of the term match; longer-than-average "
        "memories lose a share; 0 = off",
    )
    context_seeds: int = Field(
        default=4,
        ge=0,
        le=200,
        description="best candidates whose neighbours in time are fetched (one store call); "
        "0 = off",
    )
    context_window: float = Field(
        default=0.2,
        ge=0,
        le=1,
        description="weight of a neighbour's words in a memory's term match (context window)",
    )
    neighbor_share: float = Field(
        default=0.7,
        ge=0,
        le=1,
        description="share of its seed's relevance a fetched neighbour inherits; 0 = neighbours "
        "only lend context",
    )
    neighbor_slots: int = Field(
        default=0,
        ge=0,
        le=100,
        description="the best N results each get their fetched neighbours placed right after "
        "them; 0 = neighbours rank by their own score",
    )
    common_entity_share: float = Field(
        default=1.0,
        ge=0,
        le=1,
        description="an entity carried by more than this share of the candidates (a conversation "
        "participant) counts as weak: no cross-reference boost, little entity-match weight",
    )
    when_time_boost: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="'when' questions: relevance added to memories carrying a time expression",
    )
    semantic_share: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="share of relevance from semantic similarity (only with [semantic] on)",
    )
    local_share: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="with [local_index] on: share of relevance from the local index's own "
        "score (its BM25 with context, scaled to its best hit) rather than from ranks alone",
    )


class DedupSettings(Section):
    threshold: float = Field(default=0.85, ge=0.5, le=1.0, description="merge at or above")
    soft_threshold: float = Field(
        default=0.6, ge=0.0, le=1.0, description="penalise similarity above this"
    )


class PackagingSettings(Section):
    max_items: int = Field(default=8, ge=1, le=100)
    max_chars: int = Field(default=3000, ge=200, le=100_000)
    item_chars: int = Field(default=400, ge=40, le=8000, description="summary length per item")
    group_by: Literal["auto", "entity", "time", "none"] = "auto"


class TraceSettings(Section):
    enabled: bool = True
    path: FilePath = Field(default=None, description="SQLite file; default <data_dir>/traces.db")
    verbosity: Literal["minimal", "normal", "full"] = "normal"
    keep: int = Field(default=5000, ge=10, description="newest traces kept")


class SemanticSettings(Section):
    """Semantic relevance from a local embedding model (the optional `semantic` extra)."""

    enabled: bool = Field(default=False, description="needs the `semantic` extra")
    model: Literal["wordllama"] = "wordllama"
    candidates: int = Field(
        default=40, ge=0, le=500, description="nearest memories added as a candidate list; 0 = off"
    )
    weight: float = Field(
        default=1.0, ge=0, le=4, description="RRF weight of the semantic candidate list"
    )


class LocalIndexSettings(Section):
    """A derived local index (BM25 with a context window) kept in step with the store; the
    semantic vectors, when on, are kept the same way."""

    enabled: bool = Field(default=False, description="needs a store that can list its memories")
    candidates: int = Field(default=40, ge=1, le=500, description="hits added as a candidate list")
    weight: float = Field(default=1.0, ge=0, le=4, description="RRF weight of that list")
    context_weight: float = Field(
        default=0.5, ge=0, le=1, description="weight of the neighbours' terms in a memory's score"
    )
    radius: int = Field(
        default=1, ge=1, le=5, description="neighbours on each side that lend their terms"
    )
    k1: float = Field(default=1.2, ge=0, le=3)
    b: float = Field(default=0.75, ge=0, le=1)
    semantic_share: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="with [semantic] on: weight of meaning in the index's min-max scaled "
        "hybrid of BM25 and semantic similarity",
    )
    date_terms: bool = Field(
        default=True,
        description='index each memory\'s date as words ("8 May 2023"), so a question that '
        "names a date or month matches what was said then",
    )
    lend_context: bool = Field(
        default=False,
        description="every candidate's term match also reads its neighbours in time (at "
        "ranking.context_window), not only the context seeds'",
    )
    sync_interval_s: float = Field(
        default=5.0, ge=0, le=86_400, description="how often the store is asked for new memories"
    )
    max_memories: int = Field(
        default=200_000, ge=1, le=5_000_000, description="memories a derived index holds at most"
    )


class RetrySettings(Section):
    """Retries of transient store errors (see `resilience.py`); writes are checked first."""

    attempts: int = Field(
        default=3, ge=1, le=10, description="tries per store call on a transient error; 1 = none"
    )
    base_delay_s: float = Field(
        default=0.05, ge=0, le=10, description="first backoff; doubles each retry, with jitter"
    )
    max_delay_s: float = Field(default=1.0, ge=0, le=60, description="longest backoff")


class OutboxSettings(Section):
    """Writes the store cannot take now wait here (SQLite) and are replayed in order."""

    enabled: bool = Field(default=True, description="false = such a write fails with an error")
    path: Path | None = Field(default=None, description="SQLite file; default <data_dir>/outbox.db")
    replay_s: float = Field(
        default=10.0, gt=0, le=600, description="time budget of one replay (write or health)"
    )


class WriteSettings(Section):
    on_duplicate: Literal["skip", "update"] = "skip"
    link_related: int = Field(
        default=3, ge=0, le=20, description="links to memories sharing entities"
    )


class LimitsSettings(Section):
    """Bounds on what one request may carry. Above the schema caps in `models` a request is
    rejected outright; these limits are at or below them."""

    max_query_chars: int = Field(
        default=2000,
        ge=32,
        le=MAX_QUERY_CHARS,
        description="longer queries and tasks are cut at a word boundary (with a note); no "
        "store ever receives a longer query",
    )
    max_write_chars: int = Field(
        default=MAX_CONTENT_CHARS,
        ge=1,
        le=MAX_CONTENT_CHARS,
        description="longer memory content is rejected, nothing written",
    )
    max_labels: int = Field(
        default=MAX_LIST_ITEMS,
        ge=0,
        le=MAX_LIST_ITEMS,
        description="most entities, and most tags, on one write; more is rejected",
    )
    max_label_chars: int = Field(
        default=MAX_LABEL_CHARS,
        ge=1,
        le=MAX_LABEL_CHARS,
        description="longest entity name, tag or source on a write; longer is rejected",
    )
    max_seed_ids: int = Field(
        default=MAX_IDS, ge=1, le=MAX_IDS, description="most seed ids on one expand request"
    )


class Settings(BaseSettings):
    """All settings of the orchestrator (see module docstring for precedence)."""

    model_config = SettingsConfigDict(
        env_prefix="ORCHESTRATOR_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_assignment=True,
    )

    backend: str = Field(default="embedded", description="store to use (see `backends`)")
    data_dir: Annotated[Path, AfterValidator(_dir_path)] = Field(default_factory=default_data_dir)
    passthrough: bool = Field(
        default=False, description="search returns the store's raw results unchanged"
    )
    cache_ttl_s: float = Field(default=30.0, ge=0, description="store metadata cache lifetime")
    preset: str | None = Field(
        default=None, description="named tuned values (see `presets.py`); explicit settings win"
    )
    embedded: EmbeddedSettings = Field(default_factory=EmbeddedSettings)
    mnemon: MnemonSettings = Field(default_factory=MnemonSettings)
    mnemon_mcp: MnemonMcpSettings = Field(default_factory=MnemonMcpSettings)
    kg_memory: KgMemorySettings = Field(default_factory=KgMemorySettings)
    mnemonic: MnemonicSettings = Field(default_factory=MnemonicSettings)
    fused: FusedSettings = Field(default_factory=FusedSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    expansion: ExpansionSettings = Field(default_factory=ExpansionSettings)
    ranking: RankingSettings = Field(default_factory=RankingSettings)
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

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        return apply_preset(data) if isinstance(data, dict) else data

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

    def trace_path(self) -> Path:
        return self.traces.path or self.data_dir / "traces.db"

    def outbox_path(self) -> Path:
        return self.outbox.path or self.data_dir / "outbox.db"


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
    """Build settings from defaults, the TOML file, the environment and `overrides`."""
    path = find_config(config)
    token = _config_file.set(path)
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    finally:
        _config_file.reset(token)
