//! An xxl-job job (a row of `xxl_job_info`, or the body of xxl-job 3.5's
//! `/api/addJob`) as a cronbox legacy job: the one mapping that the import
//! of xxl-job's tables and the admin's answer to xxl-job 3.5's job API
//! share, with a note for everything it changes or drops.

use crate::JobSpec;

/// The longest timeout cronbox keeps (24 h): xxl-job's `executor_timeout`
/// 0 (none) and anything longer become it.
const LONGEST_TIMEOUT_MS: i64 = 24 * 3_600_000;

/// Most retries cronbox keeps for one run.
const MOST_RETRIES: i64 = 100;

/// The fields of an xxl-job job that a cronbox job keeps, as xxl-job
/// stores them (`None`: absent or NULL).
#[derive(Debug, Clone, Copy, Default)]
pub struct XxlJobFields<'a> {
    /// `glue_type` (`BEAN` when absent).
    pub glue_type: Option<&'a str>,
    pub executor_handler: Option<&'a str>,
    pub schedule_type: Option<&'a str>,
    /// `schedule_conf` (or `job_cron` before xxl-job 2.3).
    pub schedule_conf: Option<&'a str>,
    pub misfire_strategy: Option<&'a str>,
    pub executor_route_strategy: Option<&'a str>,
    pub executor_block_strategy: Option<&'a str>,
    /// `executor_timeout`, in seconds (0: none).
    pub executor_timeout: Option<i64>,
    pub executor_fail_retry_count: Option<i64>,
    /// `executor_param`, byte for byte.
    pub executor_param: Option<&'a str>,
    pub alarm_email: Option<&'a str>,
}

/// What a mapped job runs in cronbox beyond its fields: its zone and the
/// webhook that its alarm email becomes.
#[derive(Debug, Clone, Copy)]
pub struct XxlJobPlace<'a> {
    pub name: &'a str,
    pub group: &'a str,
    /// The zone xxl-job's admin fired in (its JVM's).
    pub time_zone: &'a str,
    /// The webhook an alarm email becomes (none: the email is dropped).
    pub alarm_webhook: Option<&'a str>,
}

impl XxlJobFields<'_> {
    /// The cronbox definition of this job in `place`, with a note for each
    /// value changed or dropped; or why cronbox cannot run it (a GLUE job,
    /// a schedule type it has no match for, no handler).
    pub fn legacy_job(&self, place: XxlJobPlace<'_>) -> Result<(JobSpec, Vec<String>), String> {
        let mut notes = Vec::new();
        let glue = self.glue_type.unwrap_or("BEAN");
        if !glue.eq_ignore_ascii_case("BEAN") {
            return Err(format!(
                "a GLUE job ({glue}): cronbox runs no source stored with a job; \
                 write its handler as a module (docs/authoring.md)"
            ));
        }
        let handler = self
            .executor_handler
            .filter(|handler| !handler.trim().is_empty())
            .ok_or_else(|| "no executor_handler".to_owned())?;
        let (schedule_type, schedule_conf) = match (self.schedule_type, self.schedule_conf) {
            (None | Some("CRON"), Some(cron)) => ("CRON", cron),
            (Some(kind @ ("FIX_RATE" | "FIX_DELAY")), Some(seconds)) => (kind, seconds),
            (Some("NONE") | None, _) => ("NONE", ""),
            (Some(other), _) => {
                return Err(format!("schedule_type {other:?} has no cronbox match"));
            }
        };
        let mut spec = JobSpec::legacy(place.name, place.group, handler);
        spec.schedule_type = schedule_type.to_owned();
        spec.schedule_conf = schedule_conf.to_owned();
        spec.time_zone = place.time_zone.to_owned();
        if let Some(misfire) = self.misfire_strategy {
            spec.misfire = misfire.to_owned();
        }
        if let Some(route) = self.executor_route_strategy {
            spec.route = route.to_owned();
        }
        if let Some(block) = self.executor_block_strategy {
            spec.block_strategy = block.to_owned();
        }
        spec.timeout_ms = match self.executor_timeout {
            Some(seconds) if seconds > 0 && seconds.saturating_mul(1000) <= LONGEST_TIMEOUT_MS => {
                seconds * 1000
            }
            Some(seconds) if seconds > 0 => {
                notes.push(format!("executor_timeout {seconds} s cut to 24 h"));
                LONGEST_TIMEOUT_MS
            }
            _ => {
                notes.push("no timeout: 24 h".to_owned());
                LONGEST_TIMEOUT_MS
            }
        };
        let retries = self.executor_fail_retry_count.unwrap_or(0);
        spec.retry_count = retries.clamp(0, MOST_RETRIES);
        if spec.retry_count != retries {
            notes.push(format!(
                "executor_fail_retry_count {retries} cut to {}",
                spec.retry_count
            ));
        }
        // A handler's input, byte for byte (NULL: none).
        spec.param = self.executor_param.unwrap_or_default().to_owned();
        if let Some(email) = self.alarm_email.filter(|email| !email.trim().is_empty()) {
            match place.alarm_webhook {
                Some(webhook) => {
                    spec.alarm_url = webhook.to_owned();
                    notes.push(format!("alarm_email {email} → the webhook"));
                }
                None => notes.push(format!(
                    "alarm_email {email} dropped: cronbox alarms by webhook \
                     (`alarm_url`; the import's --alarm-webhook)"
                )),
            }
        }
        Ok((spec, notes))
    }
}
