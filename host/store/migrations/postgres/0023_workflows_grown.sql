-- Workflows grown: fanned-out nodes, overlap, FIX_DELAY and backfills.
--
-- A fanned-out workflow node's elements: one row per element of the
-- array it runs over, written with its rendered input when the node
-- starts. An element moves from pending to running in the transaction
-- that writes its run (conditional on its status), so admins filling the
-- node's concurrency never start one twice.
CREATE TABLE workflow_item (
    workflow_run_id  BIGINT  NOT NULL,
    node             TEXT    NOT NULL,
    idx              BIGINT  NOT NULL,
    status           TEXT    NOT NULL,
    run_id           BIGINT,
    input            TEXT    NOT NULL,
    output           TEXT,
    message          TEXT,
    started_at_ms    BIGINT,
    ended_at_ms      BIGINT,
    PRIMARY KEY (workflow_run_id, node, idx)
);
CREATE INDEX workflow_item_by_run ON workflow_item (run_id);

-- A workflow's schedule with overlap BUFFER_ONE: the fire that waits for
-- the runs in progress to end (its planned instant), if one does.
ALTER TABLE workflow ADD COLUMN buffered_fire_at_ms BIGINT;
-- The admins look for these every pass: only the few that wait are read.
CREATE INDEX workflow_buffered ON workflow (id) WHERE buffered_fire_at_ms IS NOT NULL;

-- A FIX_DELAY workflow schedule: the run whose end plans the next fire
-- (its next fire is NULL until then).
ALTER TABLE workflow ADD COLUMN delay_after_run BIGINT;
CREATE INDEX workflow_waiting ON workflow (delay_after_run) WHERE delay_after_run IS NOT NULL;

-- The schedule's instant a run was started for (a scheduled, late or
-- backfilled run; NULL for one started on request). A backfill runs an
-- instant once.
ALTER TABLE workflow_run ADD COLUMN fire_at_ms BIGINT;
CREATE UNIQUE INDEX workflow_run_backfilled ON workflow_run (workflow_id, fire_at_ms)
    WHERE kind = 'backfill';
