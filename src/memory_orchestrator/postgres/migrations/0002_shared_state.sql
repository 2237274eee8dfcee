-- State that replicas share when `[shared] state = "postgres"`: the write outbox, the traces
-- and the bearer tokens.
CREATE TABLE outbox (
    seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    request      text NOT NULL,
    content_hash text NOT NULL,
    state        text NOT NULL DEFAULT 'pending',
    queued_at    text NOT NULL,
    reason       text NOT NULL,
    attempts     integer NOT NULL DEFAULT 0,
    last_error   text,
    delivered_at text,
    memory_id    text,
    action       text
);
CREATE INDEX outbox_state ON outbox (state, seq);

CREATE TABLE traces (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    trace_id   text UNIQUE NOT NULL,
    tool       text,
    created_at text,
    body       text NOT NULL
);

CREATE TABLE http_tokens (
    name       text PRIMARY KEY,
    spec       jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
