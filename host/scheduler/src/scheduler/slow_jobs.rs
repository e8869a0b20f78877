//! Which jobs dispatch slowly: a job whose dispatches keep taking long
//! (an executor that answers late) moves to the slow pool for the rest of
//! the minute, so that it cannot hold the slots every other job needs.

use super::*;

/// A dispatch slower than this counts against its job.
pub(super) const SLOW_DISPATCH: Duration = Duration::from_millis(500);

/// More slow dispatches than this in a minute move a job to the slow pool.
pub(super) const SLOW_DISPATCHES_PER_MINUTE: u32 = 10;

/// Per-job counts of slow dispatches in the current minute.
#[derive(Debug, Default)]
pub struct SlowJobs {
    minute: i64,
    counts: std::collections::HashMap<JobId, u32>,
}

impl SlowJobs {
    fn roll(&mut self, now_ms: i64) {
        let minute = now_ms / 60_000;
        if minute != self.minute {
            self.minute = minute;
            self.counts.clear();
        }
    }

    /// Records how long a dispatch of `job` took.
    pub fn record(&mut self, job: JobId, took: Duration, now_ms: i64) {
        self.roll(now_ms);
        if took > SLOW_DISPATCH {
            *self.counts.entry(job).or_default() += 1;
        }
    }

    /// Whether `job` belongs in the slow pool now.
    pub fn is_slow(&mut self, job: JobId, now_ms: i64) -> bool {
        self.roll(now_ms);
        self.counts
            .get(&job)
            .is_some_and(|count| *count > SLOW_DISPATCHES_PER_MINUTE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn often_slow_jobs_move_to_the_slow_pool_for_the_minute() {
        let mut slow = SlowJobs::default();
        let minute = 60_000 * 1_000;
        for _ in 0..SLOW_DISPATCHES_PER_MINUTE {
            slow.record(JobId(7), Duration::from_millis(800), minute);
            slow.record(JobId(8), Duration::from_millis(10), minute);
        }
        assert!(
            !slow.is_slow(JobId(7), minute),
            "ten slow dispatches are tolerated"
        );
        slow.record(JobId(7), Duration::from_millis(800), minute + 1);
        assert!(slow.is_slow(JobId(7), minute + 1));
        assert!(!slow.is_slow(JobId(8), minute + 1), "fast jobs stay fast");
        assert!(
            !slow.is_slow(JobId(7), minute + 60_000),
            "counts reset every minute"
        );
    }
}
