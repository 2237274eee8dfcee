"""The embedded store's schema migrations: `NNNN_name.sql`, applied in order by
`embedded_sql.migrate` (see `memory_orchestrator.migrations`). A file, once released, is
never edited: a change of schema is a new file."""
