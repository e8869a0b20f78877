//! Requests as the document says: refused uploads, body limits, JSON refusals, U+0000, callbacks, the document itself.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_uploads_are_refused_by_name_and_nothing_is_stored() {
    let stack = stack_with(SchedulerConfig::default(), 1 << 20).await;
    let mut oversized = jobs::bytes("hello");
    oversized.resize(1 << 20 | 1, 0);
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "random bytes",
            b"definitely not wasm".to_vec(),
            422,
            "\\0asm magic",
        ),
        ("an empty body", Vec::new(), 422, "empty"),
        (
            "a core module",
            b"\0asm\x01\0\0\0".to_vec(),
            422,
            "core WebAssembly module",
        ),
        (
            "another world",
            jobs::bytes("wrong-world"),
            422,
            "world cronbox:job/job",
        ),
        (
            "a forbidden import",
            jobs::bytes("foreign-import"),
            422,
            "acme:vault/keys",
        ),
        (
            "a cut component",
            jobs::bytes("hello")[..2000].to_vec(),
            422,
            "not a valid component",
        ),
        ("over the size limit", oversized, 413, "limit"),
    ];
    for (what, bytes, status, message) in cases {
        let (got, error) = stack.upload_as(API, "?name=bad", bytes).await;
        assert_eq!(got, status, "{what}: {error}");
        assert!(
            error["message"]
                .as_str()
                .unwrap_or_default()
                .contains(message),
            "{what}: {error}"
        );
    }
    let (status, error) = stack
        .upload_as(API, "?name=no%20spaces", jobs::bytes("hello"))
        .await;
    assert_eq!(
        (status, error["field"].as_str()),
        (422, Some("name")),
        "{error}"
    );
    let (_, modules) = stack.get("/api/v1/modules").await;
    assert_eq!(modules, json!([]), "nothing stored");
    // The filesystem and sockets link but grant nothing: the upload is
    // stored and its answer names those imports; a plain job's has none.
    let (status, uploaded) = stack
        .upload_as(API, "?name=snooper", jobs::bytes("fs-snooper"))
        .await;
    assert_eq!(status, 201, "{uploaded}");
    let denied = uploaded["denied_imports"].as_array().expect("listed");
    assert!(
        denied
            .iter()
            .any(|import| import.as_str().unwrap().starts_with("wasi:filesystem/")),
        "{uploaded}"
    );
    let (_, uploaded) = stack
        .upload_as(API, "?name=hello", jobs::bytes("hello"))
        .await;
    assert!(uploaded.get("denied_imports").is_none(), "{uploaded}");
    let (status, _) = stack.get("/api/v1/modules/bad/versions").await;
    assert_eq!(status, 404);
    stack.shutdown().await;
}

/// JSON bodies are limited to 1 MiB; an upload to the module size the
/// admin allows (8 MiB here), so a 3 MiB upload reaches the component check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_bodies_are_small_and_uploads_as_large_as_allowed() {
    let stack = stack_with(SchedulerConfig::default(), 8 << 20).await;
    let mut padded = jobs::bytes("hello");
    padded.resize(3 << 20, 0);
    let (status, error) = stack.upload_as(API, "?name=padded", padded).await;
    assert_eq!(status, 422, "checked, not refused for its size: {error}");
    // The admin stops reading a body once it is past the limit, answers
    // and closes the connection: a client still writing the rest saw a
    // broken pipe before the answer. So the request announces 2 MiB and
    // sends only a little more than the limit before reading the answer.
    let (status, error) = refused_past_the_limit(&stack, "/api/v1/jobs", 2 << 20).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (413, Some("payload_too_large")),
        "{error}"
    );
    stack.shutdown().await;
}

