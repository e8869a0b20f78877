//! Legacy groups of the xxl-job 3.5 line, against stand-in executors
//! written from xxl-job's source (`ExecutorBizImpl`, `TriggerRequest`,
//! `CallbackRequest`, `LogRequest`): they register at `/api/registry` with
//! their appname header, are sent runs at `/trigger` with the group's token
//! and appname, report results in `callbackList`, and serve `/log`. A
//! result with another token changes nothing; retries, children, sharding,
//! FAILOVER, BUSYOVER and workflow nodes apply to legacy jobs as to any.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use cronbox_api::{RunOutcome, WorkflowRunStatus};

use super::workflows::{node, run_to_end, save};
use super::*;

const TOKEN: &str = "token-of-the-3-5-group";
const APP: &str = "app35";

/// A request a stand-in executor was sent.
#[derive(Debug, Clone)]
struct Received {
    /// Which stand-in (its address).
    executor: String,
    path: String,
    token: String,
    appname: String,
    body: Value,
    /// When, in ms since the epoch.
    at_ms: i64,
}

/// What every stand-in of a test was sent, in order.
type Log = Arc<Mutex<Vec<Received>>>;

#[derive(Clone)]
struct StandIn {
    admin: String,
    address: String,
    received: Log,
    /// Answers `/beat` and `/idleBeat` with a failure.
    down: bool,
    /// Runs of handler `flaky` so far, across stand-ins: the first fails.
    flaky_runs: Arc<AtomicUsize>,
}

impl StandIn {
    /// The `/trigger` requests of handler `handler`, in order.
    fn triggers(received: &Log, handler: &str) -> Vec<Received> {
        received
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.path == "/trigger" && r.body["executorHandler"] == handler)
            .cloned()
            .collect()
    }
}

