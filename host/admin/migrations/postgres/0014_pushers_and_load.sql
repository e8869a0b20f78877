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
