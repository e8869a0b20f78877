//! Tenants' quotas: the limits an operator set for a tenant, and what each
//! tenant uses — counted from the tables it fills (jobs, module names and
//! bytes, open runs, state), or added up per UTC day as its runs end (run
//! time, log bytes).

use cronbox_api::{Quota, QuotaSettings};

use super::*;

/// Milliseconds in a day: usage per day is kept by `ms / DAY_MS` (UTC).
pub const DAY_MS: i64 = 86_400_000;

/// What a tenant uses now, of each quota the admin can count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TenantUsage {
    pub jobs: u64,
    pub modules: u64,
    pub module_bytes: u64,
    pub running_runs: u64,
    pub state_bytes: u64,
    /// Today's (UTC).
    pub run_ms: u64,
    /// Today's (UTC).
    pub log_bytes: u64,
    pub workflow_runs: u64,
    pub workflow_items: u64,
    pub backfill_runs: u64,
}

impl TenantUsage {
    /// The usage of `quota`; `None` for those the admin does not count (a
    /// shortest interval; instances, which each executor counts).
    pub fn of(&self, quota: Quota) -> Option<u64> {
        match quota {
            Quota::Jobs => Some(self.jobs),
            Quota::Modules => Some(self.modules),
            Quota::ModuleBytes => Some(self.module_bytes),
            Quota::RunningRuns => Some(self.running_runs),
            Quota::StateBytes => Some(self.state_bytes),
            Quota::RunMsPerDay => Some(self.run_ms),
            Quota::LogBytesPerDay => Some(self.log_bytes),
            Quota::WorkflowRuns => Some(self.workflow_runs),
            Quota::WorkflowItems => Some(self.workflow_items),
            Quota::BackfillRuns => Some(self.backfill_runs),
            Quota::MinIntervalMs | Quota::ExecutorInstances => None,
        }
    }
}

/// Run time and log bytes of one tenant's runs that ended on one day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DayUsage {
    pub tenant: String,
    /// Days since the epoch (UTC).
    pub day: i64,
    pub run_ms: i64,
    pub log_bytes: i64,
}

/// SQL for the length of a text column in bytes (SQLite's `LENGTH` counts
/// characters).
fn byte_length(backend: Backend, column: &str) -> String {
    match backend {
        Backend::Sqlite => format!("LENGTH(CAST({column} AS BLOB))"),
        Backend::Postgres => format!("OCTET_LENGTH({column})"),
    }
}

/// A count or sum (`NULL` over no rows is 0). Sums are cast to BIGINT
/// in the SQL: PostgreSQL's SUM of BIGINT is NUMERIC.
fn count(row: &AnyRow, column: &str) -> Result<u64, StoreError> {
    let value: Option<i64> = row.try_get(column)?;
    Ok(u64::try_from(value.unwrap_or(0)).unwrap_or(0))
}

/// `tenant_quota` rows as each tenant's settings.
fn quota_settings(rows: &[AnyRow]) -> Result<HashMap<String, QuotaSettings>, StoreError> {
    let mut settings: HashMap<String, QuotaSettings> = HashMap::new();
    for row in rows {
        let tenant: String = row.try_get("tenant")?;
        let name: String = row.try_get("quota")?;
        let limit: i64 = row.try_get("quota_limit")?;
        // A quota this admin does not know (written by a newer one) is left
        // to that admin.
        if let Ok(quota) = name.parse::<Quota>() {
            settings
                .entry(tenant)
                .or_default()
                .set(quota, Some(u64::try_from(limit).unwrap_or(0)));
        }
    }
    Ok(settings)
}

/// The bytes of durable state (keys and values) of `tenant`'s jobs, read
/// on `connection` (inside a transaction that is about to add some).
pub(super) async fn state_bytes_on(
    connection: &mut sqlx::AnyConnection,
    backend: Backend,
    tenant: &str,
) -> Result<u64, StoreError> {
    let sql = format!(
        "SELECT CAST(SUM({} + {}) AS BIGINT) AS bytes FROM job_state \
         WHERE job_id IN (SELECT id FROM job WHERE tenant = $1)",
        byte_length(backend, "key"),
        byte_length(backend, "value"),
    );
    let row = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
        .bind(tenant)
        .fetch_one(&mut *connection)
        .await?;
    count(&row, "bytes")
}

