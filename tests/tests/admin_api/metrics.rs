//! The admin's metrics per tenant and job: runs by tenant and outcome,
//! lateness, duration, fuel and peak memory histograms by tenant (and by
//! job for the jobs the operator marks), live executors by group, and the
//! most failing jobs by name — never a series per run.

use super::*;

/// The value of the series `series` (name and labels, as written) in
/// `text`.
fn value_of(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_counted_and_measured_per_tenant_and_failing_jobs_by_name() {
    let stack = stack(SchedulerConfig {
        job_metrics: vec!["acme/greets".parse().unwrap()],
        ..SchedulerConfig::default()
    })
    .await;
    let acme = tenant(&stack, "acme").await;
    let hello = stack.job_as(&acme, "greets", "hello", json!({})).await;
    let panics = stack.job_as(&acme, "panics", "panicker", json!({})).await;
    // The marked job is looked up at each scrape: it exists from now on.
    let before = stack.api.metrics().await;
    assert!(
        !before.contains("cronbox_admin_job_runs_total{"),
        "{before}"
    );
    for _ in 0..2 {
        assert_eq!(
            stack.run_to_end_as(&acme, hello, "x").await.status,
            RunStatus::Success
        );
        assert_eq!(
            stack.run_to_end_as(&acme, panics, "x").await.status,
            RunStatus::Failed
        );
    }
    let text = stack.api.metrics().await;
    let series = |name: &str| value_of(&text, name);
    assert_eq!(
        series(r#"cronbox_admin_tenant_runs_total{tenant="acme",outcome="success"}"#),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        series(r#"cronbox_admin_tenant_runs_total{tenant="acme",outcome="trap"}"#),
        Some(2.0),
        "{text}"
    );
    for histogram in [
        "cronbox_admin_tenant_run_duration_seconds_count",
        "cronbox_admin_tenant_run_fuel_count",
        "cronbox_admin_tenant_run_peak_memory_bytes_count",
    ] {
        let count = series(&format!(r#"{histogram}{{tenant="acme"}}"#));
        assert!(
            count.is_some_and(|count| count >= 2.0),
            "{histogram}: {text}"
        );
    }
    assert_eq!(
        series(&format!(
            r#"cronbox_admin_job_failures_last_hour{{tenant="acme",job="{panics} panics"}}"#
        )),
        Some(2.0),
        "{text}"
    );
    // The marked job has series of its own; the other does not.
    assert_eq!(
        series(&format!(
            r#"cronbox_admin_job_runs_total{{tenant="acme",job="{hello} greets",outcome="success"}}"#
        )),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        series(&format!(
            r#"cronbox_admin_job_run_duration_seconds_count{{tenant="acme",job="{hello} greets"}}"#
        )),
        Some(2.0),
        "{text}"
    );
    assert!(
        !text.contains(&format!("job=\"{panics} panics\",outcome")),
        "{text}"
    );
    assert_eq!(
        series(r#"cronbox_admin_executors_alive{group="default"}"#),
        Some(1.0)
    );
    assert_eq!(series("cronbox_admin_ready"), Some(1.0));
    // No label holds a run id.
    for run in stack.api.runs(hello).await {
        assert!(!text.contains(&format!("\"{}\"", run.id)), "{text}");
    }
    stack.shutdown().await;
}
