-- Run receipts: a secret shared by every admin of this database, with
-- which each dispatched run gets a receipt its result must carry back.
CREATE TABLE admin_secret (
    name   TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);

-- Executor groups are known before a job may name them: the operator
-- configures them, or an executor registering creates its AUTO group.
INSERT INTO executor_group (tenant, name, address_type, addresses)
    VALUES ('default', 'default', 'AUTO', '')
    ON CONFLICT (tenant, name) DO NOTHING;
INSERT INTO executor_group (tenant, name, address_type, addresses)
    SELECT DISTINCT 'default', group_name, 'AUTO', '' FROM job WHERE true
    ON CONFLICT (tenant, name) DO NOTHING;
INSERT INTO executor_group (tenant, name, address_type, addresses)
    SELECT DISTINCT 'default', group_name, 'AUTO', '' FROM registry WHERE true
    ON CONFLICT (tenant, name) DO NOTHING;

-- The revision of each state key: the run whose commit wrote it last
-- (negative: an operator's edit; keys older than revisions get -1).
ALTER TABLE job_state ADD COLUMN revision INTEGER NOT NULL DEFAULT -1;

-- A job may ask for a fresh instance per run.
ALTER TABLE job ADD COLUMN fresh_instance INTEGER NOT NULL DEFAULT 0;

-- Cancelled runs (a stopped or killed job's waiting fires) are counted
-- apart from failures.
ALTER TABLE daily_report ADD COLUMN cancelled INTEGER NOT NULL DEFAULT 0;

-- Runs of a job waiting to be dispatched (stop and kill cancel them).
CREATE INDEX run_pending_by_job ON run (job_id, status);
