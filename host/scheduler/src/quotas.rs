//! Tenants' quotas as the admin enforces them: the operator's defaults,
//! each tenant's own limits (read at most once a second), and the checks —
//! when a job or module is saved (jobs, modules, module bytes, shortest
//! interval), when a run is dispatched (runs in progress across the
//! cluster, run time and log bytes today) and when a result commits state
//! (state bytes). Instances per executor travel with each run, for the
//! executor to enforce.
//!
//! Counts used at dispatch are read at most once a second and kept up to
//! date in between with what this admin dispatched and saw end, so a check
//! costs no query; with several admins each may admit up to a second's
//! worth of runs past a limit before it reads the others' (documented in
//! ARCHITECTURE.md).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cronbox_api::{Quota, QuotaSettings, QuotaUse, TenantQuotas};

use crate::schedule::Schedule;
use crate::store::{DAY_MS, Store, StoreError, TenantUsage};

/// How long limits and counts read from the database are reused.
const REFRESH: Duration = Duration::from_secs(1);

/// The finest a cron expression can name: fires are whole seconds apart.
const CRON_RESOLUTION_MS: u64 = 1_000;

/// Fires of a cron schedule examined for its shortest interval.
const INTERVAL_FIRES: usize = 1_000;

/// A tenant past one of its quotas: which, its limit and the use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("quota {quota} of tenant {tenant:?} exceeded: {detail} (limit {limit})")]
pub struct QuotaExceeded {
    pub tenant: String,
    pub quota: Quota,
    pub limit: u64,
    /// What the request or run would have made of it.
    pub detail: String,
}

/// The operator's defaults: every quota has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaDefaults(QuotaSettings);

impl Default for QuotaDefaults {
    fn default() -> Self {
        let mut settings = QuotaSettings::default();
        for (quota, limit) in [
            (Quota::Jobs, 10_000),
            (Quota::Modules, 1_000),
            (Quota::ModuleBytes, 10 << 30),
            (Quota::MinIntervalMs, 1_000),
            // Runs are in progress from their dispatch (300-400 ms ahead of
            // their instant) until their batched result is stored: at
            // 1,000 fires a second a busy cluster holds a few thousand.
            (Quota::RunningRuns, 10_000),
            (Quota::ExecutorInstances, 64),
            // 2,000 hours: 83 runs busy all day.
            (Quota::RunMsPerDay, 7_200_000_000),
            (Quota::StateBytes, 1 << 30),
            (Quota::LogBytesPerDay, 10 << 30),
            // What one tenant's workflows and backfills may hold in the
            // database at once: a workflow run of 200 nodes fanned out over
            // 1,000 elements each writes 200,000 rows.
            (Quota::WorkflowRuns, 1_000),
            (Quota::WorkflowItems, 100_000),
            (Quota::BackfillRuns, 10_000),
        ] {
            settings.set(quota, Some(limit));
        }
        QuotaDefaults(settings)
    }
}

impl QuotaDefaults {
    /// The defaults with `changes` applied (the operator's flags).
    pub fn with(mut self, changes: &QuotaSettings) -> Self {
        for (quota, limit) in changes.entries() {
            self.0.set(quota, Some(limit));
        }
        self
    }

    pub fn get(&self, quota: Quota) -> u64 {
        self.0.get(quota).unwrap_or(u64::MAX)
    }
}

/// What one tenant's dispatch checks read: its own limits and its use.
#[derive(Debug, Clone)]
struct Cached {
    read_at: Instant,
    /// When a dispatch began reading it again: meanwhile (for at most
    /// [`REFRESH`], should that read never end) the others use this copy
    /// rather than each reading too.
    refreshing_since: Option<Instant>,
    own: QuotaSettings,
    /// Runs in progress, run time and log bytes today (the rest is 0).
    usage: TenantUsage,
    day: i64,
}

