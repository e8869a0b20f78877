//! `cronbox job show` for a person: the job's definition in a few lines,
//! its next fires in its own time zone (UTC beside), and its last runs.

use cronbox_api::{Job, Run};

use super::jobs::{module_of, started};
use super::time;

/// Prints `job`, its next `fires` (RFC 3339 instants, as the admin sends
/// them) and its `recent` runs, newest first.
pub(super) fn print(job: &Job, fires: &[String], recent: &[Run]) {
    outln!("job {} {:?}", job.id, job.name);
    let schedule = format!("{} {}", job.schedule_type, job.schedule_conf);
    outln!("  schedule   {} ({})", schedule.trim(), job.time_zone);
    match &job.executor_handler {
        Some(handler) => outln!("  handler    {handler} (on xxl-job executors)"),
        None => outln!("  module     {}", module_of(job)),
    }
    outln!("  group      {}", job.group_name);
    if let Some(xxl_job_id) = job.xxl_job_id {
        outln!("  xxl-job id {xxl_job_id}");
    }
    outln!("  param      {}", shown(&job.param));
    outln!("  state      {}", started(job));
    let zone: Option<chrono_tz::Tz> = job.time_zone.parse().ok();
    if fires.is_empty() {
        outln!("  next fires none");
    } else {
        outln!("  next fires ({})", job.time_zone);
    }
    for fire in fires {
        outln!("    {}", in_zone(fire, zone));
    }
    if recent.is_empty() {
        outln!("  last runs  none yet");
    } else {
        outln!("  last runs");
    }
    for run in recent {
        outln!(
            "    {:>6}  {:<10} {}  {}",
            run.id,
            run.status.to_string(),
            time(Some(run.scheduled_at_ms)),
            run.message.as_deref().unwrap_or("")
        );
    }
}

/// A text that may be empty, shown as such.
fn shown(text: &str) -> &str {
    if text.is_empty() { "(empty)" } else { text }
}

/// `fire` in `zone`, with the UTC instant beside; as sent if it does not
/// parse.
fn in_zone(fire: &str, zone: Option<chrono_tz::Tz>) -> String {
    match (chrono::DateTime::parse_from_rfc3339(fire), zone) {
        (Ok(at), Some(zone)) => {
            let utc = at.with_timezone(&chrono::Utc);
            format!(
                "{}  ({} UTC)",
                utc.with_timezone(&zone).format("%Y-%m-%d %H:%M:%S %Z"),
                utc.format("%H:%M:%S")
            )
        }
        _ => fire.to_owned(),
    }
}

/// Instant `ms` in the zone `zone` names, with its abbreviation (`-` for
/// none; in UTC when the zone is not known): what `job list` shows.
pub(super) fn local_time(ms: Option<i64>, zone: &str) -> String {
    let Some(at) = ms.and_then(chrono::DateTime::from_timestamp_millis) else {
        return "-".to_owned();
    };
    match zone.parse::<chrono_tz::Tz>() {
        Ok(zone) => at
            .with_timezone(&zone)
            .format("%Y-%m-%d %H:%M:%S %Z")
            .to_string(),
        Err(_) => at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_next_fire_is_listed_in_the_jobs_zone() {
        let noon = Some(1_893_499_200_000); // 2030-01-01T12:00:00Z
        assert_eq!(local_time(noon, "Asia/Shanghai"), "2030-01-01 20:00:00 CST");
        assert_eq!(local_time(noon, "UTC"), "2030-01-01 12:00:00 UTC");
        assert_eq!(local_time(None, "UTC"), "-");
    }

    #[test]
    fn a_fire_is_shown_in_the_jobs_zone_with_utc_beside() {
        let zone = "Europe/Berlin".parse().ok();
        assert_eq!(
            in_zone("2030-01-01T12:00:00.000Z", zone),
            "2030-01-01 13:00:00 CET  (12:00:00 UTC)"
        );
        assert_eq!(in_zone("soon", zone), "soon");
    }
}
