-- The embedded store: memories, their full-text index, the entity index and typed, weighted
-- edges. Times are integer microseconds since the epoch (UTC); a forgotten memory keeps its
-- row with deleted_at set. (Schema version 1, as the first files were made.)
CREATE TABLE memories (
    rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, content TEXT NOT NULL,
    type TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, source TEXT,
    importance REAL, confidence REAL, entities TEXT NOT NULL DEFAULT '[]',
    tags TEXT NOT NULL DEFAULT '[]', metadata TEXT NOT NULL DEFAULT '{}',
    content_hash TEXT NOT NULL, deleted_at INTEGER);
CREATE INDEX memories_hash ON memories(content_hash) WHERE deleted_at IS NULL;
CREATE INDEX memories_time ON memories(created_at) WHERE deleted_at IS NULL;
-- text already stemmed by memory_orchestrator.text: body = content + entities, ents = entities
CREATE VIRTUAL TABLE memories_fts USING fts5(body, ents, tokenize='unicode61');
CREATE VIRTUAL TABLE memories_vocab USING fts5vocab(memories_fts, row);
CREATE TABLE entities (
    key TEXT NOT NULL, memory_id TEXT NOT NULL, name TEXT NOT NULL,
    created_at INTEGER NOT NULL, PRIMARY KEY (key, memory_id)) WITHOUT ROWID;
CREATE INDEX entities_time ON entities(key, created_at);
CREATE INDEX entities_memory ON entities(memory_id);
CREATE TABLE edges (
    source_id TEXT NOT NULL, target_id TEXT NOT NULL, type TEXT NOT NULL, weight REAL NOT NULL,
    meta TEXT NOT NULL DEFAULT '{}', created_at INTEGER NOT NULL,
    PRIMARY KEY (source_id, target_id, type)) WITHOUT ROWID;
CREATE INDEX edges_target ON edges(target_id);
