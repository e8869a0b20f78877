//! Job rows kept between reads, each with the revision it was read at.
//!
//! Dispatch reads the jobs of every group of runs it sends, and results
//! the jobs of every callback: at 8,000 runs/s that was 300,000 whole job
//! rows in 20 s (thirty columns, five of them JSON, decoded each time),
//! the largest single cost of the database's threads. A row read once is
//! kept here and served again while the job's `revision` is the one it was
//! read at: a trigger adds one to it with every change to a column a job
//! row holds and to the job's children (migration 0020), so a check reads
//! two numbers by key instead of the row. The next fire, which changes
//! with every fire and is not part of the revision, is read with the check.
//!
//! The cache is bounded by bytes (each row weighed as its JSON): a
//! tenant's large configurations evict other rows, never grow the admin.
//! The least recently used rows go first.

use std::sync::Mutex;

use lru::LruCache;

use super::{JobId, JobRow};

/// Bytes of job rows kept at most (about 20,000 rows of the usual size).
pub(super) const JOB_CACHE_BYTES: usize = 32 << 20;

/// Job rows by id, each with its revision and weight.
#[derive(Debug)]
pub(super) struct JobCache {
    inner: Mutex<Kept>,
    capacity_bytes: usize,
}

#[derive(Debug)]
struct Kept {
    rows: LruCache<JobId, Entry>,
    bytes: usize,
}

#[derive(Debug)]
struct Entry {
    revision: i64,
    bytes: usize,
    job: JobRow,
}

impl JobCache {
    pub(super) fn new(capacity_bytes: usize) -> Self {
        JobCache {
            inner: Mutex::new(Kept {
                rows: LruCache::unbounded(),
                bytes: 0,
            }),
            capacity_bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// The job as read at `revision`, if it is kept (a row kept at another
    /// revision is dropped).
    pub(super) fn get(&self, id: JobId, revision: i64) -> Option<JobRow> {
        let mut kept = self.lock();
        match kept.rows.get(&id) {
            Some(entry) if entry.revision == revision => return Some(entry.job.clone()),
            Some(_) => {}
            None => return None,
        }
        if let Some(stale) = kept.rows.pop(&id) {
            kept.bytes -= stale.bytes;
        }
        None
    }

    /// Keeps `job` as read at `revision`, dropping the least recently used
    /// rows past the capacity (a row larger than the whole capacity is not
    /// kept).
    pub(super) fn put(&self, job: &JobRow, revision: i64) {
        let bytes = weight(job);
        if bytes > self.capacity_bytes {
            return;
        }
        let mut kept = self.lock();
        if let Some(replaced) = kept.rows.put(
            job.id,
            Entry {
                revision,
                bytes,
                job: job.clone(),
            },
        ) {
            kept.bytes -= replaced.bytes;
        }
        kept.bytes += bytes;
        while kept.bytes > self.capacity_bytes {
            match kept.rows.pop_lru() {
                Some((_, evicted)) => kept.bytes -= evicted.bytes,
                None => break,
            }
        }
    }

    /// Rows and bytes kept now.
    #[cfg(test)]
    fn size(&self) -> (usize, usize) {
        let kept = self.lock();
        (kept.rows.len(), kept.bytes)
    }
}

/// What a row costs to keep: its JSON and the struct around it.
fn weight(job: &JobRow) -> usize {
    std::mem::size_of::<Entry>() + serde_json::to_vec(job).map_or(0, |json| json.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: i64, param: &str) -> JobRow {
        serde_json::from_value(serde_json::json!({
            "id": id, "tenant": "t", "group_name": "default", "name": format!("job-{id}"),
            "module_digest": "a".repeat(64), "schedule_type": "CRON", "schedule_conf": "* * * * * ?", "time_zone": "UTC",
            "misfire": "DO_NOTHING", "misfire_threshold_ms": 0, "route": "FIRST",
            "block_strategy": "SERIAL_EXECUTION", "max_concurrency": 1, "timeout_ms": 1000,
            "fuel": null, "memory_bytes": 1 << 20, "retry_count": 0, "retry_interval_ms": 0,
            "children": [], "param": param, "enabled": false, "next_fire_at_ms": null,
            "module_name": null, "module_version": null, "alarm_url": "",
            "fresh_instance": false, "config": {}, "http_allow": [], "secrets": [],
            "schedule_rules": {}, "pause": null
        }))
        .expect("a job row")
    }

    #[test]
    fn a_row_is_served_at_its_revision_only() {
        let cache = JobCache::new(JOB_CACHE_BYTES);
        cache.put(&job(1, "a"), 3);
        assert_eq!(
            cache.get(JobId(1), 3).map(|job| job.param),
            Some("a".into())
        );
        // Another revision: the row changed since; it is dropped.
        assert!(cache.get(JobId(1), 4).is_none());
        assert!(cache.get(JobId(1), 3).is_none());
        assert_eq!(cache.size(), (0, 0));
        assert!(cache.get(JobId(2), 0).is_none());
    }

    #[test]
    fn rows_past_the_capacity_in_bytes_go_least_recently_used_first() {
        let one = weight(&job(1, &"x".repeat(1000)));
        let cache = JobCache::new(3 * one);
        for id in 1..=3 {
            cache.put(&job(id, &"x".repeat(1000)), 0);
        }
        // Job 1 used again: job 2 is now the least recently used.
        assert!(cache.get(JobId(1), 0).is_some());
        cache.put(&job(4, &"x".repeat(1000)), 0);
        assert!(cache.get(JobId(2), 0).is_none());
        for id in [1, 3, 4] {
            assert!(cache.get(JobId(id), 0).is_some(), "job {id} kept");
        }
        let (rows, bytes) = cache.size();
        assert_eq!(rows, 3);
        assert!(bytes <= 3 * one);
        // A row larger than the whole cache is not kept, and evicts nothing.
        cache.put(&job(5, &"x".repeat(4 * one)), 0);
        assert!(cache.get(JobId(5), 0).is_none());
        assert_eq!(cache.size().0, 3);
    }
}
