-- A job's id in the xxl-job install it came from (set by the import and by
-- xxl-job 3.5's job API, which finds jobs by it): unique in its group.
ALTER TABLE job ADD COLUMN xxl_job_id BIGINT;
CREATE UNIQUE INDEX job_xxl_job_id ON job (group_name, xxl_job_id)
    WHERE xxl_job_id IS NOT NULL;

-- The job's revision moves with it too (0020_job_revision.sql).
DROP TRIGGER job_revised ON job;
CREATE TRIGGER job_revised BEFORE UPDATE OF tenant, group_name, name, module_digest,
    schedule_type, schedule_conf, time_zone, misfire, misfire_threshold_ms, route,
    block_strategy, max_concurrency, timeout_ms, fuel, memory_bytes, retry_count,
    retry_interval_ms, param, enabled, module_name, module_version, alarm_url,
    fresh_instance, config, http, secrets, schedule_rules, pause, executor_handler,
    xxl_job_id ON job
FOR EACH ROW EXECUTE FUNCTION job_revise();
