"""The one settings model.

Precedence, highest first: values passed in code or by CLI flags (`--backend`), environment
variables (`ORCHESTRATOR_...`, `__` between nested names, e.g.
`ORCHESTRATOR_RETRIEVAL__TOP_K=5`), the TOML file (`--config PATH`, else `$ORCHESTRATOR_CONFIG`,
else `./orchestrator.toml` when it exists), then the defaults below.
Only the entry points (CLI, MCP server, eval) build settings; the core receives them.

The package: `base` (checked paths and names), `stores` (one section per store), `tuning`
(the pipeline's sections), `profile` (the ranking profile: every coefficient of the order),
`root` (the `Settings` model and `load_settings`).
"""

from memory_orchestrator.settings.base import (
    MAX_STORE_NAME_CHARS,
    MNEMON_STORE_NAME,
    DirPath,
    FilePath,
    Section,
    StoreName,
    check_store_name,
    default_data_dir,
)
from memory_orchestrator.settings.profile import RankingProfile, Weights
from memory_orchestrator.settings.root import (
    Settings,
    find_config,
    load_settings,
)
from memory_orchestrator.settings.stores import (
    EmbeddedSettings,
    FusedSettings,
    FusedStore,
    KgMemorySettings,
    MnemonicSettings,
    MnemonMcpSettings,
    MnemonSettings,
    NpmServerSettings,
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

__all__ = [
    "MAX_STORE_NAME_CHARS",
    "MNEMON_STORE_NAME",
    "DedupSettings",
    "DirPath",
    "EmbeddedSettings",
    "ExpansionSettings",
    "FilePath",
    "FusedSettings",
    "FusedStore",
    "KgMemorySettings",
    "LimitsSettings",
    "LocalIndexSettings",
    "MnemonMcpSettings",
    "MnemonSettings",
    "MnemonicSettings",
    "NpmServerSettings",
    "OutboxSettings",
    "PackagingSettings",
    "RankingProfile",
    "RetrievalSettings",
    "RetrySettings",
    "Section",
    "SemanticSettings",
    "Settings",
    "SharedProcessSettings",
    "StoreName",
    "TraceSettings",
    "Weights",
    "WriteSettings",
    "check_store_name",
    "default_data_dir",
    "find_config",
    "load_settings",
]
