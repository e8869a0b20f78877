-- Enrolled executors: a credential per executor (or per fleet of one
-- kind), made by the operator, that lets its holder register only in its
-- groups, fetch only the modules of jobs routed there, and be sent runs
-- by admins that prove themselves with it (api/executor_tokens.rs). The
-- token is kept as its sha256; a rotation keeps the previous one working
-- until `previous_until_ms`; a revoked credential works no more and its
-- registrations are gone. The shared executor token is not stored here.
CREATE TABLE executor_credential (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    name               TEXT NOT NULL,
    groups             TEXT NOT NULL,
    token_hash         TEXT NOT NULL UNIQUE,
    previous_hash      TEXT,
    previous_until_ms  INTEGER,
    created_at_ms      INTEGER NOT NULL,
    rotated_at_ms      INTEGER,
    revoked_at_ms      INTEGER
);

-- Which credential an executor registered with (NULL: the shared token),
-- and what admins present to it (NULL: the shared token).
ALTER TABLE registry ADD COLUMN credential_id INTEGER;
ALTER TABLE registry ADD COLUMN admin_proof TEXT;