fn header(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// Posts one 3.5 callback for `log_id`, with `token`.
async fn report(admin: &str, token: &str, log_id: &Value, code: u16, message: String) -> Value {
    cronbox_tls::client()
        .post(format!("{admin}/api/callback"))
        .header("XXL-JOB-ACCESS-TOKEN", token)
        .header("XXL-JOB-APPNAME", APP)
        .json(&json!({ "callbackList": [{
            "logId": log_id, "logDateTime": 1, "handleCode": code, "handleMsg": message
        }]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn serve(
    path: &'static str,
    stand_in: StandIn,
    headers: HeaderMap,
    body: Value,
) -> axum::Json<Value> {
    stand_in.received.lock().unwrap().push(Received {
        executor: stand_in.address.clone(),
        path: path.to_owned(),
        token: header(&headers, "XXL-JOB-ACCESS-TOKEN"),
        appname: header(&headers, "XXL-JOB-APPNAME"),
        body: body.clone(),
        at_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64,
    });
    axum::Json(match path {
        "/trigger"
            if !body["executorParams"]
                .as_str()
                .is_some_and(|params| params.starts_with("hold")) =>
        {
            // Accepted into the job's queue; the result comes later.
            let params = body["executorParams"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let (code, message) = if body["executorHandler"] == "flaky"
                && stand_in.flaky_runs.fetch_add(1, Ordering::SeqCst) == 0
            {
                (500, "flaky failed".to_owned())
            } else {
                (200, format!("ran {params}"))
            };
            tokio::spawn(async move {
                report(&stand_in.admin, TOKEN, &body["logId"], code, message).await;
            });
            json!({ "code": 200, "msg": null })
        }
        "/kill" => {
            // As xxl-job's JobThread does: the killed handler's failure is
            // reported, here before the kill is answered.
            let held: Vec<Value> = StandIn::triggers(&stand_in.received, "h")
                .into_iter()
                .filter(|sent| sent.body["executorParams"] == "hold-for-kill")
                .map(|sent| sent.body["logId"].clone())
                .collect();
            for log_id in held {
                let killed = "scheduling center kill job. [job running, killed]";
                report(&stand_in.admin, TOKEN, &log_id, 500, killed.into()).await;
            }
            json!({ "code": 200, "msg": null })
        }
        "/beat" | "/idleBeat" if stand_in.down => json!({ "code": 500, "msg": "down" }),
        "/log" => json!({ "code": 200, "msg": null, "data": {
            "fromLineNum": 1, "toLineNum": 2, "logContent": "line one\nline two\n", "isEnd": true
        }}),
        _ => json!({ "code": 200, "msg": null }),
    })
}

/// Makes group `APP` a 3.5 legacy group with `TOKEN`.
async fn legacy_group(stack: &Stack) {
    let (status, group) = stack
        .call(
            reqwest::Method::PUT,
            &format!("/api/v1/groups/{APP}"),
            Some(json!({ "address_type": "AUTO",
                "legacy": { "protocol": "xxl-job-3.5", "access_token": TOKEN } })),
        )
        .await;
    assert_eq!(status, 200, "{group}");
    assert_eq!(group["legacy"], "xxl-job-3.5");
}

/// Starts `count` stand-in executors (the one whose address sorts first
/// is `down` if asked) and returns their addresses, sorted, unregistered.
async fn stand_ins(stack: &Stack, received: &Log, count: usize, first_down: bool) -> Vec<String> {
    let mut listeners = Vec::new();
    for _ in 0..count {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}/", listener.local_addr().unwrap());
        listeners.push((address, listener));
    }
    listeners.sort_by(|a, b| a.0.cmp(&b.0));
    let flaky_runs = Arc::new(AtomicUsize::new(0));
    let mut addresses = Vec::new();
    for (index, (address, listener)) in listeners.into_iter().enumerate() {
        let stand_in = StandIn {
            admin: stack.base.clone(),
            address: address.clone(),
            received: received.clone(),
            down: first_down && index == 0,
            flaky_runs: flaky_runs.clone(),
        };
        let mut router = axum::Router::new();
        for path in ["/trigger", "/beat", "/idleBeat", "/kill", "/log"] {
            router = router.route(
                path,
                post(
                    move |State(s): State<StandIn>, headers: HeaderMap, body: axum::Json<Value>| {
                        serve(path, s, headers, body.0)
                    },
                ),
            );
        }
        tokio::spawn(async move {
            axum::serve(listener, router.with_state(stand_in))
                .await
                .unwrap()
        });
        addresses.push(address);
    }
    addresses
}

/// A legacy job of `APP` running `handler`, with the fields of `extra`.
fn legacy_spec(name: &str, handler: &str, extra: Value) -> Value {
    let mut spec = json!({ "name": name, "group": APP, "executor_handler": handler });
    spec.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    spec
}

/// Registers `address` in `APP` presenting `appname`; xxl-job's answer.
async fn register(stack: &Stack, appname: &str, address: &str) -> Value {
    stack
        .http
        .post(format!("{}/api/registry", stack.base))
        .header("XXL-JOB-ACCESS-TOKEN", TOKEN)
        .header("XXL-JOB-APPNAME", appname)
        .json(&json!({ "registryGroup": "EXECUTOR", "registryKey": APP,
            "registryValue": address }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_xxl_job_3_5_executor_registers_runs_and_reports_with_its_groups_token() {
    let stack = stack(SchedulerConfig::default()).await;
    legacy_group(&stack).await;
    let received = Log::default();
    let address = stand_ins(&stack, &received, 1, false).await.remove(0);

    // Registered with its appname header; another appname is refused.
    let answer = register(&stack, "another-app", &address).await;
    assert_eq!(answer["code"], 500, "{answer}");
    let answer = register(&stack, APP, &address).await;
    assert_eq!(answer["code"], 200, "{answer}");

    // A job there names a handler; fuel is refused, naming it.
    let (status, refused) = stack
        .call(
            reqwest::Method::POST,
            "/api/v1/jobs",
            Some(json!({ "name": "fuelled", "group": APP, "executor_handler": "h", "fuel": 5 })),
        )
        .await;
    assert_eq!(
        (status, refused["field"].as_str()),
        (422, Some("fuel")),
        "{refused}"
    );
    let job = stack
        .create_as(
            API,
            json!({ "name": "j35", "group": APP, "executor_handler": "h" }),
        )
        .await;

    let run = stack.api.trigger(job, json!({ "param": "p35" })).await;
    let ended = stack.api.ended(run).await;
    assert_eq!(ended.status, RunStatus::Success, "{ended:?}");
    assert_eq!(ended.message.as_deref(), Some("ran p35"));
    let sent = StandIn::triggers(&received, "h").remove(0);
    assert_eq!((sent.token.as_str(), sent.appname.as_str()), (TOKEN, APP));
    assert_eq!(sent.body["executorParams"], "p35");
    assert_eq!(sent.body["logId"], run.wire());
    assert_eq!(sent.body["glueType"], "BEAN");

    // A result with another token changes nothing; with the group's, it ends the run.
    let held = stack.api.trigger(job, json!({ "param": "hold" })).await;
    until("the held run is dispatched", || async {
        (stack.api.run(held).await.status == RunStatus::Dispatched).then_some(())
    })
    .await;
    let log_id = json!(held.wire());
    report(&stack.base, "a-forged-token", &log_id, 200, "forged".into()).await;
    assert_eq!(stack.api.run(held).await.status, RunStatus::Dispatched);
    let (status, log) = stack
        .call(
            reqwest::Method::GET,
            &format!("/api/v1/runs/{held}/log"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{log}");
    let lines: Vec<&str> = log["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|line| line["text"].as_str().unwrap())
        .collect();
    assert_eq!(lines, ["line one", "line two"]);
    report(&stack.base, TOKEN, &log_id, 200, "released".into()).await;
    let released = stack.api.ended(held).await;
    assert_eq!(released.message.as_deref(), Some("released"));

    // A kill ends the run as killed, though the handler's failure came first.
    let doomed = stack
        .api
        .trigger(job, json!({ "param": "hold-for-kill" }))
        .await;
    until("the doomed run is dispatched", || async {
        (stack.api.run(doomed).await.status == RunStatus::Dispatched).then_some(())
    })
    .await;
    let (status, answer) = stack
        .call(
            reqwest::Method::POST,
            &format!("/api/v1/runs/{doomed}/kill"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let killed = stack.api.ended(doomed).await;
    assert_eq!(killed.outcome, Some(RunOutcome::Killed), "{killed:?}");
    let marks: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM legacy_kill")
        .fetch_one(&stack.admin_database().await)
        .await
        .unwrap();
    assert_eq!(marks, 0, "a kill's mark outlives its answer");

    // Scheduled runs reach the executor at their instant, not ahead of it
    // (an xxl-job executor runs what it gets at once).
    let ticking = stack
        .create_as(
            API,
            json!({ "name": "every-second", "group": APP, "executor_handler": "tick",
                "schedule_type": "CRON", "schedule_conf": "* * * * * ?" }),
        )
        .await;
    let (status, _) = stack
        .call(
            reqwest::Method::POST,
            &format!("/api/v1/jobs/{ticking}/start"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    let ticks = until("three scheduled runs reach the executor", || async {
        let ticks = StandIn::triggers(&received, "tick");
        (ticks.len() >= 3).then_some(ticks)
    })
    .await;
    for tick in ticks {
        let instant = tick.body["logDateTime"].as_i64().unwrap();
        assert!(
            tick.at_ms >= instant,
            "a run for {instant} reached the executor {} ms early",
            instant - tick.at_ms
        );
    }
}

/// A result ends only a run that was sent: the group's token on a result
/// for a run written ahead of its instant (and so not sent yet) changes
/// nothing, and the run still runs at its instant and ends with the
/// executor's own result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_ends_only_a_run_that_was_sent() {
    let stack = stack(SchedulerConfig::default()).await;
    legacy_group(&stack).await;
    let received = Log::default();
    let address = stand_ins(&stack, &received, 1, false).await.remove(0);
    let answer = register(&stack, APP, &address).await;
    assert_eq!(answer["code"], 200, "{answer}");
    let job = stack
        .create_as(
            API,
            json!({ "name": "every-ten", "group": APP, "executor_handler": "tick",
                "schedule_type": "CRON", "schedule_conf": "0/10 * * * * ?" }),
        )
        .await;
    let (status, _) = stack
        .call(
            reqwest::Method::POST,
            &format!("/api/v1/jobs/{job}/start"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    // Written by the pre-read up to 5 s ahead of its instant, pending
    // until then.
    let pending = until("a run is written ahead of its instant", || async {
        let runs = stack.api.runs(job).await;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        // A second ahead at least: not one on its way to the executor.
        runs.into_iter()
            .find(|run| run.status == RunStatus::Pending && run.scheduled_at_ms > now + 1_000)
    })
    .await;
    report(
        &stack.base,
        TOKEN,
        &json!(pending.id.wire()),
        200,
        "ended unrun".into(),
    )
    .await;
    assert_eq!(stack.api.run(pending.id).await.status, RunStatus::Pending);
    let ended = stack.api.ended(pending.id).await;
    assert_eq!(ended.status, RunStatus::Success, "{ended:?}");
    assert_eq!(ended.message.as_deref(), Some("ran "), "{ended:?}");
}

/// Retries, children, sharding broadcast, FAILOVER, BUSYOVER and workflow
/// nodes go through the same dispatch for legacy jobs as for modules.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_jobs_are_retried_chained_sharded_failed_over_and_run_as_workflow_nodes() {
    let stack = stack(SchedulerConfig::default()).await;
    legacy_group(&stack).await;
    let received = Log::default();
    // The executor tried first answers no beat and is never idle.
    let addresses = stand_ins(&stack, &received, 2, true).await;
    for address in &addresses {
        assert_eq!(register(&stack, APP, address).await["code"], 200);
    }
    let (down, up) = (&addresses[0], &addresses[1]);
    let legacy = |name: &str, handler: &str, extra: Value| {
        stack.create_as(API, legacy_spec(name, handler, extra))
    };

    // A failed run is retried, as a new attempt.
    let flaky = legacy(
        "flaky",
        "flaky",
        json!({ "retry_count": 1, "retry_interval_ms": 10, "route": "FAILOVER" }),
    )
    .await;
    let first = stack.api.trigger(flaky, json!({ "param": "once" })).await;
    let failed = stack.api.ended(first).await;
    assert_eq!(failed.status, RunStatus::Failed, "{failed:?}");
    assert_eq!(failed.message.as_deref(), Some("flaky failed"));
    let retried = until("the retry succeeds", || async {
        let runs = stack.api.runs(flaky).await;
        runs.into_iter()
            .find(|run| run.attempt == 1 && run.status == RunStatus::Success)
    })
    .await;
    assert_eq!(
        (retried.kind, retried.param.as_str()),
        (TriggerKind::Retry, "once")
    );
    // FAILOVER passed over the executor without a beat, every time.
    let flaky_sent = StandIn::triggers(&received, "flaky");
    assert_eq!(flaky_sent.len(), 2);
    assert!(
        flaky_sent.iter().all(|sent| &sent.executor == up),
        "{flaky_sent:?}"
    );

    // BUSYOVER passes over the busy executor; the child runs after its parent.
    let child = legacy("child", "child", json!({})).await;
    let parent = legacy(
        "parent",
        "parent",
        json!({ "route": "BUSYOVER", "children": [child] }),
    )
    .await;
    let parent_run = stack.run_to_end(parent, "p").await;
    assert_eq!(parent_run.status, RunStatus::Success, "{parent_run:?}");
    assert_eq!(parent_run.executor.as_deref(), Some(up.as_str()));
    let child_run = until("the child runs", || async {
        let runs = stack.api.runs(child).await;
        runs.into_iter()
            .find(|run| run.status == RunStatus::Success)
    })
    .await;
    assert_eq!(child_run.kind, TriggerKind::Parent);

    // A broadcast reaches each executor once, with its shard.
    let shard = legacy("shard", "shard", json!({ "route": "SHARDING_BROADCAST" })).await;
    stack.api.trigger(shard, json!({ "param": "all" })).await;
    until("both shards succeed", || async {
        let runs = stack.api.runs(shard).await;
        (runs
            .iter()
            .filter(|run| run.status == RunStatus::Success)
            .count()
            == 2)
            .then_some(())
    })
    .await;
    let mut shards: Vec<(String, i64, i64)> = StandIn::triggers(&received, "shard")
        .into_iter()
        .map(|sent| {
            (
                sent.executor,
                sent.body["broadcastIndex"].as_i64().unwrap(),
                sent.body["broadcastTotal"].as_i64().unwrap(),
            )
        })
        .collect();
    shards.sort();
    assert_eq!(shards, [(down.clone(), 0, 2), (up.clone(), 1, 2)]);

    // Both probes asked the executor that was down first.
    let probed: Vec<String> = received
        .lock()
        .unwrap()
        .iter()
        .filter(|sent| &sent.executor == down && sent.path != "/trigger")
        .map(|sent| sent.path.clone())
        .collect();
    assert!(
        probed.contains(&"/beat".to_owned()) && probed.contains(&"/idleBeat".to_owned()),
        "{probed:?}"
    );

    // A legacy job is a workflow node; its result message is the node's output.
    legacy("first", "first", json!({ "route": "FAILOVER" })).await;
    legacy("second", "second", json!({ "route": "FAILOVER" })).await;
    save(
        &stack,
        "legacy-flow",
        json!({ "nodes": [{ "name": "a", "job": "first", "param": "x" },
                          { "name": "b", "job": "second", "param": "{{ nodes.a.output }}" }],
                "edges": [{ "from": "a", "to": "b" }] }),
    )
    .await;
    let flow = run_to_end(&stack, "legacy-flow", None).await;
    assert_eq!(flow.status, WorkflowRunStatus::Succeeded, "{flow:#?}");
    assert_eq!(node(&flow, "a").output.as_deref(), Some("ran x"));
    assert_eq!(node(&flow, "b").output.as_deref(), Some("ran ran x"));
    stack.shutdown().await;
}

/// A legacy group granted to a tenant serves that tenant's legacy jobs
/// (and no other tenant's); their failures alarm, and a backfill sends
/// each past instant once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_jobs_of_a_granted_tenant_alarm_and_backfill() {
    let stack = stack(loopback_alarms()).await;
    legacy_group(&stack).await;
    let received = Log::default();
    let address = stand_ins(&stack, &received, 1, false).await.remove(0);
    assert_eq!(register(&stack, APP, &address).await["code"], 200);
    let acme = tenant(&stack, "acme").await;
    let beta = tenant(&stack, "beta").await;
    let (status, granted) = stack
        .call(
            reqwest::Method::PUT,
            &format!("/api/v1/groups/{APP}/tenants"),
            Some(json!({ "tenants": ["acme"] })),
        )
        .await;
    assert_eq!(status, 200, "{granted}");
    let spec = legacy_spec;
    let (status, refused) = stack
        .call_as(
            &beta,
            reqwest::Method::POST,
            "/api/v1/jobs",
            Some(spec("theirs", "h", json!({}))),
        )
        .await;
    assert!(status == 403 || status == 422, "{status} {refused}");

    // A failure alarms the tenant's webhook.
    let receiver = WebhookReceiver::start(200).await;
    let watched = stack
        .create_as(
            &acme,
            spec("watched", "flaky", json!({ "alarm_url": receiver.url() })),
        )
        .await;
    let failed = stack.run_to_end_as(&acme, watched, "once").await;
    assert_eq!(failed.status, RunStatus::Failed, "{failed:?}");
    let alarm = until("the alarm arrives", || async {
        receiver.bodies().first().cloned()
    })
    .await;
    assert_eq!(alarm["event"], "run_failed");
    assert_eq!(alarm["tenant"], "acme");
    assert_eq!(alarm["run"]["id"], failed.id.0);

    // A backfill of the three minutes before this one sends each instant
    // once, as a backfill.
    let minute = next_whole_minute() - 60_000;
    let past = stack
        .create_as(
            &acme,
            spec(
                "minutely",
                "past",
                json!({ "schedule_type": "CRON", "schedule_conf": "0 * * * * ?" }),
            ),
        )
        .await;
    let (status, backfill) = stack
        .call_as(
            &acme,
            reqwest::Method::POST,
            &format!("/api/v1/jobs/{past}/backfill"),
            // The range is after `from_ms`, up to `to_ms`.
            Some(json!({ "from_ms": minute - 180_001, "to_ms": minute - 1 })),
        )
        .await;
    assert_eq!(status, 201, "{backfill}");
    let sent = until("the backfilled instants reach the executor", || async {
        let sent = StandIn::triggers(&received, "past");
        (sent.len() == 3).then_some(sent)
    })
    .await;
    let mut instants: Vec<i64> = sent
        .iter()
        .map(|sent| sent.body["logDateTime"].as_i64().unwrap())
        .collect();
    instants.sort_unstable();
    assert_eq!(
        instants,
        [minute - 180_000, minute - 120_000, minute - 60_000]
    );
    let runs = stack.api.runs(past).await;
    assert!(
        runs.iter().all(|run| run.kind == TriggerKind::Backfill),
        "{runs:?}"
    );
    stack.shutdown().await;
}
