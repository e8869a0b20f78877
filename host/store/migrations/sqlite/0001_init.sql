-- cronbox admin schema (SQLite). Times are milliseconds since the Unix
-- epoch (UTC). Every row is owned by a tenant.

CREATE TABLE executor_group (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant        TEXT    NOT NULL DEFAULT 'default',
    name          TEXT    NOT NULL,
    address_type  TEXT    NOT NULL DEFAULT 'AUTO',
    addresses     TEXT    NOT NULL DEFAULT '',
    UNIQUE (tenant, name)
);

CREATE TABLE registry (
    group_name     TEXT    NOT NULL,
    address        TEXT    NOT NULL,
    updated_at_ms  INTEGER NOT NULL,
    PRIMARY KEY (group_name, address)
);

CREATE TABLE module (
    digest         TEXT    PRIMARY KEY,
    tenant         TEXT    NOT NULL DEFAULT 'default',
    size           INTEGER NOT NULL,
    content        BLOB    NOT NULL,
    created_at_ms  INTEGER NOT NULL
);

CREATE TABLE job (
    id                    INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant                TEXT    NOT NULL DEFAULT 'default',
    group_name            TEXT    NOT NULL,
    name                  TEXT    NOT NULL,
    module_digest         TEXT    NOT NULL,
    schedule_type         TEXT    NOT NULL,
    schedule_conf         TEXT    NOT NULL DEFAULT '',
    time_zone             TEXT    NOT NULL DEFAULT 'UTC',
    misfire               TEXT    NOT NULL DEFAULT 'DO_NOTHING',
    misfire_threshold_ms  INTEGER NOT NULL DEFAULT 5000,
    route                 TEXT    NOT NULL DEFAULT 'FIRST',
    block_strategy        TEXT    NOT NULL DEFAULT 'SERIAL_EXECUTION',
    max_concurrency       INTEGER NOT NULL DEFAULT 1,
    timeout_ms            INTEGER NOT NULL DEFAULT 60000,
    fuel                  INTEGER,
    memory_bytes          INTEGER NOT NULL DEFAULT 67108864,
    retry_count           INTEGER NOT NULL DEFAULT 0,
    retry_interval_ms     INTEGER NOT NULL DEFAULT 0,
    children              TEXT    NOT NULL DEFAULT '',
    param                 TEXT    NOT NULL DEFAULT '',
    enabled               INTEGER NOT NULL DEFAULT 0,
    next_fire_at_ms       INTEGER,
    created_at_ms         INTEGER NOT NULL,
    updated_at_ms         INTEGER NOT NULL
);
CREATE INDEX job_due ON job (enabled, next_fire_at_ms);

CREATE TABLE run (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant            TEXT    NOT NULL DEFAULT 'default',
    job_id            INTEGER NOT NULL,
    kind              TEXT    NOT NULL,
    scheduled_at_ms   INTEGER NOT NULL,
    shard_index       INTEGER NOT NULL DEFAULT 0,
    shard_total       INTEGER NOT NULL DEFAULT 1,
    attempt           INTEGER NOT NULL DEFAULT 0,
    param             TEXT    NOT NULL DEFAULT '',
    status            TEXT    NOT NULL,
    executor          TEXT,
    module_digest     TEXT    NOT NULL,
    outcome           TEXT,
    code              INTEGER,
    message           TEXT,
    log               TEXT,
    created_at_ms     INTEGER NOT NULL,
    dispatched_at_ms  INTEGER,
    started_at_ms     INTEGER,
    finished_at_ms    INTEGER
);
-- One fire per (job, scheduled time, shard): a double fire is impossible.
CREATE UNIQUE INDEX run_fires_once ON run (job_id, scheduled_at_ms, shard_index)
    WHERE kind IN ('schedule', 'misfire');
CREATE INDEX run_by_status ON run (status);
CREATE INDEX run_by_job ON run (job_id, id);

CREATE TABLE job_state (
    job_id  INTEGER NOT NULL,
    key     TEXT    NOT NULL,
    value   TEXT    NOT NULL,
    PRIMARY KEY (job_id, key)
);

CREATE TABLE daily_report (
    tenant   TEXT    NOT NULL,
    day      TEXT    NOT NULL,
    success  INTEGER NOT NULL DEFAULT 0,
    failed   INTEGER NOT NULL DEFAULT 0,
    running  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, day)
);
