//! Tenants' shared calendars as the scheduler reads them: kept in memory,
//! read again at most every [`CALENDARS_FRESH`] by the pre-read (and at
//! once after this admin changes one), so that planning a fire stays a pure
//! computation. Another admin of a cluster sees a change within that time.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use chrono::NaiveDate;

use super::*;

/// How long the scheduler plans with the calendars it read.
pub const CALENDARS_FRESH: Duration = Duration::from_secs(10);

/// The calendars last read, by (tenant, name): their dates, or `None` for
/// a stored calendar whose dates no longer parse.
#[derive(Debug, Default)]
pub(super) struct CalendarCache {
    read_at: Option<Instant>,
    dates: HashMap<(String, String), Option<BTreeSet<NaiveDate>>>,
}

impl Scheduler {
    /// Reads every tenant's calendars again.
    pub async fn refresh_calendars(&self) -> Result<(), StoreError> {
        let calendars = self.store.calendars(None).await?;
        let dates = calendars
            .into_iter()
            .map(|calendar| {
                // Checked when set; dates that no longer parse (set by an
                // earlier version) are logged, and exclude every date.
                let dates = crate::schedule::parse_dates(&calendar.dates)
                    .inspect_err(|error| {
                        tracing::error!(
                            tenant = calendar.tenant,
                            calendar = calendar.name,
                            %error,
                            "calendar dates do not parse; the jobs naming it will not fire"
                        )
                    })
                    .ok();
                ((calendar.tenant, calendar.name), dates)
            })
            .collect();
        let mut cache = self
            .calendars
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        *cache = CalendarCache {
            read_at: Some(Instant::now()),
            dates,
        };
        Ok(())
    }

    /// [`Scheduler::refresh_calendars`] if they were read longer ago than
    /// [`CALENDARS_FRESH`].
    pub(super) async fn refresh_stale_calendars(&self) -> Result<(), StoreError> {
        let stale = self
            .calendars
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .read_at
            .is_none_or(|read_at| read_at.elapsed() > CALENDARS_FRESH);
        if stale {
            self.refresh_calendars().await?;
        }
        Ok(())
    }

    /// The rules a job's fires follow: its own, with the dates of the
    /// tenant's calendars it names.
    pub fn rules_of(&self, job: &JobRow) -> Rules {
        self.stored_rules(&job.tenant, job.id, &job.time_zone, &job.schedule_rules)
    }

    /// [`Scheduler::rules_of`] a job the pre-read claimed (its own rules
    /// parsed as it was read).
    pub(super) fn rules_of_due(&self, job: &DueJob) -> Rules {
        self.with_calendars(job.rules.clone(), &job.tenant, &job.calendars)
    }

    /// The rules `rules` stored for job `id` of `tenant` in `time_zone`,
    /// with the tenant's calendars they name.
    fn stored_rules(
        &self,
        tenant: &str,
        id: JobId,
        time_zone: &str,
        rules: &cronbox_api::ScheduleRules,
    ) -> Rules {
        self.with_calendars(
            crate::jobs::stored_rules(rules, time_zone, id),
            tenant,
            &rules.calendars,
        )
    }

    /// `rules` with the dates of `tenant`'s calendars `names` excluded too
    /// (a name the tenant has no calendar of adds nothing; a calendar whose
    /// stored dates do not parse allows no fire, rather than none of its
    /// exclusions).
    pub fn with_calendars(&self, mut rules: Rules, tenant: &str, names: &[String]) -> Rules {
        if names.is_empty() {
            return rules;
        }
        let cache = self
            .calendars
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        for name in names {
            match cache.dates.get(&(tenant.to_owned(), name.clone())) {
                Some(Some(dates)) => rules.excluded.extend(dates.iter().copied()),
                Some(None) => rules.ends_at_ms = Some(i64::MIN),
                None => {}
            }
        }
        rules
    }
}
