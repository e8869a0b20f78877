-- Tenants and their API tokens (stored as sha256), module ownership and
-- named versions, jobs that follow or pin a module version, alarms.

CREATE TABLE tenant (
    name           TEXT    PRIMARY KEY,
    created_at_ms  INTEGER NOT NULL
);
INSERT INTO tenant (name, created_at_ms) VALUES ('default', 0);

CREATE TABLE api_token (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant         TEXT    NOT NULL,
    label          TEXT    NOT NULL DEFAULT '',
    token_hash     TEXT    NOT NULL UNIQUE,
    created_at_ms  INTEGER NOT NULL
);

-- Module content is shared by digest; which tenants uploaded it is here.
CREATE TABLE module_owner (
    tenant  TEXT NOT NULL,
    digest  TEXT NOT NULL,
    PRIMARY KEY (tenant, digest)
);
INSERT INTO module_owner (tenant, digest) SELECT tenant, digest FROM module;

CREATE TABLE module_version (
    tenant         TEXT    NOT NULL,
    name           TEXT    NOT NULL,
    version        INTEGER NOT NULL,
    digest         TEXT    NOT NULL,
    labels         TEXT    NOT NULL DEFAULT '',
    note           TEXT    NOT NULL DEFAULT '',
    created_at_ms  INTEGER NOT NULL,
    PRIMARY KEY (tenant, name, version)
);

ALTER TABLE job ADD COLUMN module_name TEXT;
ALTER TABLE job ADD COLUMN module_version INTEGER;
ALTER TABLE job ADD COLUMN alarm_url TEXT NOT NULL DEFAULT '';

-- none: no alarm due; due: to send; sending: claimed by an admin;
-- sent / failed: the webhook's outcome.
ALTER TABLE run ADD COLUMN alarm_status TEXT NOT NULL DEFAULT 'none';
ALTER TABLE run ADD COLUMN alarm_message TEXT;
ALTER TABLE run ADD COLUMN alarm_claimed_at_ms INTEGER;
CREATE INDEX run_alarms ON run (alarm_status);
