"""The state kept beside the store: what the orchestrator itself writes down.

    traces.py         the trace store (SQLite; written behind the request by a writer thread)
    outbox.py         writes the store could not take yet, replayed later, delivered once
    forgotten.py      the memories forgotten through the orchestrator (tombstones)
    tokens.py         bearer tokens (hashes only), HTTP settings, the access decision
    observability.py  structured logs, Prometheus metrics, per-tool stats, the one percentile
    shared.py         local files or one shared PostgreSQL (`[shared]`), chosen by settings

None of these modules imports the service, a face or a backend; the PostgreSQL versions of
the traces, the outbox, the tombstones and the tokens live in `memory_orchestrator.postgres`.
"""
