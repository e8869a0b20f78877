-- The audit log: every change made through the user API and every login,
-- appended after its answer (api/audit.rs), kept for the configured
-- retention (housekeeping), never changed through the API. It holds names
-- and ids, never a secret's value, a password or a token.
CREATE TABLE audit (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms       INTEGER NOT NULL,
    tenant      TEXT NOT NULL,
    actor       TEXT NOT NULL,
    role        TEXT,
    token_id    INTEGER,
    action      TEXT NOT NULL,
    target      TEXT NOT NULL,
    status      INTEGER NOT NULL,
    address     TEXT,
    user_agent  TEXT,
    detail      TEXT
);
CREATE INDEX audit_by_tenant ON audit (tenant, id);
CREATE INDEX audit_by_time ON audit (at_ms);
