-- Workflows: a tenant's named definitions (the latest version of each),
-- their runs (each keeping the definition it started with) and the
-- runs' nodes. A node moves from pending to running in the transaction
-- that writes its run, once (the update is conditional on its status),
-- so admins advancing the same workflow run never start a node twice.
CREATE TABLE workflow (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant         TEXT    NOT NULL,
    name           TEXT    NOT NULL,
    version        BIGINT  NOT NULL,
    definition     TEXT    NOT NULL,
    -- When its schedule starts it next (NULL: no schedule, or ended).
    next_fire_at_ms BIGINT,
    created_at_ms  BIGINT  NOT NULL,
    updated_at_ms  BIGINT  NOT NULL,
    UNIQUE (tenant, name)
);
CREATE INDEX workflow_by_next_fire ON workflow (next_fire_at_ms);

CREATE TABLE workflow_run (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant         TEXT    NOT NULL,
    workflow_id    BIGINT  NOT NULL,
    workflow_name  TEXT    NOT NULL,
    version        BIGINT  NOT NULL,
    definition     TEXT    NOT NULL,
    input          TEXT    NOT NULL,
    kind           TEXT    NOT NULL,
    status         TEXT    NOT NULL,
    started_at_ms  BIGINT  NOT NULL,
    deadline_at_ms BIGINT,
    ended_at_ms    BIGINT
);
CREATE INDEX workflow_run_by_workflow ON workflow_run (workflow_id, id);
-- The running ones, which the admins look over for steps nobody took.
CREATE INDEX workflow_run_by_status ON workflow_run (status);

CREATE TABLE workflow_node (
    workflow_run_id  BIGINT  NOT NULL,
    node             TEXT    NOT NULL,
    position         BIGINT  NOT NULL,
    status           TEXT    NOT NULL,
    run_id           BIGINT,
    input            TEXT,
    output           TEXT,
    message          TEXT,
    started_at_ms    BIGINT,
    ended_at_ms      BIGINT,
    PRIMARY KEY (workflow_run_id, node)
);
CREATE INDEX workflow_node_by_run ON workflow_node (run_id);