/// The bytes of the given keys of the state of run `run_id`'s job now.
async fn key_bytes_on(
    connection: &mut sqlx::AnyConnection,
    backend: Backend,
    run_id: RunId,
    keys: &[&String],
) -> Result<u64, StoreError> {
    let mut total = 0;
    for chunk in keys.chunks(IN_LIST_CHUNK) {
        let sql = format!(
            "SELECT CAST(SUM({} + {}) AS BIGINT) AS bytes FROM job_state \
             WHERE job_id = (SELECT job_id FROM run WHERE id = $1) AND key IN ({})",
            byte_length(backend, "key"),
            byte_length(backend, "value"),
            (2..chunk.len() + 2)
                .map(|n| format!("${n}"))
                .collect::<Vec<_>>()
                .join(", "),
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.as_str())).bind(run_id);
        for key in chunk {
            query = query.bind(key.as_str());
        }
        total += count(&query.fetch_one(&mut *connection).await?, "bytes")?;
    }
    Ok(total)
}

/// Why `end`'s state changes may not be committed for `tenant` with a
/// state quota of `limit` bytes, if they may not: they would grow its
/// state past the limit (changes that shrink it, or keep it within, may).
pub(super) async fn state_over_quota(
    connection: &mut sqlx::AnyConnection,
    backend: Backend,
    end: &RunEnd,
    tenant: &str,
    limit: u64,
) -> Result<Option<String>, StoreError> {
    let keys: Vec<&String> = end.state_changes.keys().collect();
    let replaced = key_bytes_on(&mut *connection, backend, end.run_id, &keys).await?;
    let written: u64 = end
        .state_changes
        .iter()
        .filter_map(|(key, value)| value.as_ref().map(|value| (key.len() + value.len()) as u64))
        .sum();
    if written <= replaced {
        return Ok(None);
    }
    let now = state_bytes_on(&mut *connection, backend, tenant).await?;
    let after = now - replaced.min(now) + written;
    Ok((after > limit).then(|| {
        format!(
            "state not committed: quota state_bytes of tenant {tenant:?} exceeded: the run's \
             changes would make its jobs' state {after} bytes (limit {limit}); the run's changes \
             were dropped"
        )
    }))
}

impl Store {
    /// The quotas set for `tenant` (the others follow the defaults).
    pub async fn tenant_quotas(&self, tenant: &str) -> Result<QuotaSettings, StoreError> {
        let rows =
            sqlx::query("SELECT tenant, quota, quota_limit FROM tenant_quota WHERE tenant = $1")
                .bind(tenant)
                .fetch_all(&self.pool)
                .await?;
        Ok(quota_settings(&rows)?.remove(tenant).unwrap_or_default())
    }

    /// The quotas set for every tenant that has set some.
    pub async fn all_tenant_quotas(&self) -> Result<HashMap<String, QuotaSettings>, StoreError> {
        let rows = sqlx::query("SELECT tenant, quota, quota_limit FROM tenant_quota")
            .fetch_all(&self.pool)
            .await?;
        quota_settings(&rows)
    }

