-- Memories forgotten through the orchestrator (`memory_forget`, `orchestrator forget`): the
-- tombstones every replica's reads honour (`state/forgotten.py`, `postgres/state.py`). One
-- version row moves with every change, so a replica reads the ids again only when it moved.
CREATE TABLE forgotten (
    memory_id    text PRIMARY KEY,
    store        text NOT NULL,
    reason       text NOT NULL,
    forgotten_at timestamptz NOT NULL,
    purged_at    timestamptz
);

CREATE TABLE forgotten_version (
    one     boolean PRIMARY KEY DEFAULT true CHECK (one),
    version bigint NOT NULL
);
INSERT INTO forgotten_version (one, version) VALUES (true, 0);
