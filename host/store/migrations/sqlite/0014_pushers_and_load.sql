-- Who pushed each module version: a user's name, or which kind of token
-- (empty for versions pushed before this was recorded).
ALTER TABLE module_version ADD COLUMN pushed_by TEXT NOT NULL DEFAULT '';
-- How loaded each executor said it was at its last heartbeat.
ALTER TABLE registry ADD COLUMN busy BIGINT;
ALTER TABLE registry ADD COLUMN free_slots BIGINT;
-- What a run used: fuel (with a budget) and its instance's peak memory.
ALTER TABLE run ADD COLUMN fuel_consumed BIGINT;
ALTER TABLE run ADD COLUMN peak_memory_bytes BIGINT;
-- The dashboard counts the runs of the last day by outcome, and the week's
-- failures by job: an index holding what it counts answers without reading
-- the rows (retention's deletes use it the same way).
DROP INDEX run_by_created;
CREATE INDEX run_by_created ON run (created_at_ms, status, tenant, job_id);
-- A job's schedule rules: window, excluded dates, jitter (JSON).
ALTER TABLE job ADD COLUMN schedule_rules TEXT NOT NULL DEFAULT '{}';
-- A job paused with a note: who, why, since and until when (JSON), and the
-- end of the pause apart, for clearing the ended ones.
ALTER TABLE job ADD COLUMN pause TEXT;
ALTER TABLE job ADD COLUMN pause_until_ms BIGINT;
-- Backfills: a job's schedule run over a past range on request, a few
-- instants a second; next_ms is how far it has written.
CREATE TABLE backfill (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant         TEXT    NOT NULL,
    job_id         BIGINT  NOT NULL,
    from_ms        BIGINT  NOT NULL,
    to_ms          BIGINT  NOT NULL,
    per_second     BIGINT  NOT NULL,
    planned        BIGINT  NOT NULL,
    written        BIGINT  NOT NULL DEFAULT 0,
    next_ms        BIGINT  NOT NULL,
    status         TEXT    NOT NULL,
    created_by     TEXT    NOT NULL,
    created_at_ms  BIGINT  NOT NULL
);
CREATE INDEX backfill_by_job ON backfill (job_id, id);
-- Each instant of a job is backfilled once, however many backfills cover it.
CREATE UNIQUE INDEX run_backfilled_once ON run (job_id, scheduled_at_ms, shard_index)
    WHERE kind = 'backfill';
-- Calendars a tenant's jobs share: named lists of excluded dates (JSON).
CREATE TABLE calendar (
    tenant         TEXT    NOT NULL,
    name           TEXT    NOT NULL,
    dates          TEXT    NOT NULL,
    updated_at_ms  BIGINT  NOT NULL,
    PRIMARY KEY (tenant, name)
);