    /// Replaces the quotas set for `tenant`.
    pub async fn set_tenant_quotas(
        &self,
        tenant: &str,
        settings: &QuotaSettings,
    ) -> Result<(), StoreError> {
        let mut tx = self.writer.begin().await?;
        sqlx::query("DELETE FROM tenant_quota WHERE tenant = $1")
            .bind(tenant)
            .execute(&mut *tx)
            .await?;
        for (quota, limit) in settings.entries() {
            sqlx::query(
                "INSERT INTO tenant_quota (tenant, quota, quota_limit) VALUES ($1, $2, $3)",
            )
            .bind(tenant)
            .bind(quota.as_str())
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// What `tenant` uses now (run time and log bytes of day `day`).
    pub async fn tenant_usage(&self, tenant: &str, day: i64) -> Result<TenantUsage, StoreError> {
        self.tenant_usage_of(tenant, day, Quota::ALL).await
    }

    /// What a dispatch checks of `tenant`'s usage: its runs in progress,
    /// and run time and log bytes of day `day` (the rest left at 0). Two
    /// indexed queries, where [`Store::tenant_usage`] sums the tenant's
    /// jobs, modules and state too.
    pub async fn tenant_run_usage(
        &self,
        tenant: &str,
        day: i64,
    ) -> Result<TenantUsage, StoreError> {
        let runs = [
            Quota::RunningRuns,
            Quota::RunMsPerDay,
            Quota::LogBytesPerDay,
        ];
        self.tenant_usage_of(tenant, day, &runs).await
    }

    /// What `tenant` uses of `quotas` (the rest left at 0): only their
    /// queries run.
    pub async fn tenant_usage_of(
        &self,
        tenant: &str,
        day: i64,
        quotas: &[Quota],
    ) -> Result<TenantUsage, StoreError> {
        Ok(self
            .usage_of(Some(tenant), day, quotas)
            .await?
            .remove(tenant)
            .unwrap_or_default())
    }

    /// What each tenant uses now (run time and log bytes of day `day`).
    pub async fn usage_by_tenant(
        &self,
        day: i64,
    ) -> Result<HashMap<String, TenantUsage>, StoreError> {
        self.usage_of(None, day, Quota::ALL).await
    }

    /// What each tenant, or only `tenant`, uses of `quotas`: one grouped
    /// query per kind of usage.
    async fn usage_of(
        &self,
        tenant: Option<&str>,
        day: i64,
        quotas: &[Quota],
    ) -> Result<HashMap<String, TenantUsage>, StoreError> {
        let mut usage: HashMap<String, TenantUsage> = HashMap::new();
        // `AND <column> = $1` when one tenant is asked for.
        let only = |column: &str| match tenant {
            Some(_) => format!(" AND {column} = $1"),
            None => String::new(),
        };
        type Field = fn(&mut TenantUsage) -> &mut u64;
        for quota in quotas {
            let (sql, field): (String, Field) = match quota {
                Quota::Jobs => (
                    format!(
                        "SELECT tenant, COUNT(*) AS n FROM job WHERE 1 = 1{} GROUP BY tenant",
                        only("tenant")
                    ),
                    |usage| &mut usage.jobs,
                ),
                Quota::Modules => (
                    format!(
                        "SELECT tenant, COUNT(DISTINCT name) AS n FROM module_version \
                         WHERE 1 = 1{} GROUP BY tenant",
                        only("tenant")
                    ),
                    |usage| &mut usage.modules,
                ),
                Quota::ModuleBytes => (
                    format!(
                        "SELECT module_owner.tenant AS tenant, \
                         CAST(SUM(module.size) AS BIGINT) AS n \
                         FROM module_owner JOIN module ON module.digest = module_owner.digest \
                         WHERE 1 = 1{} GROUP BY module_owner.tenant",
                        only("module_owner.tenant")
                    ),
                    |usage| &mut usage.module_bytes,
                ),
                Quota::RunningRuns => (
                    format!(
                        "SELECT tenant, COUNT(*) AS n FROM run WHERE status IN ('pending', 'dispatched') \
                         AND status = 'dispatched'{} \
                         GROUP BY tenant",
                        only("tenant")
                    ),
                    |usage| &mut usage.running_runs,
                ),
                Quota::StateBytes => (
                    format!(
                        "SELECT job.tenant AS tenant, CAST(SUM({} + {}) AS BIGINT) AS n \
                         FROM job_state JOIN job ON job.id = job_state.job_id \
                         WHERE 1 = 1{} GROUP BY job.tenant",
                        byte_length(self.backend, "job_state.key"),
                        byte_length(self.backend, "job_state.value"),
                        only("job.tenant"),
                    ),
                    |usage| &mut usage.state_bytes,
                ),
                Quota::WorkflowRuns => (
                    format!(
                        "SELECT tenant, COUNT(*) AS n FROM workflow_run WHERE status = 'running'{} \
                         GROUP BY tenant",
                        only("tenant")
                    ),
                    |usage| &mut usage.workflow_runs,
                ),
                Quota::WorkflowItems => (
                    format!(
                        "SELECT w.tenant AS tenant, COUNT(*) AS n FROM workflow_run w \
                         JOIN workflow_item i ON i.workflow_run_id = w.id \
                         WHERE w.status = 'running' AND i.status IN ('pending', 'running'){} \
                         GROUP BY w.tenant",
                        only("w.tenant")
                    ),
                    |usage| &mut usage.workflow_items,
                ),
                Quota::BackfillRuns => (
                    format!(
                        "SELECT tenant, CAST(SUM(planned - written) AS BIGINT) AS n FROM backfill \
                         WHERE status = 'running'{} GROUP BY tenant",
                        only("tenant")
                    ),
                    |usage| &mut usage.backfill_runs,
                ),
                // Added up per day (below), or not counted here.
                Quota::RunMsPerDay
                | Quota::LogBytesPerDay
                | Quota::MinIntervalMs
                | Quota::ExecutorInstances => continue,
            };
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()));
            if let Some(tenant) = tenant {
                query = query.bind(tenant);
            }
            for row in query.fetch_all(&self.pool).await? {
                let name: String = row.try_get("tenant")?;
                *field(usage.entry(name).or_default()) = count(&row, "n")?;
            }
        }
        if !quotas
            .iter()
            .any(|quota| matches!(quota, Quota::RunMsPerDay | Quota::LogBytesPerDay))
        {
            return Ok(usage);
        }
        let sql = match tenant {
            Some(_) => {
                "SELECT tenant, run_ms, log_bytes FROM tenant_usage WHERE tenant = $1 AND day = $2"
            }
            None => "SELECT tenant, run_ms, log_bytes FROM tenant_usage WHERE day = $1",
        };
        let mut query = sqlx::query(sql);
        if let Some(tenant) = tenant {
            query = query.bind(tenant);
        }
        let days = query.bind(day).fetch_all(&self.pool).await?;
        for row in days {
            let name: String = row.try_get("tenant")?;
            let entry = usage.entry(name).or_default();
            entry.run_ms = count(&row, "run_ms")?;
            entry.log_bytes = count(&row, "log_bytes")?;
        }
        Ok(usage)
    }

