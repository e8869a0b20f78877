-- Legacy groups: executor groups whose executors are xxl-job executors
-- (Java @XxlJob handlers, pyxxl, the Go executor), driven over xxl-job's
-- own protocol. `legacy_protocol` is the release line they speak
-- ('xxl-job-3.4' or 'xxl-job-3.5'; NULL: a group of cronbox executors),
-- `legacy_token` the access token they and the admin present (xxl-job's
-- `access_token`; never answered by the API).
ALTER TABLE executor_group ADD COLUMN legacy_protocol TEXT;
ALTER TABLE executor_group ADD COLUMN legacy_token TEXT;

-- A legacy job names the handler it runs on its executors (xxl-job's
-- `executor_handler`) instead of a module: its `module_digest` is ''.
ALTER TABLE job ADD COLUMN executor_handler TEXT;

-- The job's revision moves with its handler too (0020_job_revision.sql).
DROP TRIGGER job_revised;
CREATE TRIGGER job_revised AFTER UPDATE OF tenant, group_name, name, module_digest,
    schedule_type, schedule_conf, time_zone, misfire, misfire_threshold_ms, route,
    block_strategy, max_concurrency, timeout_ms, fuel, memory_bytes, retry_count,
    retry_interval_ms, param, enabled, module_name, module_version, alarm_url,
    fresh_instance, config, http, secrets, schedule_rules, pause, executor_handler ON job
BEGIN
    UPDATE job SET revision = OLD.revision + 1 WHERE id = NEW.id;
END;
