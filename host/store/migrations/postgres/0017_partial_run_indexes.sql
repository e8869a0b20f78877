-- Smaller run rows: three indexes only ever serve open runs (pending or
-- dispatched) and alarms still to send, yet held an entry for every run
-- kept. Partial now; each query they serve repeats the index's condition
-- word for word, which is how SQLite (and PostgreSQL, with bound
-- parameters) knows the index applies.
DROP INDEX run_by_status;
CREATE INDEX run_by_status ON run (status) WHERE status IN ('pending', 'dispatched');
DROP INDEX run_pending_by_job;
CREATE INDEX run_pending_by_job ON run (job_id, status) WHERE status IN ('pending', 'dispatched');
DROP INDEX run_alarms;
CREATE INDEX run_alarms ON run (alarm_status) WHERE alarm_status IN ('due', 'sending');