/// Every refusal is JSON with the part named, as the OpenAPI document
/// says: a path or query that does not parse, a method the route lacks, a
/// body that is not an object, an integer past 64 bits; an integer written
/// `5.0` is read as 5, and what the body type ignores is not checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_json_naming_the_part_and_integers_are_json_schemas() {
    use reqwest::Method as M;
    let stack = stack(SchedulerConfig::default()).await;
    let refusals = [
        (
            M::GET,
            "/api/v1/jobs/not-a-number",
            None,
            400,
            "bad_request",
        ),
        (
            M::GET,
            "/api/v1/runs/1/log?limit=x",
            None,
            400,
            "invalid_query",
        ),
        (
            M::GET,
            "/api/v1/jobs/1/next-fires?count=101",
            None,
            400,
            "invalid_query",
        ),
        (M::PATCH, "/api/v1/jobs", None, 405, "method_not_allowed"),
        (
            M::PUT,
            "/api/v1/tenants/default/quotas",
            Some(json!([null, null])),
            400,
            "invalid_request",
        ),
        (
            M::PUT,
            "/api/v1/tenants/default/quotas",
            Some(json!({ "jobs": 9_223_372_036_854_775_808_u64 })),
            400,
            "invalid_request",
        ),
    ];
    for (method, path, body, status, code) in refusals {
        let (got, error) = stack.call(method.clone(), path, body).await;
        assert_eq!(
            (got, error["code"].as_str()),
            (status, Some(code)),
            "{method} {path}: {error}"
        );
    }
    let (_, past) = stack
        .call(
            M::PUT,
            "/api/v1/tenants/default/quotas",
            Some(json!({ "jobs": 9_223_372_036_854_775_808_u64 })),
        )
        .await;
    assert_eq!(past["field"], "jobs", "{past}");

    let (status, quotas) = stack
        .call(
            M::PUT,
            "/api/v1/tenants/default/quotas",
            Some(json!({ "jobs": 5.0 })),
        )
        .await;
    assert_eq!(status, 200, "{quotas}");
    let jobs = quotas["quotas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|quota| quota["quota"] == "jobs")
        .unwrap();
    assert_eq!((&jobs["limit"], &jobs["own"]), (&json!(5), &json!(true)));
    // An executor's result may carry fields this admin does not know.
    let (status, answer) = stack
        .api
        .with_token(EXEC)
        .call(
            M::POST,
            "/api/v1/registry",
            Some(json!({ "group": "default", "address": "http://127.0.0.1:9",
                         "later": [9_223_372_036_854_775_808_u64] })),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    stack.shutdown().await;
}

/// No text a caller sends may hold U+0000 (PostgreSQL's text refuses it):
/// in a body or a query it is a 422 naming where it is, in a path a 422
/// too, and nothing is stored; an executor's callback, which reports
/// guests' text as it was, is still accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_holding_nul_is_refused_naming_where_and_nothing_is_stored() {
    use reqwest::Method as M;
    let stack = stack(SchedulerConfig::default()).await;
    let counter = stack.job("counter", "counter", json!({})).await;
    let digest = stack.get(&format!("/api/v1/jobs/{counter}")).await.1["module_digest"].clone();
    let job = |extra: Value| {
        let mut spec = json!({ "name": "nul", "module_digest": digest });
        for (key, value) in extra.as_object().unwrap() {
            spec[key] = value.clone();
        }
        Some(spec)
    };
    let refusals = [
        (
            M::POST,
            "/api/v1/jobs".to_owned(),
            job(json!({ "param": "a\u{0}b" })),
            "param",
        ),
        (
            M::POST,
            "/api/v1/jobs".to_owned(),
            job(json!({ "name": "\u{0}" })),
            "name",
        ),
        (
            M::POST,
            "/api/v1/jobs".to_owned(),
            job(json!({ "config": { "key": "x", "k\u{0}": "v" } })),
            "config",
        ),
        (
            M::PUT,
            format!("/api/v1/jobs/{counter}"),
            job(json!({ "config": { "key": "\u{0}" } })),
            "config.key",
        ),
        (
            M::POST,
            "/api/v1/jobs/batch".to_owned(),
            Some(json!({ "jobs": [job(json!({})), job(json!({ "group": "g\u{0}" }))] })),
            "jobs[1].group",
        ),
        (
            M::PUT,
            format!("/api/v1/jobs/{counter}/state"),
            Some(json!({ "state": { "count": "4\u{0}" } })),
            "state.count",
        ),
        (
            M::POST,
            format!("/api/v1/jobs/{counter}/trigger"),
            Some(json!({ "param": "\u{0}" })),
            "param",
        ),
    ];
    for (method, path, body, field) in refusals {
        let (status, error) = stack.call(method.clone(), &path, body).await;
        assert_eq!(
            (status, error["code"].as_str(), error["field"].as_str()),
            (422, Some("invalid_request"), Some(field)),
            "{method} {path}: {error}"
        );
        assert!(
            error["message"].as_str().unwrap().contains("U+0000"),
            "{error}"
        );
    }
    for (method, path, code, field) in [
        (
            M::GET,
            "/api/v1/jobs?limit=5&search=a%00",
            "invalid_query",
            Some("search"),
        ),
        (M::DELETE, "/api/v1/secrets/a%00b", "invalid_request", None),
    ] {
        let (status, error) = stack.call(method, path, None).await;
        assert_eq!(
            (status, error["code"].as_str(), error["field"].as_str()),
            (422, Some(code), field),
            "{path}: {error}"
        );
        assert!(
            error["message"].as_str().unwrap().contains("%00"),
            "{error}"
        );
    }
    let jobs = stack.api.api.jobs(&Default::default()).await.unwrap();
    assert_eq!(jobs.len(), 1, "nothing stored: {jobs:?}");
    assert_eq!(jobs[0].job.config, Default::default(), "nothing stored");
    let (_, state) = stack.get(&format!("/api/v1/jobs/{counter}/state")).await;
    assert_eq!(state["state"], json!({}), "nothing stored");
    let runs = stack.api.api.job_runs(counter, None, 10).await.unwrap();
    assert!(runs.is_empty(), "nothing triggered: {runs:?}");

    let (status, answer) = stack
        .api
        .with_token(EXEC)
        .call(
            M::POST,
            "/api/v1/callback",
            Some(json!({ "results": [{
                "run_id": 987_654, "job_id": counter, "outcome": "failed",
                "message": "guest text \u{0}", "code": 500, "started_at_ms": 1,
                "duration_ms": 1, "module_digest": digest, "executor": "http://127.0.0.1:9",
            }] })),
        )
        .await;
    assert_eq!(
        status, 200,
        "a callback reports guests' text as it was: {answer}"
    );
    stack.shutdown().await;
}

