//! A legacy group of the xxl-job 3.5 line, against a stand-in executor
//! written from xxl-job's source (`ExecutorBizImpl`, `TriggerRequest`,
//! `CallbackRequest`, `LogRequest`): it registers at `/api/registry` with
//! its appname header, is sent runs at `/trigger` with the group's token and
//! appname, reports results in `callbackList`, and serves `/log`. A result
//! with another token changes nothing.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;

use super::*;

const TOKEN: &str = "token-of-the-3-5-group";
const APP: &str = "app35";

/// What the stand-in executor was sent: (path, token, appname, body, when
/// in ms since the epoch).
type Received = Arc<Mutex<Vec<(String, String, String, Value, i64)>>>;

#[derive(Clone)]
struct StandIn {
    admin: String,
    received: Received,
}

fn header(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// Posts one 3.5 callback for `log_id`, with `token`.
async fn report(admin: &str, token: &str, log_id: &Value, message: String) -> Value {
    reqwest::Client::new()
        .post(format!("{admin}/api/callback"))
        .header("XXL-JOB-ACCESS-TOKEN", token)
        .header("XXL-JOB-APPNAME", APP)
        .json(&json!({ "callbackList": [{
            "logId": log_id, "logDateTime": 1, "handleCode": 200, "handleMsg": message
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
    stand_in.received.lock().unwrap().push((
        path.to_owned(),
        header(&headers, "XXL-JOB-ACCESS-TOKEN"),
        header(&headers, "XXL-JOB-APPNAME"),
        body.clone(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64,
    ));
    axum::Json(match path {
        "/trigger" if body["executorParams"] != "hold" => {
            // Accepted into the job's queue; the result comes later.
            let params = body["executorParams"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            tokio::spawn(async move {
                report(
                    &stand_in.admin,
                    TOKEN,
                    &body["logId"],
                    format!("ran {params}"),
                )
                .await;
            });
            json!({ "code": 200, "msg": null })
        }
        "/log" => json!({ "code": 200, "msg": null, "data": {
            "fromLineNum": 1, "toLineNum": 2, "logContent": "line one\nline two\n", "isEnd": true
        }}),
        _ => json!({ "code": 200, "msg": null }),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_xxl_job_3_5_executor_registers_runs_and_reports_with_its_groups_token() {
    let stack = stack(SchedulerConfig::default()).await;
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

    let received = Received::default();
    let stand_in = StandIn {
        admin: stack.base.clone(),
        received: received.clone(),
    };
    let routes = ["/trigger", "/beat", "/idleBeat", "/kill", "/log"];
    let mut router = axum::Router::new();
    for path in routes {
        router = router.route(
            path,
            post(
                move |State(s): State<StandIn>, headers: HeaderMap, body: axum::Json<Value>| {
                    serve(path, s, headers, body.0)
                },
            ),
        );
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, router.with_state(stand_in))
            .await
            .unwrap()
    });

    // Registered with its appname header; another appname is refused.
    let register = |appname: &'static str| {
        stack
            .http
            .post(format!("{}/api/registry", stack.base))
            .header("XXL-JOB-ACCESS-TOKEN", TOKEN)
            .header("XXL-JOB-APPNAME", appname)
            .json(&json!({ "registryGroup": "EXECUTOR", "registryKey": APP,
                "registryValue": address }))
            .send()
    };
    let answer: Value = register("another-app").await.unwrap().json().await.unwrap();
    assert_eq!(answer["code"], 500, "{answer}");
    let answer: Value = register(APP).await.unwrap().json().await.unwrap();
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
    let (path, token, appname, body, _) = received
        .lock()
        .unwrap()
        .iter()
        .find(|(path, ..)| path == "/trigger")
        .cloned()
        .unwrap();
    assert_eq!(
        (path.as_str(), token.as_str(), appname.as_str()),
        ("/trigger", TOKEN, APP)
    );
    assert_eq!(body["executorHandler"], "h");
    assert_eq!(body["executorParams"], "p35");
    assert_eq!(body["logId"], run.wire());
    assert_eq!(body["glueType"], "BEAN");

    // A result with another token changes nothing; with the group's, it ends the run.
    let held = stack.api.trigger(job, json!({ "param": "hold" })).await;
    until("the held run is dispatched", || async {
        (stack.api.run(held).await.status == RunStatus::Dispatched).then_some(())
    })
    .await;
    let log_id = json!(held.wire());
    report(&stack.base, "a-forged-token", &log_id, "forged".into()).await;
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
    report(&stack.base, TOKEN, &log_id, "released".into()).await;
    let released = stack.api.ended(held).await;
    assert_eq!(released.message.as_deref(), Some("released"));

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
    let ticks = until("three scheduled runs reach the executor", || async {
        let ticks: Vec<(i64, i64)> = received
            .lock()
            .unwrap()
            .iter()
            .filter(|(path, _, _, body, _)| path == "/trigger" && body["executorHandler"] == "tick")
            .map(|(_, _, _, body, at)| (body["logDateTime"].as_i64().unwrap(), *at))
            .collect();
        (ticks.len() >= 3).then_some(ticks)
    })
    .await;
    assert_eq!(status, 200);
    for (instant, received_at) in ticks {
        assert!(
            received_at >= instant,
            "a run for {instant} reached the executor {} ms early",
            instant - received_at
        );
    }
}
