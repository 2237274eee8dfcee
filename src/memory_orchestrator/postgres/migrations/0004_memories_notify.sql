-- Every committed change to `memories` is announced on one channel (LISTEN/NOTIFY), with the
-- schema it happened in as the payload: each replica's derived indexes pull another
-- replica's writes as they commit instead of at their next polling interval
-- (`postgres/changes.py`). A statement-level trigger, so a write of many rows is one notice;
-- PostgreSQL delivers it at commit and folds equal notices of one transaction into one.
CREATE FUNCTION memories_changed_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('memory_orchestrator_memories', TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$;
CREATE TRIGGER memories_changed AFTER INSERT OR UPDATE OR DELETE ON memories
    FOR EACH STATEMENT EXECUTE FUNCTION memories_changed_notify();
