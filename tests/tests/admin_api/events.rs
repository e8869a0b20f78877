//! A run followed through its event stream (`GET /api/v1/runs/{id}/events`).

use super::*;

/// The server-sent events of one response, as (event, data) in order,
/// read until the stream ends.
async fn events_of(response: reqwest::Response) -> Vec<(String, Value)> {
    let mut response = response;
    let mut text = String::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    text.split("\n\n")
        .filter_map(|block| {
            let mut name = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("event:") {
                    name = Some(value.trim().to_owned());
                } else if let Some(value) = line.strip_prefix("data:") {
                    data.push_str(value.trim_start());
                }
            }
            Some((name?, serde_json::from_str(&data).unwrap()))
        })
        .collect()
}

/// A follower sees the run as it changes, its log line while it runs (the
/// job sleeps after writing it), and its end after every line; then the
/// stream ends. Nothing is polled by the follower.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_followed_through_its_events_to_its_end() {
    let stack = stack(SchedulerConfig::default()).await;
    let sleeper = stack.job("sleeper", "sleeper", json!({})).await;
    // A run that is executing reads as started, with its time, at once.
    let watched = stack.api.trigger(sleeper, json!({ "param": "1500" })).await;
    let started = until("the run reads as started", || async {
        let (_, read) = stack.get(&format!("/api/v1/runs/{watched}")).await;
        read["started_at_ms"].as_i64()
    })
    .await;
    let (_, read) = stack.get(&format!("/api/v1/runs/{watched}")).await;
    assert_eq!(
        (read["status"].as_str(), read["finished_at_ms"].as_i64()),
        (Some("dispatched"), None),
        "still running: {read}"
    );
    assert!(started > 0);
    let run = stack.api.trigger(sleeper, json!({ "param": "1500" })).await;
    let response = stack
        .http
        .get(format!("{}/api/v1/runs/{run}/events", stack.base))
        .bearer_auth(API)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let events = events_of(response).await;
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names.first(), Some(&"run"), "{names:?}");
    assert_eq!(names.last(), Some(&"end"), "{names:?}");
    // The line came while the run was still running: before any run event
    // that says it ended.
    let logged = events
        .iter()
        .position(|(name, data)| {
            name == "log"
                && data["lines"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|line| line["text"] == "sleeping 1500 ms")
        })
        .unwrap_or_else(|| panic!("no log line: {events:?}"));
    let first_ended = events
        .iter()
        .position(|(_, data)| data["status"] == "success")
        .unwrap();
    assert!(logged < first_ended, "{events:?}");
    // Running was shown while it ran: dispatched, with the start its
    // executor tells (the row has it only from the run's end).
    assert!(
        events[..first_ended]
            .iter()
            .any(|(name, data)| name == "run"
                && data["status"] == "dispatched"
                && data["started_at_ms"].as_i64().is_some()),
        "{events:?}"
    );
    let (_, end) = events.last().unwrap();
    assert_eq!(end["id"], run.to_string().parse::<i64>().unwrap());
    assert_eq!(end["outcome"], "success");

    // An ended run: its row, its stored log from the offset asked, its end.
    let response = stack
        .http
        .get(format!("{}/api/v1/runs/{run}/events?offset=0", stack.base))
        .bearer_auth(API)
        .send()
        .await
        .unwrap();
    let again = events_of(response).await;
    let names: Vec<&str> = again.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["run", "log", "end"], "{again:?}");
    // An unknown run is 404, before any stream.
    let (status, body) = stack.get("/api/v1/runs/999999/events").await;
    assert_eq!(status, 404, "{body}");
    stack.shutdown().await;
}
