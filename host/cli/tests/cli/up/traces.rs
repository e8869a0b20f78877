//! Traces: a `cronbox up` with `OTEL_EXPORTER_OTLP_ENDPOINT` set sends a
//! run's spans to an OTLP receiver — the admin's fire, the executor's run
//! under it, its instance's creation and the guest's HTTP request under
//! it, the admin's end and the end's write — and the
//! service the job calls receives the request span's `traceparent`; the
//! run keeps its trace id and links it to the operator's trace viewer; its
//! child job's run is in the same trace, under the parent's end, as is a
//! workflow's next node's. The
//! exporter's headers and batch delay come from `[otel]` keys of
//! `cronbox.toml`; JSON log lines written in the run carry its trace id;
//! the admin's and the executor's metrics reach the same receiver by OTLP.

use std::path::Path;

use cronbox_api::{HttpCeiling, JobSpec, TriggerRequest};
use cronbox_tests::{OtlpReceiver, ReceivedSpan, TestOrigin, until};

use super::*;

/// The key of the webhook the traced job calls: a secret of the job.
const HOOK_KEY: &str = "a-hook-key-to-mask";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_spans_go_from_the_fire_to_the_guests_http_request() {
    let _turn = TESTS.turn();
    let receiver = OtlpReceiver::start().await;
    let origin = TestOrigin::start().await;
    let data = tempfile::tempdir().unwrap();
    let endpoint = receiver.endpoint();
    let config = data.path().join("cronbox.toml");
    std::fs::write(
        &config,
        "[otel]\nexporter_otlp_headers = \"x-collector-key=k%201\"\nbsp_schedule_delay = 100\n\
         metric_export_interval = 100\n",
    )
    .unwrap();
    let log_path = data.path().join("up.log");
    let (_up, _printed, at) = support::up_logging(
        data.path(),
        None,
        &[
            ("CRONBOX_CONFIG", config.as_path()),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", Path::new(&endpoint)),
            ("CRONBOX_LOG_FORMAT", Path::new("json")),
            ("CRONBOX_LOG", Path::new("warn,cronbox_executor=debug")),
            (
                "CRONBOX_EXECUTOR_HTTP_ALLOW_NETS",
                Path::new("127.0.0.1/32"),
            ),
            (
                "CRONBOX_ADMIN_TRACE_URL",
                Path::new("http://127.0.0.1:16686/trace/{trace_id}"),
            ),
            // The traced job has metrics of its own, its HTTP requests too.
            ("CRONBOX_ADMIN_JOB_METRICS", Path::new("default/traced")),
        ],
        std::fs::File::create(&log_path).unwrap(),
    );
    let token = std::fs::read_to_string(data.path().join("api-token")).unwrap();
    let api = Client::new(&format!("http://{}", at.admin), token.trim());
    api.set_http_ceiling(
        "default",
        &HttpCeiling {
            origins: vec![origin.origin()],
        },
    )
    .await
    .unwrap();
    api.upload(
        cronbox_example_jobs::bytes("http-fetch"),
        Some("http-fetch"),
        &[],
    )
    .await
    .unwrap();
    api.upload(cronbox_example_jobs::bytes("hello"), Some("hello"), &[])
        .await
        .unwrap();
    let child = api
        .create_job(&JobSpec::new("traced-child", "hello"))
        .await
        .unwrap()
        .id;
    // A webhook whose key is in its path, and a secret: the request's
    // span shows the path with the key masked.
    api.set_secret("HOOK_KEY", HOOK_KEY).await.unwrap();
    let spec = JobSpec {
        param: origin.url(&format!("/hooks/{HOOK_KEY}")),
        http_allow: vec![origin.origin()],
        children: vec![child],
        secrets: vec!["HOOK_KEY".to_owned()],
        ..JobSpec::new("traced", "http-fetch")
    };
    let job = api.create_job(&spec).await.unwrap().id;
    // A marked job is looked up at each scrape: this one finds `traced`.
    reqwest::get(format!("http://{}/metrics", at.admin))
        .await
        .unwrap();
    let run_id = api
        .trigger(job, &TriggerRequest::default())
        .await
        .unwrap()
        .run_id;
    let run = until("the traced run ends", || async {
        let run = api.run(run_id).await.ok()?;
        (run.status == RunStatus::Success).then_some(run)
    })
    .await;
    let trace_id = run.trace_id.clone().expect("the run keeps its trace id");
    let trace_url = format!("http://127.0.0.1:16686/trace/{trace_id}");
    assert_eq!(run.trace_url.as_deref(), Some(trace_url.as_str()));
    // `cronbox logs --follow` ends with where the trace is.
    let followed = std::process::Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(["logs", &run_id.to_string(), "--follow"])
        .env("CRONBOX_ADMIN", format!("http://{}", at.admin))
        .env("CRONBOX_API_TOKEN", token.trim())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&followed.stderr);
    assert!(followed.status.success(), "{said}");
    assert!(said.contains(&format!("trace {trace_url}")), "{said}");

    // The child's run: in the parent's trace.
    let child_run = until("the child job's run succeeds", || async {
        let page = api
            .runs(&cronbox_api::RunQuery {
                job: Some(child),
                ..Default::default()
            })
            .await
            .ok()?;
        page.runs
            .into_iter()
            .find(|run| run.status == RunStatus::Success)
    })
    .await;
    assert_eq!(child_run.trace_id.as_deref(), Some(trace_id.as_str()));

    // A workflow's second node starts under its first's end: one trace.
    let workflow: cronbox_api::WorkflowSpec = serde_json::from_value(serde_json::json!({
        "nodes": [
            {"name": "first", "job": "traced-child"},
            {"name": "second", "job": "traced-child"}
        ],
        "edges": [{"from": "first", "to": "second"}]
    }))
    .unwrap();
    api.put_workflow("traced-flow", &workflow).await.unwrap();
    let started = api.start_workflow_run("traced-flow", None).await.unwrap();
    let flow = until("the workflow run succeeds", || async {
        let run = api.workflow_run(started.id).await.ok()?;
        (run.status == cronbox_api::WorkflowRunStatus::Succeeded).then_some(run)
    })
    .await;
    let mut node_traces = Vec::new();
    for node in &flow.nodes {
        let run = api.run(node.run_id.expect("the node ran")).await.unwrap();
        node_traces.push(run.trace_id.expect("a node's run keeps its trace id"));
    }
    assert_eq!(node_traces.len(), 2);
    assert_eq!(node_traces[0], node_traces[1], "{flow:?}");

    // The parent's fire, run, instance, execute, request, end and write;
    // the child's fire and run.
    let wanted = [
        "cronbox.fire",
        "cronbox.run",
        "cronbox.instantiate",
        "GET",
        "cronbox.end",
        "cronbox.write",
    ];
    let spans = until("the runs' spans are exported", || async {
        let spans: Vec<ReceivedSpan> = receiver
            .spans()
            .into_iter()
            .filter(|span| span.trace_id == trace_id)
            .collect();
        let fires = spans
            .iter()
            .filter(|span| span.name == "cronbox.fire")
            .count();
        let all = wanted
            .iter()
            .all(|name| spans.iter().any(|span| span.name == *name));
        (all && fires == 2).then_some(spans)
    })
    .await;
    // A span of `name` under `parent` (`""`: a root).
    let under = |name: &str, parent: &str| {
        spans
            .iter()
            .find(|span| span.name == name && span.parent_span_id == parent)
            .unwrap_or_else(|| panic!("no {name} span under {parent:?} in {spans:#?}"))
    };
    let fire = under("cronbox.fire", "");
    let executed = under("cronbox.run", &fire.span_id);
    under("cronbox.instantiate", &executed.span_id);
    let request = under("GET", &executed.span_id);
    let end = under("cronbox.end", &fire.span_id);
    under("cronbox.write", &end.span_id);
    let child_fire = under("cronbox.fire", &end.span_id);
    under("cronbox.run", &child_fire.span_id);
    assert_eq!(
        end.attributes.get("cronbox.status").map(String::as_str),
        Some("success")
    );
    assert_eq!((fire.kind, executed.kind, request.kind), (4, 5, 3));
    assert_eq!(fire.service, "cronbox");
    let run_id_text = run_id.to_string();
    for (span, key, value) in [
        (fire, "faas.trigger", "http"),
        (fire, "faas.invocation_id", run_id_text.as_str()),
        (fire, "cronbox.tenant", "default"),
        (fire, "cronbox.job", "traced"),
        (fire, "cronbox.kind", "api"),
        (
            fire,
            "cronbox.claimed_at_ms",
            run.created_at_ms.to_string().as_str(),
        ),
        (executed, "cronbox.run_id", run_id_text.as_str()),
        (executed, "cronbox.outcome", "success"),
        (request, "http.request.method", "GET"),
        (request, "http.response.status_code", "200"),
        (request, "url.full", origin.url("/hooks/********").as_str()),
    ] {
        assert_eq!(
            span.attributes.get(key).map(String::as_str),
            Some(value),
            "{key} of {}: {:?}",
            span.name,
            span.attributes
        );
    }
    // The service was called with the request span's context.
    let seen = origin.requests();
    let traceparent = seen
        .iter()
        .find(|request| request.path == format!("/hooks/{HOOK_KEY}"))
        .and_then(|request| request.headers.get("traceparent"))
        .expect("the service received a traceparent");
    assert_eq!(
        traceparent,
        &format!("00-{trace_id}-{}-01", request.span_id)
    );

    // The exporter sent the file's headers (decoded as the variable's).
    assert!(
        receiver
            .header_values("x-collector-key")
            .iter()
            .all(|value| value == "k 1")
            && !receiver.header_values("x-collector-key").is_empty(),
        "{:?}",
        receiver.header_values("x-collector-key")
    );

    // The executor's JSON log line for the run carries its trace.
    let line = until("the run's log line is written", || async {
        let log = std::fs::read_to_string(&log_path).ok()?;
        log.lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .find(|line| {
                line["fields"]["message"] == "run ended"
                    && line["fields"]["run_id"].as_i64().map(|id| id.to_string())
                        == Some(run_id.to_string())
            })
    })
    .await;
    assert_eq!(line["trace_id"], trace_id.as_str(), "{line}");
    assert_eq!(line["span_id"], executed.span_id.as_str(), "{line}");
    assert_eq!(line["fields"]["outcome"], "success", "{line}");

    // The metrics, by OTLP: the admin's runs by tenant and outcome (a
    // counter, so a monotonic sum) and the executor's HTTP requests.
    let sum_of = |metric: &str, pairs: &[(&str, &str)]| {
        receiver
            .points()
            .into_iter()
            .filter(|point| point.metric == metric && point.monotonic)
            .filter(|point| {
                pairs.iter().all(|(key, value)| {
                    point.attributes.get(*key).map(String::as_str) == Some(*value)
                })
            })
            .map(|point| point.value)
            .reduce(f64::max)
    };
    until("the metrics are exported", || async {
        let runs = sum_of(
            "cronbox_admin_tenant_runs",
            &[("tenant", "default"), ("outcome", "success")],
        )?;
        let requests = sum_of(
            "cronbox_executor_tenant_http_requests",
            &[("tenant", "default"), ("outcome", "answered")],
        )?;
        let marked = format!("{job} traced");
        let job_runs = sum_of(
            "cronbox_admin_job_runs",
            &[("job", &marked), ("outcome", "success")],
        )?;
        let job_requests = sum_of(
            "cronbox_executor_job_http_requests",
            &[
                ("tenant", "default"),
                ("job", &marked),
                ("outcome", "answered"),
            ],
        )?;
        (runs >= 2.0 && requests >= 1.0 && job_runs >= 1.0 && job_requests >= 1.0).then_some(())
    })
    .await;
    // Only the marked job has series of its own: its child does not.
    assert!(
        receiver
            .points()
            .iter()
            .filter(|point| point.metric == "cronbox_admin_job_runs")
            .all(|point| point.attributes.get("job") == Some(&format!("{job} traced"))),
        "only the marked job is labelled"
    );
    assert!(
        receiver
            .points()
            .iter()
            .any(|point| point.metric == "cronbox_admin_ready"
                && point.value == 1.0
                && !point.monotonic),
        "the admin's readiness is a gauge"
    );
}
