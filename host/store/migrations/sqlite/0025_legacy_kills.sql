-- Kills of legacy runs in progress: the admin that asks a legacy executor
-- to kill a run writes the run here first, so that the handler's failure,
-- which the executor may report to any admin of the cluster before the
-- kill is answered, ends the run as killed (not failed, and not retried).
-- The row goes once the kill has been answered.
CREATE TABLE legacy_kill (
    run_id BIGINT PRIMARY KEY,
    requested_at_ms BIGINT NOT NULL
);