/// The quotas of every tenant, as this admin enforces them.
#[derive(Debug)]
pub struct Quotas {
    defaults: QuotaDefaults,
    cache: Mutex<HashMap<String, Cached>>,
    /// Each tenant's runs this admin sent whose dispatch marks are not
    /// written yet (they wait to be written with the runs' ends): in
    /// progress, though the store does not count them as such.
    unmarked: Mutex<HashMap<String, u64>>,
}

impl Quotas {
    pub fn new(defaults: QuotaDefaults) -> Self {
        Quotas {
            defaults,
            cache: Mutex::new(HashMap::new()),
            unmarked: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Cached>> {
        self.cache
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// `tenant`'s limit of `quota`, given the limits it has of its own.
    fn limit_in(&self, own: &QuotaSettings, quota: Quota) -> u64 {
        own.get(quota).unwrap_or_else(|| self.defaults.get(quota))
    }

    /// `tenant`'s own limits and its use, from the cache when it is fresh
    /// (and of today), or while another caller reads them again.
    async fn cached(&self, store: &Store, tenant: &str, now_ms: i64) -> Result<Cached, StoreError> {
        let day = now_ms.div_euclid(DAY_MS);
        if let Some(cached) = self.lock().get_mut(tenant)
            && cached.day == day
        {
            let refreshing = cached
                .refreshing_since
                .is_some_and(|since| since.elapsed() < REFRESH);
            if cached.read_at.elapsed() < REFRESH || refreshing {
                return Ok(cached.clone());
            }
            cached.refreshing_since = Some(Instant::now());
        }
        let read = async {
            let mut usage = store.tenant_run_usage(tenant, day).await?;
            // Read after the store: a mark written meanwhile is counted
            // twice until the next read, never not at all.
            usage.running_runs += self.unmarked_of(tenant);
            Ok::<_, StoreError>(Cached {
                read_at: Instant::now(),
                refreshing_since: None,
                own: store.tenant_quotas(tenant).await?,
                usage,
                day,
            })
        };
        match read.await {
            Ok(fresh) => {
                self.lock().insert(tenant.to_owned(), fresh.clone());
                Ok(fresh)
            }
            Err(error) => {
                if let Some(cached) = self.lock().get_mut(tenant) {
                    cached.refreshing_since = None;
                }
                Err(error)
            }
        }
    }

    /// A run of `tenant` was sent; its dispatch mark waits to be written
    /// (see [`Quotas::marks_written`]).
    pub fn sent_unmarked(&self, tenant: &str) {
        *self.lock_unmarked().entry(tenant.to_owned()).or_default() += 1;
    }

    /// The dispatch marks of `runs` runs of `tenant` were written (or
    /// given up on): the store counts them from now on.
    pub fn marks_written(&self, tenant: &str, runs: u64) {
        let mut unmarked = self.lock_unmarked();
        if let Some(count) = unmarked.get_mut(tenant) {
            *count = count.saturating_sub(runs);
            if *count == 0 {
                unmarked.remove(tenant);
            }
        }
    }

    /// How many of `tenant`'s runs sent have their marks still to write.
    pub(crate) fn unmarked_of(&self, tenant: &str) -> u64 {
        self.lock_unmarked().get(tenant).copied().unwrap_or(0)
    }

    fn lock_unmarked(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        self.unmarked
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Forgets what was read of `tenant` (its limits were just changed).
    pub fn forget(&self, tenant: &str) {
        self.lock().remove(tenant);
    }

    /// `tenant`'s limit of `quota` now.
    pub async fn limit(
        &self,
        store: &Store,
        tenant: &str,
        quota: Quota,
        now_ms: i64,
    ) -> Result<u64, StoreError> {
        let cached = self.cached(store, tenant, now_ms).await?;
        Ok(self.limit_in(&cached.own, quota))
    }

    /// Every quota of `tenant` with its use, read now.
    pub async fn report(
        &self,
        store: &Store,
        tenant: &str,
        now_ms: i64,
    ) -> Result<TenantQuotas, StoreError> {
        let own = store.tenant_quotas(tenant).await?;
        let usage = store
            .tenant_usage(tenant, now_ms.div_euclid(DAY_MS))
            .await?;
        Ok(TenantQuotas {
            tenant: tenant.to_owned(),
            quotas: Quota::ALL
                .iter()
                .map(|quota| QuotaUse {
                    quota: *quota,
                    limit: self.limit_in(&own, *quota),
                    own: own.get(*quota).is_some(),
                    used: usage.of(*quota),
                })
                .collect(),
        })
    }

    /// Every tenant's limits and use, for the metrics: (tenant, quota,
    /// limit, use).
    pub async fn all(
        &self,
        store: &Store,
        tenants: &[String],
        now_ms: i64,
    ) -> Result<Vec<(String, Quota, u64, Option<u64>)>, StoreError> {
        let usage = store.usage_by_tenant(now_ms.div_euclid(DAY_MS)).await?;
        let mut own_quotas = store.all_tenant_quotas().await?;
        let mut all = Vec::new();
        for tenant in tenants {
            let own = own_quotas.remove(tenant).unwrap_or_default();
            let used = usage.get(tenant).copied().unwrap_or_default();
            for quota in Quota::ALL {
                all.push((
                    tenant.clone(),
                    *quota,
                    self.limit_in(&own, *quota),
                    used.of(*quota),
                ));
            }
        }
        Ok(all)
    }

    /// Refuses one more of a counted thing (`quota` is `jobs` or
    /// `modules`) when the tenant already has as many as its limit.
    pub async fn check_one_more(
        &self,
        store: &Store,
        tenant: &str,
        quota: Quota,
        now_ms: i64,
    ) -> Result<Result<(), QuotaExceeded>, StoreError> {
        self.check_more(store, tenant, quota, 1, now_ms).await
    }

    /// Refuses `adding` more of a counted thing when the tenant would then
    /// have more than its limit.
    pub async fn check_more(
        &self,
        store: &Store,
        tenant: &str,
        quota: Quota,
        adding: u64,
        now_ms: i64,
    ) -> Result<Result<(), QuotaExceeded>, StoreError> {
        let limit = self.limit(store, tenant, quota, now_ms).await?;
        let used = store
            .tenant_usage_of(tenant, now_ms.div_euclid(DAY_MS), &[quota])
            .await?
            .of(quota)
            .unwrap_or(0);
        let over = used.saturating_add(adding) > limit;
        Ok(refuse_if(over, tenant, quota, limit, || match adding {
            1 => format!("it has {used}"),
            _ => format!("it has {used}, and this adds {adding}"),
        }))
    }

    /// Refuses an upload of `adding` new bytes past the module bytes quota.
    pub async fn check_module_bytes(
        &self,
        store: &Store,
        tenant: &str,
        adding: u64,
        now_ms: i64,
    ) -> Result<Result<(), QuotaExceeded>, StoreError> {
        let limit = self
            .limit(store, tenant, Quota::ModuleBytes, now_ms)
            .await?;
        let used = store
            .tenant_usage_of(tenant, now_ms.div_euclid(DAY_MS), &[Quota::ModuleBytes])
            .await?
            .module_bytes;
        let over = used.saturating_add(adding) > limit;
        Ok(refuse_if(over, tenant, Quota::ModuleBytes, limit, || {
            format!("{used} bytes stored, and this upload adds {adding}")
        }))
    }

    /// Refuses a schedule that can fire more often than the tenant's
    /// shortest interval.
    pub async fn check_interval(
        &self,
        store: &Store,
        tenant: &str,
        schedule: &Schedule,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Result<(), QuotaExceeded>, StoreError> {
        let limit = self
            .limit(store, tenant, Quota::MinIntervalMs, now.timestamp_millis())
            .await?;
        if limit <= CRON_RESOLUTION_MS && matches!(schedule, Schedule::Cron { .. }) {
            // A cron expression names whole seconds: it cannot fire more
            // often than that (and going through its next thousand fires
            // is what a batch of jobs would spend its time on).
            return Ok(Ok(()));
        }
        let Some(shortest) = shortest_interval_ms(schedule, now) else {
            return Ok(Ok(()));
        };
        Ok(refuse_if(
            shortest < limit,
            tenant,
            Quota::MinIntervalMs,
            limit,
            || format!("the schedule fires {shortest} ms apart"),
        ))
    }

    /// Whether a run of `tenant` may be dispatched now: runs in progress
    /// across the cluster, run time and log bytes today. An admitted run is
    /// counted as in progress until [`Quotas::ended`].
    pub async fn admit_run(
        &self,
        store: &Store,
        tenant: &str,
        now_ms: i64,
    ) -> Result<Result<(), QuotaExceeded>, StoreError> {
        let cached = self.cached(store, tenant, now_ms).await?;
        let checks = [
            (
                Quota::RunningRuns,
                cached.usage.running_runs,
                "runs in progress",
            ),
            (
                Quota::RunMsPerDay,
                cached.usage.run_ms,
                "ms of run time today",
            ),
            (
                Quota::LogBytesPerDay,
                cached.usage.log_bytes,
                "bytes of logs today",
            ),
        ];
        for (quota, used, what) in checks {
            let limit = self.limit_in(&cached.own, quota);
            let refusal = refuse_if(used >= limit, tenant, quota, limit, || {
                format!("{used} {what}")
            });
            if refusal.is_err() {
                return Ok(refusal);
            }
        }
        if let Some(cached) = self.lock().get_mut(tenant) {
            cached.usage.running_runs += 1;
        }
        Ok(Ok(()))
    }

    /// A run admitted by [`Quotas::admit_run`] fanned out into `extra`
    /// more runs (the shards of a broadcast after the first): each counts
    /// as in progress too. (A fire is admitted while one run fits; its
    /// fan-out may then go past the limit, and the next fire waits.)
    pub fn admitted_more(&self, tenant: &str, extra: u64) {
        if let Some(cached) = self.lock().get_mut(tenant) {
            cached.usage.running_runs += extra;
        }
    }

    /// `runs` runs of `tenant` admitted by [`Quotas::admit_run`] ended,
    /// taking `run_ms` and logging `log_bytes` together. (Runs refused
    /// after their admission stay counted until the next read.)
    pub fn ended(&self, tenant: &str, runs: u64, run_ms: u64, log_bytes: u64) {
        if let Some(cached) = self.lock().get_mut(tenant) {
            cached.usage.running_runs = cached.usage.running_runs.saturating_sub(runs);
            cached.usage.run_ms += run_ms;
            cached.usage.log_bytes += log_bytes;
        }
    }

    /// How many more log bytes `tenant` may store today, and its quota
    /// (for cutting the log of a result that would pass it).
    pub async fn log_room(
        &self,
        store: &Store,
        tenant: &str,
        now_ms: i64,
    ) -> Result<(u64, u64), StoreError> {
        let cached = self.cached(store, tenant, now_ms).await?;
        let limit = self.limit_in(&cached.own, Quota::LogBytesPerDay);
        Ok((limit.saturating_sub(cached.usage.log_bytes), limit))
    }
}

/// A refusal of `quota` when `over`, with what the use would be.
fn refuse_if(
    over: bool,
    tenant: &str,
    quota: Quota,
    limit: u64,
    detail: impl FnOnce() -> String,
) -> Result<(), QuotaExceeded> {
    if !over {
        return Ok(());
    }
    Err(QuotaExceeded {
        tenant: tenant.to_owned(),
        quota,
        limit,
        detail: detail(),
    })
}

/// The shortest time between two fires of `schedule` (over a cron
/// expression's next [`INTERVAL_FIRES`] fires); `None` for a schedule that
/// fires at most once.
pub fn shortest_interval_ms(
    schedule: &Schedule,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<u64> {
    match schedule {
        Schedule::FixRate(every) | Schedule::FixDelay(every) => {
            Some(u64::try_from(every.as_millis()).unwrap_or(u64::MAX))
        }
        Schedule::Cron { .. } => schedule
            .preview(now, INTERVAL_FIRES)
            .windows(2)
            .map(|pair| u64::try_from((pair[1] - pair[0]).num_milliseconds()).unwrap_or(0))
            .min(),
        Schedule::OneShot(_) | Schedule::None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::ScheduleType;

    fn cron(expression: &str) -> Schedule {
        Schedule::parse(ScheduleType::Cron, expression, "UTC").expect("a valid cron expression")
    }

    #[test]
    fn the_shortest_interval_of_a_schedule_is_found_across_its_fields() {
        let now = chrono::Utc::now();
        assert_eq!(
            shortest_interval_ms(&cron("*/5 * * * * ?"), now),
            Some(5_000)
        );
        // Seconds 0 and 59 of every minute: one second apart across minutes.
        assert_eq!(
            shortest_interval_ms(&cron("0,59 * * * * ?"), now),
            Some(1_000)
        );
        assert_eq!(
            shortest_interval_ms(&cron("0 0 3 * * ?"), now),
            Some(86_400_000)
        );
        // A burst on one day of the year shows within the next fires.
        assert_eq!(shortest_interval_ms(&cron("* * * 1 1 ?"), now), Some(1_000));
        let every = Schedule::parse(ScheduleType::FixRate, "90s", "UTC").expect("an interval");
        assert_eq!(shortest_interval_ms(&every, now), Some(90_000));
        let once = Schedule::parse(ScheduleType::OneShot, "2030-01-01T00:00:00Z", "UTC")
            .expect("an instant");
        assert_eq!(shortest_interval_ms(&once, now), None);
    }

    #[test]
    fn a_tenants_own_limit_wins_over_the_default() {
        let mut changes = QuotaSettings::default();
        changes.set(Quota::Jobs, Some(5));
        let defaults = QuotaDefaults::default().with(&changes);
        assert_eq!(defaults.get(Quota::Jobs), 5);
        let quotas = Quotas::new(defaults);
        let mut own = QuotaSettings::default();
        assert_eq!(quotas.limit_in(&own, Quota::Jobs), 5);
        own.set(Quota::Jobs, Some(7));
        assert_eq!(quotas.limit_in(&own, Quota::Jobs), 7);
        assert_eq!(quotas.limit_in(&own, Quota::Modules), 1_000);
    }

    /// Runs sent whose dispatch marks wait to be written are in progress:
    /// a read of the store's count, which does not see them, adds them.
    #[tokio::test]
    async fn runs_sent_before_their_marks_are_written_count_as_in_progress() {
        let (_dir, store) = crate::test_support::sqlite_store().await;
        let mut changes = QuotaSettings::default();
        changes.set(Quota::RunningRuns, Some(2));
        let quotas = Quotas::new(QuotaDefaults::default().with(&changes));
        quotas.sent_unmarked("acme");
        quotas.sent_unmarked("acme");
        let admitted = quotas.admit_run(&store, "acme", 0).await.expect("read");
        assert!(admitted.is_err(), "two runs in progress of two");
        assert!(
            quotas
                .admit_run(&store, "other", 0)
                .await
                .expect("read")
                .is_ok(),
            "another tenant's runs are its own"
        );
        quotas.marks_written("acme", 2);
        quotas.forget("acme");
        let admitted = quotas.admit_run(&store, "acme", 0).await.expect("read");
        assert!(admitted.is_ok(), "{admitted:?}");
    }
}
