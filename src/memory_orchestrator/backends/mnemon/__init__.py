"""Mnemon (github.com/mnemon-dev/mnemon) behind `MemoryBackend`, through its `mnemon` CLI.

Written to Mnemon's CLI contract (v0.2.9; `../shared/reference/mnemon-cli.md`) and tested on
a real build (the June 2026 source in `../shared/mnemon`). What a build can do is learned from
what it does, never from its version string. The parts:
- `process`: running `mnemon` (one process per command, no shell, `--` before free text, a
  timeout per process, writes serialized per store, "database is locked" retried, the
  embedding probe pointed at an address that fails at once);
- `features`: what the installed build lacks, learned from its answers (`unknown command
  "show"`, `invalid edge type "supersedes"`, ...); `--version` only for health;
- `store_file`: where the store lives and the reads that need no process (by id, the graph
  walk, entity names, the listing, byte-identical copies, the correction marks);
- `writing`: remember, import, link and supersede (every write with `--no-diff`: the
  orchestrator's deduplicator decides, Mnemon's never replaces a memory);
- `readonly`: `readonly = true` (writes refused by the adapter; a build whose `--readonly`
  writes reads a snapshot instead);
- `mapping`: Mnemon's records <-> `Memory`, `NewMemory`, outcomes;
- `backend`: `MnemonBackend`, which puts them together.

Operations:
- `search`: `recall --verbose` (its keyword, entity, similarity and graph signals). Recall
  always mixes in the ~20 newest memories as "anchors", relevant or not; results with no
  keyword, entity or similarity signal (anchors, and nodes reached only by walking from them)
  are dropped: the orchestrator expands along the graph itself, with its own recorded
  decisions. A memory-type filter becomes `--cat` where it maps to one category, and is
  applied here otherwise.
- `get_memories`, `neighbors`, `known_entities`, `list_memories`: read straight from the
  store file when `direct_reads` is on and its schema is known (no process, no access
  counters bumped), with each memory's correction mark (`superseded_by`). Otherwise: `show`
  per id (one `recall "" --basic` listing on builds without `show`), `related` per seed,
  `status` top entities; nothing is listed.
- `write` / `write_many`: `remember` / `import` (one process per 1,000), with `--no-diff`;
  a byte-identical copy of a current memory is skipped by the adapter (the answer names it);
  a memory with its own `created_at` goes through a one-row `import`.
- `link`: `link --type --weight --meta`. `supersede(old, new)`: a `supersedes` edge, or on
  builds without that type a `semantic` edge naming the corrected memory in its metadata;
  the old memory stays (history). `forget`: `forget`. `health`: the binary, `--version`,
  `status`, the store file, the fallbacks in use.

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
