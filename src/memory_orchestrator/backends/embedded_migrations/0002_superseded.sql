-- A memory a later one corrected: which one, and when the correction took effect
-- (pipeline/conflicts.py; the `supersede` ability).
ALTER TABLE memories ADD COLUMN superseded_by TEXT;
ALTER TABLE memories ADD COLUMN superseded_at INTEGER;