    /// Adds ended runs' run time and log bytes to their tenants' days.
    pub async fn add_day_usage(&self, usage: &[DayUsage]) -> Result<(), StoreError> {
        if usage.is_empty() {
            return Ok(());
        }
        let mut tx = self.writer.begin().await?;
        add_day_usage(&mut tx, usage).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Whether `tenant` has a module named `name`.
    pub async fn has_module_name(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        Ok(sqlx::query(
            "SELECT 1 AS one FROM module_version WHERE tenant = $1 AND name = $2 LIMIT 1",
        )
        .bind(tenant)
        .bind(name)
        .fetch_optional(&self.pool)
        .await?
        .is_some())
    }

    /// Deletes per-day usage older than `before_day` (housekeeping).
    pub async fn delete_day_usage_before(&self, before_day: i64) -> Result<u64, StoreError> {
        Ok(sqlx::query("DELETE FROM tenant_usage WHERE day < $1")
            .bind(before_day)
            .execute(&self.writer)
            .await?
            .rows_affected())
    }
}

/// Adds `usage` to each tenant's day (see [`Store::add_day_usage`]), on
/// `conn` (within its caller's transaction).
pub(super) async fn add_day_usage(
    conn: &mut sqlx::AnyConnection,
    usage: &[DayUsage],
) -> Result<(), StoreError> {
    for day in usage {
        sqlx::query(
            "INSERT INTO tenant_usage (tenant, day, run_ms, log_bytes) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (tenant, day) DO UPDATE SET \
             run_ms = tenant_usage.run_ms + excluded.run_ms, \
             log_bytes = tenant_usage.log_bytes + excluded.log_bytes",
        )
        .bind(&day.tenant)
        .bind(day.day)
        .bind(day.run_ms)
        .bind(day.log_bytes)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}