/// An executor's callback is read straight into its type when it can be,
/// and otherwise as every other body is: the same answers either way. An
/// integer past `i64` (where the type has `u64`s) is refused naming where
/// it is, an integral float is read as its integer, and a body that is not
/// one object is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_are_read_as_the_document_says_whichever_way() {
    use reqwest::Method as M;
    let stack = stack(SchedulerConfig::default()).await;
    let counter = stack.job("counter", "counter", json!({})).await;
    let digest = stack.get(&format!("/api/v1/jobs/{counter}")).await.1["module_digest"].clone();
    let result = |run_id: Value, duration_ms: Value| {
        json!({
            "run_id": run_id, "job_id": counter, "outcome": "failed",
            "message": "m", "code": 500, "started_at_ms": 1,
            "duration_ms": duration_ms, "module_digest": digest,
            "executor": "http://127.0.0.1:9",
        })
    };
    let callback = |body: Value| {
        let stack = &stack;
        async move {
            stack
                .api
                .with_token(EXEC)
                .call(M::POST, "/api/v1/callback", Some(body))
                .await
        }
    };
    let answers = [
        (
            json!({ "results": [result(json!(987_654), json!(1))] }),
            200,
            None,
            None,
        ),
        (
            json!({ "results": [result(json!(987_655), json!(5.0))] }),
            200,
            None,
            None,
        ),
        (
            json!({ "results": [result(json!(u64::MAX), json!(1))] }),
            400,
            Some("invalid_request"),
            Some("results[0].run_id"),
        ),
        (
            json!({ "results": [result(json!(987_656), json!(-1))] }),
            400,
            Some("invalid_request"),
            Some("results[0].duration_ms"),
        ),
        (
            json!([[result(json!(987_657), json!(1))]]),
            400,
            Some("invalid_request"),
            None,
        ),
    ];
    for (body, status, code, field) in answers {
        let (got, answer) = callback(body.clone()).await;
        assert_eq!(
            (got, answer["code"].as_str(), answer["field"].as_str()),
            (status, code, field),
            "{body}: {answer}"
        );
    }
    let cut_short = stack
        .api
        .http
        .post(format!("{}/api/v1/callback", stack.api.base))
        .bearer_auth(EXEC)
        .header("content-type", "application/json")
        .body(r#"{"results": ["#)
        .send()
        .await
        .unwrap();
    assert_eq!(cut_short.status(), 400);
    let answer: Value = cut_short.json().await.unwrap();
    assert_eq!(answer["code"], "malformed_json", "{answer}");
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_is_served_without_a_token() {
    let stack = stack(SchedulerConfig::default()).await;
    let response = stack
        .http
        .get(format!("{}/api/v1/openapi.json", stack.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let document: Value = response.json().await.unwrap();
    assert_eq!(document["openapi"], "3.1.0");
    assert!(document["paths"]["/api/v1/jobs/{id}"]["delete"].is_object());
    stack.shutdown().await;
}
