//! Prometheus metrics of an executor, served at `/metrics`.

use cronbox_protocol::OutcomeKind;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OutcomeLabel {
    outcome: &'static str,
}

/// A tenant's outbound HTTP requests: `answered`, `failed` (no
/// response) or `denied` (refused before sending).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TenantHttpLabel {
    tenant: String,
    outcome: &'static str,
}

/// A marked job's outbound HTTP requests (see [`TenantHttpLabel`]); the
/// admin names the jobs the operator marked (`ID name`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct JobHttpLabel {
    tenant: String,
    job: String,
    outcome: &'static str,
}

#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    runs: Family<OutcomeLabel, Counter>,
    tenant_http: Family<TenantHttpLabel, Counter>,
    job_http: Family<JobHttpLabel, Counter>,
    pub(crate) running: Gauge,
    pub(crate) queued: Gauge,
    pub(crate) pool_free: Gauge,
    pub(crate) duration: Histogram,
    pub(crate) callbacks_delivered: Counter,
    pub(crate) callback_failures: Counter,
    pub(crate) instances_retired: Counter,
    pub(crate) retained_log_bytes: Gauge,
    pub(crate) results_quarantined: Counter,
    pub(crate) spool_records_skipped: Counter,
    /// Results in the spool no admin has taken yet (set at each scrape).
    pub(crate) spool_results: Gauge,
    pub(crate) module_load_failures: Counter,
    pub(crate) idle_instances: Gauge,
    pub(crate) instances_evicted: Counter,
    pub(crate) instances_created: Counter,
    pub(crate) run_batches: Counter,
    pub(crate) memory_budget_free: Gauge,
    pub(crate) disk_cache_trimmed: Counter,
    resident_memory: Gauge,
    resident_memory_peak: Gauge,
    http_requests: Counter,
    http_denied: Counter,
    http_failed: Counter,
    http_bytes_sent: Counter,
    http_bytes_received: Counter,
    /// Held while figures read from the runtime are copied in, so that two
    /// scrapes never add the same evictions twice.
    pub(crate) scrape: std::sync::Mutex<()>,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("cronbox_executor");
        let runs = Family::<OutcomeLabel, Counter>::default();
        let running = Gauge::default();
        let queued = Gauge::default();
        let pool_free = Gauge::default();
        let duration = Histogram::new([
            0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0, 600.0,
        ]);
        let callbacks_delivered = Counter::default();
        let callback_failures = Counter::default();
        let instances_retired = Counter::default();
        let retained_log_bytes = Gauge::default();
        let results_quarantined = Counter::default();
        let spool_records_skipped = Counter::default();
        let spool_results = Gauge::default();
        registry.register(
            "spool_results",
            "Results in the spool that no admin has taken yet",
            spool_results.clone(),
        );
        let module_load_failures = Counter::default();
        let idle_instances = Gauge::default();
        let instances_evicted = Counter::default();
        let instances_created = Counter::default();
        let run_batches = Counter::default();
        let memory_budget_free = Gauge::default();
        let disk_cache_trimmed = Counter::default();
        let resident_memory = Gauge::default();
        let resident_memory_peak = Gauge::default();
        let http_requests = Counter::default();
        let http_denied = Counter::default();
        let http_failed = Counter::default();
        let http_bytes_sent = Counter::default();
        let http_bytes_received = Counter::default();
        for (name, help, counter) in [
            (
                "http_requests",
                "Outbound HTTP requests jobs sent (whatever their response)",
                &http_requests,
            ),
            (
                "http_denied",
                "Outbound HTTP requests refused: no grant, a run limit reached, a forbidden address",
                &http_denied,
            ),
            (
                "http_failed",
                "Outbound HTTP requests that got no response (connection, TLS, timeout, run ended)",
                &http_failed,
            ),
            (
                "http_sent_bytes",
                "Request body bytes jobs sent over HTTP",
                &http_bytes_sent,
            ),
            (
                "http_received_bytes",
                "Response body bytes jobs received over HTTP",
                &http_bytes_received,
            ),
        ] {
            registry.register(name, help, counter.clone());
        }
        registry.register(
            "resident_memory_bytes",
            "Resident memory of the executor process (Linux only)",
            resident_memory.clone(),
        );
        registry.register(
            "resident_memory_peak_bytes",
            "Most resident memory the executor process has held since it started (Linux only)",
            resident_memory_peak.clone(),
        );
        registry.register(
            "disk_cache_trimmed_files",
            "Module and artifact files deleted to keep the disk caches within their bound",
            disk_cache_trimmed.clone(),
        );
        registry.register(
            "idle_instances",
            "Warm instances waiting for their job's next run",
            idle_instances.clone(),
        );
        registry.register(
            "instances_evicted",
            "Idle instances destroyed to let a waiting run have their slot or memory",
            instances_evicted.clone(),
        );
        registry.register(
            "instances_created",
            "Runs that found no warm instance of their job and made one (the rest were warm hits)",
            instances_created.clone(),
        );
        registry.register(
            "run_batches",
            "run-batch requests received (several run commands in one request)",
            run_batches.clone(),
        );
        registry.register(
            "memory_budget_free_bytes",
            "Memory of the budget not reserved by a live instance",
            memory_budget_free.clone(),
        );
        registry.register(
            "module_load_failures",
            "Modules that could not be loaded (each digest once; later triggers reuse the refusal)",
            module_load_failures.clone(),
        );
        registry.register(
            "spool_records_skipped",
            "Unreadable lines skipped when replaying the result spool",
            spool_records_skipped.clone(),
        );
        registry.register(
            "results_quarantined",
            "Run results every admin refused on their own, replaced by a failure",
            results_quarantined.clone(),
        );
        registry.register(
            "retained_log_bytes",
            "Bytes charged for the logs of finished runs kept readable",
            retained_log_bytes.clone(),
        );
        registry.register("runs", "Runs ended, by outcome", runs.clone());
        let tenant_http = Family::<TenantHttpLabel, Counter>::default();
        registry.register(
            "tenant_http_requests",
            "Outbound HTTP requests of jobs, by tenant and outcome (answered; failed: no response; denied: refused before sending)",
            tenant_http.clone(),
        );
        let job_http = Family::<JobHttpLabel, Counter>::default();
        registry.register(
            "job_http_requests",
            "Outbound HTTP requests of the jobs the operator marked for metrics of their own, by tenant, job and outcome",
            job_http.clone(),
        );
        registry.register("running", "Runs executing now", running.clone());
        registry.register("queued", "Runs waiting in job queues", queued.clone());
        registry.register(
            "pool_free_slots",
            "Free instance slots of the sandbox pool",
            pool_free.clone(),
        );
        registry.register(
            "run_duration_seconds",
            "Duration of runs, seconds",
            duration.clone(),
        );
        registry.register(
            "callbacks_delivered",
            "Results acknowledged by an admin",
            callbacks_delivered.clone(),
        );
        registry.register(
            "callback_failures",
            "Callback requests no admin accepted",
            callback_failures.clone(),
        );
        registry.register(
            "instances_retired",
            "Healthy instances retired with their guest's destroy completed",
            instances_retired.clone(),
        );
        Metrics {
            tenant_http,
            job_http,
            scrape: std::sync::Mutex::new(()),
            idle_instances,
            instances_evicted,
            instances_created,
            run_batches,
            memory_budget_free,
            disk_cache_trimmed,
            resident_memory,
            resident_memory_peak,
            http_requests,
            http_denied,
            http_failed,
            http_bytes_sent,
            http_bytes_received,
            instances_retired,
            retained_log_bytes,
            results_quarantined,
            spool_records_skipped,
            spool_results,
            module_load_failures,
            registry,
            runs,
            running,
            queued,
            pool_free,
            duration,
            callbacks_delivered,
            callback_failures,
        }
    }

    pub(crate) fn run_ended(&self, outcome: OutcomeKind, seconds: f64) {
        self.runs
            .get_or_create(&OutcomeLabel {
                outcome: outcome.as_str(),
            })
            .inc();
        self.duration.observe(seconds);
    }

    /// Reads the process's resident memory, now and at its peak, from
    /// `/proc/self/status` (left at 0 where there is none).
    pub(crate) fn read_resident_memory(&self) {
        let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
            return;
        };
        let kib_of = |field: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(field))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<i64>()
                        .ok()
                })
        };
        if let Some(kib) = kib_of("VmRSS:") {
            self.resident_memory.set(kib.saturating_mul(1024));
        }
        if let Some(kib) = kib_of("VmHWM:") {
            self.resident_memory_peak.set(kib.saturating_mul(1024));
        }
    }

    /// Copies the runtime's outbound HTTP counters in.
    pub(crate) fn copy_http(&self, stats: &cronbox_runtime::HttpStatsSnapshot) {
        for (counter, value) in [
            (&self.http_requests, stats.requests),
            (&self.http_denied, stats.denied),
            (&self.http_failed, stats.failed),
            (&self.http_bytes_sent, stats.bytes_sent),
            (&self.http_bytes_received, stats.bytes_received),
        ] {
            counter.inc_by(value.saturating_sub(counter.get()));
        }
    }

    pub(crate) fn encode(&self) -> String {
        let mut text = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::error!(%error, "cannot encode metrics");
        }
        text
    }
}

impl Metrics {
    /// Counts a run's outbound HTTP requests for its tenant, and for its
    /// job when the admin sent the job's label (`metrics_job`).
    pub(crate) fn run_http(
        &self,
        tenant: &str,
        job: Option<&str>,
        http: &cronbox_runtime::HttpStatsSnapshot,
    ) {
        let answered = http.requests.saturating_sub(http.failed);
        for (outcome, count) in [
            ("answered", answered),
            ("failed", http.failed),
            ("denied", http.denied),
        ] {
            if count > 0 {
                self.tenant_http
                    .get_or_create(&TenantHttpLabel {
                        tenant: tenant.to_owned(),
                        outcome,
                    })
                    .inc_by(count);
                if let Some(job) = job {
                    self.job_http
                        .get_or_create(&JobHttpLabel {
                            tenant: tenant.to_owned(),
                            job: job.to_owned(),
                            outcome,
                        })
                        .inc_by(count);
                }
            }
        }
    }
}
