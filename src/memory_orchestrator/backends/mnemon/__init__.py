"""Mnemon (github.com/mnemon-dev/mnemon) behind `MemoryBackend`, through its `mnemon` CLI.

Written to Mnemon's CLI contract (v0.2.9; `../shared/reference/mnemon-cli.md`). The parts:
- `process`: running `mnemon` (one process per command, no shell, `--` before free text, a
  timeout per process, writes serialized per store, "database is locked" retried, the
  embedding probe pointed at an address that fails at once);
- `features`: what the installed build can do, from `mnemon --version`;
- `store_file`: where the store lives and the reads that need no process;
- `mapping`: Mnemon's records <-> `Memory`, `NewMemory`, outcomes;
- `backend`: `MnemonBackend`, which puts them together.

Operations:
- `search`: `recall --verbose` (its keyword, entity, similarity and graph signals). Recall
  always mixes in the ~20 newest memories as "anchors", relevant or not; results with no
  keyword, entity or similarity signal (anchors, and nodes reached only by walking from them)
  are dropped: the orchestrator expands along the graph itself, with its own recorded
  decisions. A memory-type filter becomes `--cat` where it maps to one category, and is
  applied here otherwise.
- `get_memories`, `neighbors`, `known_entities`: read straight from the store file when
  `direct_reads` is on and its schema is known (no process, no access counters bumped).
  Otherwise: `show` per id (in parallel) or one `recall "" --basic` listing on builds without
  `show`; `related` per seed (breadth-first, no limit in Mnemon: capped here); `status` top
  entities.
- `write`: `remember` (category, importance, tags, entities, source); a memory with its own
  `created_at` goes through a one-row `import`, since `remember` has no time flag.
  `added` / `updated` / `skipped` are mapped as Mnemon reports them (a skip names the kept
  memory, not Mnemon's fresh, never-stored id).
- `list_memories`: pages of every memory in insertion order, from the store file (nothing is
  listed without direct reads).
- `write_many`: `import` (one process per 1,000 memories). `link`: `link --type --weight
  --meta`. `forget`: `forget`. `health`: the binary, `--version`, `status`, the store file.

Relations: Mnemon's own edge types pass through; the orchestrator's `related` becomes
`entity` (kept as is when Mnemon already linked the pair) and `update` becomes `supersedes`;
any other name becomes `semantic` with the name in the edge metadata. Metadata other than
strings is stored as text.
"""

from memory_orchestrator.backends.mnemon.backend import MnemonBackend, from_settings
from memory_orchestrator.backends.mnemon.features import MnemonVersion
from memory_orchestrator.backends.mnemon.mapping import (
    category_and_tags,
    check_new,
    importance_in,
    importance_out,
    to_memory,
)
from memory_orchestrator.backends.mnemon.process import (
    FAIL_FAST_ENDPOINT,
    INSTALL_HINT,
    MnemonTimeout,
    find_binary,
)

__all__ = [
    "FAIL_FAST_ENDPOINT",
    "INSTALL_HINT",
    "MnemonBackend",
    "MnemonTimeout",
    "MnemonVersion",
    "category_and_tags",
    "check_new",
    "find_binary",
    "from_settings",
    "importance_in",
    "importance_out",
    "to_memory",
]
