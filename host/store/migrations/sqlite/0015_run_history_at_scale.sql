-- Daily reports counted as runs end, not recounted from the run table: a
-- run that ends (or is written ended) leaves a row +1 of its status in
-- run_end, in the transaction that ends it (a cancelled run whose result
-- comes after all leaves -1 cancelled, +1 of how it ended); housekeeping folds these rows into
-- daily_report and deletes them. A day's report so stays exact after
-- retention deletes its runs, and no pass reads a day's runs again.
CREATE TABLE run_end (
    id      INTEGER PRIMARY KEY,
    tenant  TEXT    NOT NULL,
    day     TEXT    NOT NULL,
    status  TEXT    NOT NULL,
    delta   INTEGER NOT NULL
);

CREATE TRIGGER run_ended AFTER UPDATE OF status ON run
WHEN OLD.status <> NEW.status AND NEW.status NOT IN ('pending', 'dispatched')
BEGIN
    INSERT INTO run_end (tenant, day, status, delta)
    VALUES (NEW.tenant, strftime('%Y-%m-%d', NEW.created_at_ms / 1000, 'unixepoch'), NEW.status, 1);
END;

CREATE TRIGGER run_ended_otherwise AFTER UPDATE OF status ON run
WHEN OLD.status <> NEW.status AND OLD.status NOT IN ('pending', 'dispatched')
BEGIN
    INSERT INTO run_end (tenant, day, status, delta)
    VALUES (OLD.tenant, strftime('%Y-%m-%d', OLD.created_at_ms / 1000, 'unixepoch'), OLD.status, -1);
END;

CREATE TRIGGER run_written_ended AFTER INSERT ON run
WHEN NEW.status NOT IN ('pending', 'dispatched')
BEGIN
    INSERT INTO run_end (tenant, day, status, delta)
    VALUES (NEW.tenant, strftime('%Y-%m-%d', NEW.created_at_ms / 1000, 'unixepoch'), NEW.status, 1);
END;

-- The runs ended so far, counted once more (the last recount may be up to
-- a pass old); a day retention already thinned keeps its larger count.
INSERT INTO daily_report (tenant, day, success, failed, running, cancelled)
SELECT tenant, strftime('%Y-%m-%d', created_at_ms / 1000, 'unixepoch') AS day,
       SUM(CASE WHEN status = 'success' THEN 1 ELSE 0 END),
       SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END),
       SUM(CASE WHEN status IN ('pending', 'dispatched') THEN 1 ELSE 0 END),
       SUM(CASE WHEN status = 'cancelled' THEN 1 ELSE 0 END)
FROM run WHERE 1 = 1 GROUP BY tenant, day
ON CONFLICT (tenant, day) DO UPDATE SET
    success = MAX(daily_report.success, excluded.success),
    failed = MAX(daily_report.failed, excluded.failed),
    running = excluded.running,
    cancelled = MAX(daily_report.cancelled, excluded.cancelled);
