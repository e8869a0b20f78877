//! A job's definition as its row stores it: the one list of its columns,
//! the insert and update statements built from it, and the one helper that
//! binds a job's values in that order (JSON columns written without
//! defaults: a value that cannot be written is an error naming its column).

use std::sync::LazyLock;

use super::*;

/// The columns of a job's definition (what saving a job writes), in the
/// order [`bind_definition`] binds them: one list for the insert and the
/// update.
const DEFINITION_COLUMNS: [&str; 27] = [
    "group_name",
    "name",
    "module_digest",
    "schedule_type",
    "schedule_conf",
    "time_zone",
    "misfire",
    "misfire_threshold_ms",
    "route",
    "block_strategy",
    "max_concurrency",
    "timeout_ms",
    "fuel",
    "memory_bytes",
    "retry_count",
    "retry_interval_ms",
    "param",
    "module_name",
    "module_version",
    "alarm_url",
    "fresh_instance",
    "config",
    "http",
    "secrets",
    "schedule_rules",
    "executor_handler",
    "xxl_job_id",
];

/// A job's row written whole: its definition, then `next_fire_at_ms`,
/// `tenant`, `enabled` and the time (created and updated).
pub(super) static INSERT_JOB: LazyLock<String> = LazyLock::new(|| {
    let count = DEFINITION_COLUMNS.len();
    format!(
        "INSERT INTO job ({}, next_fire_at_ms, tenant, enabled, created_at_ms, updated_at_ms) \
         VALUES ({}, ${}, ${}, ${}, ${}, ${}) RETURNING id",
        DEFINITION_COLUMNS.join(", "),
        placeholders(count),
        count + 1,
        count + 2,
        count + 3,
        count + 4,
        count + 4,
    )
});

/// A job's definition replaced: then `next_fire_at_ms`, the time, and the
/// job's id.
pub(super) static UPDATE_JOB: LazyLock<String> = LazyLock::new(|| {
    let count = DEFINITION_COLUMNS.len();
    let sets: Vec<String> = DEFINITION_COLUMNS
        .iter()
        .enumerate()
        .map(|(index, column)| format!("{column} = ${}", index + 1))
        .collect();
    format!(
        "UPDATE job SET {}, next_fire_at_ms = ${}, updated_at_ms = ${} WHERE id = ${}",
        sets.join(", "),
        count + 1,
        count + 2,
        count + 3,
    )
});

/// `query` with a job's definition bound, in [`DEFINITION_COLUMNS`]'
/// order. A value that cannot be written as its column's JSON is an error
/// naming the column, never a default written in its place.
pub(super) fn bind_definition<'q>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    job: &JobRow,
) -> Result<sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>, StoreError> {
    let http = serde_json::json!({"allow": job.http_allow, "limits": job.http_limits});
    Ok(query
        .bind(job.group_name.clone())
        .bind(job.name.clone())
        .bind(job.module_digest.clone())
        .bind(job.schedule_type.as_str())
        .bind(job.schedule_conf.clone())
        .bind(job.time_zone.clone())
        .bind(job.misfire.as_str())
        .bind(job.misfire_threshold_ms)
        .bind(job.route.as_str())
        .bind(job.block_strategy.as_str())
        .bind(job.max_concurrency)
        .bind(job.timeout_ms)
        .bind(job.fuel)
        .bind(job.memory_bytes)
        .bind(job.retry_count)
        .bind(job.retry_interval_ms)
        .bind(job.param.clone())
        .bind(job.module_name.clone())
        .bind(job.module_version)
        .bind(job.alarm_url.clone())
        .bind(i64::from(job.fresh_instance))
        .bind(json_text("config", &job.config)?)
        .bind(json_text("http", &http)?)
        .bind(json_text("secrets", &job.secrets)?)
        .bind(json_text("schedule_rules", &job.schedule_rules)?)
        .bind(job.executor_handler.clone())
        .bind(job.xxl_job_id))
}
