//! The planner: pure functions from a job and the time to the fires to
//! write (misfire and catch-up included) and the rows they become.

use super::*;

/// The runs to write for a due job's fires up to `horizon` and its next
/// fire after them; `None` when it is due for no fire.
pub(super) fn plan_job(
    job: &DueJob,
    rules: &Rules,
    now: i64,
    horizon: i64,
) -> Option<(Vec<NewRun>, Option<i64>)> {
    let expected = job.next_fire_at_ms?;
    let (fires, next) = plan_fires(job, &job.schedule, rules, expected, now, horizon);
    Some((new_runs(job, &fires), next))
}

/// The runs to write for `job`'s planned fires.
pub(super) fn new_runs(job: &DueJob, fires: &[(i64, TriggerKind)]) -> Vec<NewRun> {
    fires
        .iter()
        .map(|(at, kind)| NewRun::of_due_job(job, *kind, *at))
        .collect()
}

/// The row of a run just written (saves reading it back).
pub(super) fn written_run(id: RunId, tenant: &str, run: &NewRun, now: i64) -> RunRow {
    RunRow {
        id,
        tenant: tenant.to_owned(),
        job_id: run.job_id,
        job_name: None,
        module: None,
        kind: run.kind.to_owned(),
        scheduled_at_ms: run.scheduled_at_ms,
        shard_index: run.shard_index,
        shard_total: run.shard_total,
        attempt: run.attempt,
        param: run.param.clone(),
        status: crate::store::RunStatus::Pending.to_owned(),
        executor: None,
        module_digest: run.module_digest.clone(),
        outcome: None,
        code: None,
        message: None,
        created_at_ms: now,
        dispatched_at_ms: None,
        started_at_ms: None,
        finished_at_ms: None,
        alarm_status: crate::store::AlarmState::None.to_owned(),
        alarm_message: None,
        fuel_consumed: None,
        peak_memory_bytes: None,
        trace_id: None,
        trace_url: None,
    }
}

/// The fires of `job` from `expected` (its stored next fire) up to
/// `horizon`, with the misfire policy and the schedule's rules applied (a
/// fire's run is written for its planned instant plus its jitter), and its
/// next fire after them.
pub fn plan_fires(
    job: &DueJob,
    schedule: &Schedule,
    rules: &Rules,
    expected: i64,
    now: i64,
    horizon: i64,
) -> (Vec<(i64, TriggerKind)>, Option<i64>) {
    let mut fires = Vec::new();
    let mut next = Some(expected);
    if expected < now - job.misfire_threshold_ms {
        // Missed by more than the threshold.
        if job.misfire == MisfirePolicy::FireOnceNow {
            fires.push((now, TriggerKind::Misfire));
        }
        next = match schedule {
            Schedule::FixDelay(_) => None,
            Schedule::OneShot(_) => None,
            _ => rules
                .next_after(schedule, instant(now))
                .map(|at| at.timestamp_millis()),
        };
        if let Schedule::FixDelay(delay) = schedule
            && job.misfire != MisfirePolicy::FireOnceNow
        {
            next = Some(now + delay.as_millis() as i64);
        }
        return (fires, next);
    }
    while let Some(at) = next {
        if at > horizon {
            break;
        }
        fires.push((at + rules.jitter(at), TriggerKind::Schedule));
        next = match schedule {
            // FIX_DELAY's next fire is set when the run completes.
            Schedule::FixDelay(_) | Schedule::OneShot(_) | Schedule::None => None,
            _ => rules
                .next_after(schedule, instant(at))
                .map(|at| at.timestamp_millis()),
        };
    }
    (fires, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_support::every_second_job as every_second;

    /// The catch-up rule: after a stall shorter than the misfire threshold
    /// every missed fire runs (late, in order); past the threshold none does
    /// (DO_NOTHING) or one runs now (FIRE_ONCE_NOW), and the schedule goes
    /// on from now.
    #[test]
    fn missed_fires_catch_up_within_the_threshold_and_misfire_beyond_it() {
        let now = 1_800_000_000_000; // a whole second
        let horizon = now + 1_000;
        for misfire in [MisfirePolicy::DoNothing, MisfirePolicy::FireOnceNow] {
            let job = every_second(misfire);
            let schedule = schedule_of(&job).unwrap_or_else(|error| panic!("{error}"));
            // A 4 s stall: the four missed fires run, then the due ones.
            let rules = Rules::default();
            let due = DueJob::try_from(&job).unwrap_or_else(|error| panic!("{error}"));
            let (fires, next) = plan_fires(&due, &schedule, &rules, now - 4_000, now, horizon);
            let expected: Vec<(i64, TriggerKind)> = (-4..=1)
                .map(|second| (now + second * 1_000, TriggerKind::Schedule))
                .collect();
            assert_eq!(fires, expected, "{misfire}");
            assert_eq!(next, Some(now + 2_000));
            // A 6 s stall is past the 5 s threshold.
            let (fires, next) = plan_fires(&due, &schedule, &rules, now - 6_000, now, horizon);
            let expected: Vec<(i64, TriggerKind)> = match misfire {
                MisfirePolicy::DoNothing => vec![],
                MisfirePolicy::FireOnceNow => vec![(now, TriggerKind::Misfire)],
            };
            assert_eq!(fires, expected, "{misfire}");
            assert_eq!(next, Some(now + 1_000), "{misfire}: on from now");
        }
    }
}
