-- The postgres store: memories, their entity index and typed, weighted edges.
-- Times are timestamptz (UTC); a forgotten memory keeps its row with deleted_at set.
CREATE TABLE memories (
    seq          bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id           text PRIMARY KEY,
    content      text NOT NULL,
    type         text NOT NULL,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    source       text,
    importance   double precision,
    confidence   double precision,
    entities     text[] NOT NULL DEFAULT '{}',
    tags         text[] NOT NULL DEFAULT '{}',
    metadata     jsonb NOT NULL DEFAULT '{}',
    content_hash text NOT NULL,
    deleted_at   timestamptz,
    -- full-text search, English configuration: entities weigh 'A', content 'D'
    search       tsvector NOT NULL,
    doc_len      integer NOT NULL,
    -- the transaction that last changed the row: the listing's change sequence
    changed_tx   xid8 NOT NULL DEFAULT pg_current_xact_id()
);
-- fastupdate off: a bulk load would otherwise sit in the pending list, which every search
-- scans in full (and the planner then prefers a sequential scan)
CREATE INDEX memories_search ON memories USING gin (search) WITH (fastupdate = off);
-- one live memory per content: a write of the same text from any replica is a duplicate
CREATE UNIQUE INDEX memories_live_hash ON memories (content_hash) WHERE deleted_at IS NULL;
CREATE INDEX memories_time ON memories (created_at, seq) WHERE deleted_at IS NULL;
CREATE INDEX memories_changes ON memories (changed_tx, seq);

CREATE TABLE entities (
    key        text NOT NULL,
    memory_id  text NOT NULL REFERENCES memories (id),
    name       text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (key, memory_id)
);
CREATE INDEX entities_time ON entities (key, created_at);
CREATE INDEX entities_memory ON entities (memory_id);

CREATE TABLE edges (
    source_id  text NOT NULL REFERENCES memories (id),
    target_id  text NOT NULL REFERENCES memories (id),
    type       text NOT NULL,
    weight     double precision NOT NULL CHECK (weight >= 0 AND weight <= 1),
    meta       jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL,
    PRIMARY KEY (source_id, target_id, type)
);
CREATE INDEX edges_target ON edges (target_id);
