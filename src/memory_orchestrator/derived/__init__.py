"""Indexes the orchestrator derives from the store and owns (caches, never the truth).

- `local_index`: BM25 over each memory and its neighbours in time;
- `semantic`: an embedding index (optional extra), over a model of `embedders`, its vectors
  kept on disk by `vectors`;
- `feed`: pulls what the store added since the last pull into both;
- `indexes`: the pair kept in step with the store, and their candidate lists for a query;
- `entities`: the store's entity names, cached for the planner.
"""
