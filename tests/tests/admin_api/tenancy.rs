//! Tenants: isolation, HTTP grants within ceilings, secrets.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_sees_nothing_of_another_tenant() {
    let stack = stack(SchedulerConfig::default()).await;
    let a = tenant(&stack, "team-a").await;
    let b = tenant(&stack, "team-b").await;
    let (status, error) = stack
        .call(
            reqwest::Method::POST,
            "/api/v1/tenants",
            Some(json!({ "name": "team-a" })),
        )
        .await;
    assert_eq!(status, 409, "{error}");

    // A's world: a named module, a job, a finished run, some state.
    let (status, pushed) = stack
        .upload_as(&a, "?name=counter", jobs::bytes("counter"))
        .await;
    assert_eq!(status, 201, "{pushed}");
    let job = stack
        .create_as(&a, json!({ "name": "a-counter", "module": "counter" }))
        .await;
    let run = stack.run_to_end_as(&a, job, "").await;
    assert_eq!(run.status, RunStatus::Success, "{run:?}");
    assert_eq!(run.tenant, "team-a");
    let run = run.id.0;
    let digest = pushed["digest"].as_str().unwrap();

    // B cannot tell any of it exists.
    use reqwest::Method as M;
    for (method, path, body) in [
        (M::GET, format!("/api/v1/jobs/{job}"), None),
        (
            M::PUT,
            format!("/api/v1/jobs/{job}"),
            Some(json!({ "name": "x", "module": "counter" })),
        ),
        (M::DELETE, format!("/api/v1/jobs/{job}"), None),
        (M::POST, format!("/api/v1/jobs/{job}/start"), None),
        (M::POST, format!("/api/v1/jobs/{job}/stop"), None),
        (
            M::POST,
            format!("/api/v1/jobs/{job}/trigger"),
            Some(json!({})),
        ),
        (M::GET, format!("/api/v1/jobs/{job}/next-fires"), None),
        (M::GET, format!("/api/v1/jobs/{job}/runs"), None),
        (M::GET, format!("/api/v1/jobs/{job}/state"), None),
        (M::GET, format!("/api/v1/runs/{run}"), None),
        (M::POST, format!("/api/v1/runs/{run}/kill"), None),
        (M::GET, format!("/api/v1/runs/{run}/log"), None),
        (M::GET, "/api/v1/modules/counter/versions".to_owned(), None),
        (
            M::POST,
            "/api/v1/modules/counter/rollback".to_owned(),
            Some(json!({ "version": 1 })),
        ),
        (
            M::PUT,
            "/api/v1/modules/counter/labels/x".to_owned(),
            Some(json!({ "version": 1 })),
        ),
    ] {
        let (status, answer) = stack.call_as(&b, method.clone(), &path, body).await;
        assert_eq!(status, 404, "{method} {path} as B: {answer}");
    }
    let (_, jobs) = stack.call_as(&b, M::GET, "/api/v1/jobs", None).await;
    assert_eq!(jobs, json!([]));
    let (_, runs) = stack.call_as(&b, M::GET, "/api/v1/runs", None).await;
    assert_eq!(runs["runs"], json!([]));
    let (_, modules) = stack.call_as(&b, M::GET, "/api/v1/modules", None).await;
    assert_eq!(modules, json!([]));
    // Knowing A's digest does not let B use A's module.
    let (status, error) = stack
        .call_as(
            &b,
            M::POST,
            "/api/v1/jobs",
            Some(json!({ "name": "stolen", "module_digest": digest })),
        )
        .await;
    assert_eq!(
        (status, error["field"].as_str()),
        (422, Some("module_digest")),
        "{error}"
    );
    // B's own objects stay B's.
    let b_job = stack.job_as(&b, "b-hello", "hello", json!({})).await;
    let (status, _) = stack
        .call_as(&a, M::GET, &format!("/api/v1/jobs/{b_job}"), None)
        .await;
    assert_eq!(status, 404);

    // Operator-only routes refuse tenant tokens; the operator sees all.
    for (method, path, body) in [
        (M::GET, "/api/v1/tenants".to_owned(), None),
        (
            M::POST,
            "/api/v1/tenants".to_owned(),
            Some(json!({ "name": "c" })),
        ),
        (M::POST, "/api/v1/tenants/team-b/tokens".to_owned(), None),
        (
            M::PUT,
            "/api/v1/groups/default".to_owned(),
            Some(json!({ "address_type": "AUTO" })),
        ),
    ] {
        let (status, answer) = stack.call_as(&a, method.clone(), &path, body).await;
        assert_eq!(status, 403, "{method} {path} as A: {answer}");
    }
    // A tenant's token acts as the tenant's admin: it edits its own job's
    // state (a developer may), never another tenant's.
    let (status, answer) = stack
        .call_as(
            &a,
            M::PUT,
            &format!("/api/v1/jobs/{job}/state"),
            Some(json!({ "state": { "k": "v" } })),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let (status, _) = stack
        .call_as(
            &a,
            M::PUT,
            &format!("/api/v1/jobs/{b_job}/state"),
            Some(json!({ "state": {} })),
        )
        .await;
    assert_eq!(status, 404);
    let (_, everything) = stack.call(M::GET, "/api/v1/jobs", None).await;
    assert_eq!(everything.as_array().unwrap().len(), 2);

    // Missing, wrong and revoked tokens.
    let (status, _) = stack.call_as("", M::GET, "/api/v1/jobs", None).await;
    assert_eq!(status, 401);
    let (status, _) = stack
        .call_as("cbx_guess", M::GET, "/api/v1/jobs", None)
        .await;
    assert_eq!(status, 401);
    let (status, second) = stack
        .call(
            M::POST,
            "/api/v1/tenants/team-a/tokens",
            Some(json!({ "label": "ci" })),
        )
        .await;
    assert_eq!(status, 201, "{second}");
    let second_token = second["token"].as_str().unwrap();
    let (status, _) = stack
        .call_as(second_token, M::GET, "/api/v1/jobs", None)
        .await;
    assert_eq!(status, 200);
    let (status, _) = stack
        .call(
            M::DELETE,
            &format!("/api/v1/tenants/team-a/tokens/{}", second["token_id"]),
            None,
        )
        .await;
    assert_eq!(status, 200);
    let (status, _) = stack
        .call_as(second_token, M::GET, "/api/v1/jobs", None)
        .await;
    assert_eq!(status, 401, "a revoked token is refused");
    let (_, tenants) = stack.call(M::GET, "/api/v1/tenants", None).await;
    let names: Vec<&str> = tenants
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "team-a", "team-b"]);
    stack.shutdown().await;
}

/// A job's HTTP grants must lie within its tenant's ceiling, which only
/// the operator sets; a granted run reaches the origin and its log says
/// so; a ceiling lowered later takes the grant away from the next run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_grants_lie_within_the_tenants_ceiling_and_reach_the_runs() {
    use reqwest::Method as M;
    let origin = cronbox_tests::TestOrigin::start().await;
    let stack = stack_configured(SchedulerConfig::default(), 16 << 20, |config| {
        config.runtime.http_nets = "127.0.0.1/32".parse().unwrap();
    })
    .await;
    let granted = json!({ "http_allow": [origin.origin()] });
    let (status, _) = stack
        .upload_as(API, "?name=http-probe", jobs::bytes("http-probe"))
        .await;
    assert_eq!(status, 201);
    let definition = |extra: &Value| {
        let mut job = json!({ "name": "prober", "module": "http-probe" });
        job.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        job
    };
    let (status, refused) = stack
        .call(M::POST, "/api/v1/jobs", Some(definition(&granted)))
        .await;
    assert_eq!((status, &refused["field"]), (422, &json!("http_allow")));
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "{} is outside the HTTP ceiling of tenant \"default\", which allows none",
            origin.origin()
        )),
        "{message}"
    );

    // Only the operator sets a ceiling; a tenant may read its own.
    let acme = tenant(&stack, "acme").await;
    let ceiling = json!({ "origins": [origin.origin()] });
    let path = "/api/v1/tenants/acme/http-ceiling";
    let (status, _) = stack
        .call_as(&acme, M::PUT, path, Some(ceiling.clone()))
        .await;
    assert_eq!(status, 403);
    let (status, bad) = stack
        .call(
            M::PUT,
            path,
            Some(json!({ "origins": ["ftp://files.example.com"] })),
        )
        .await;
    assert_eq!((status, &bad["field"]), (422, &json!("origins")), "{bad}");
    let (status, set) = stack.call(M::PUT, path, Some(ceiling.clone())).await;
    assert_eq!((status, &set), (200, &ceiling));
    let (status, seen) = stack.call_as(&acme, M::GET, path, None).await;
    assert_eq!((status, &seen), (200, &ceiling));

    // Within the ceiling, a job is saved (grants in canonical form) and
    // its runs reach the origin.
    let (status, _) = stack
        .upload_as(&acme, "?name=http-probe", jobs::bytes("http-probe"))
        .await;
    assert_eq!(status, 201);
    let spelled = origin.origin().replace("http://", "HTTP://") + "/";
    let limited = json!({ "http_allow": [spelled], "http_limits": { "max_requests": 1 } });
    let job = stack.create_as(&acme, definition(&limited)).await;
    let (_, stored) = stack
        .call_as(&acme, M::GET, &format!("/api/v1/jobs/{job}"), None)
        .await;
    assert_eq!(stored["http_allow"], json!([origin.origin()]), "{stored}");
    assert_eq!(stored["http_limits"]["max_requests"], 1, "{stored}");
    let twice = format!(
        "GET {}\nGET {}",
        origin.url("/bytes/10"),
        origin.url("/bytes/10")
    );
    let run = stack.run_to_end_as(&acme, job, &twice).await;
    let message = run.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("200 10 | error: the request was denied"),
        "{run:?}"
    );
    let (_, log) = stack
        .call_as(&acme, M::GET, &format!("/api/v1/runs/{}/log", run.id), None)
        .await;
    let text: Vec<&str> = log["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|line| line["text"].as_str())
        .collect();
    let port = origin.port();
    assert!(
        text.iter().any(|line| line.starts_with(&format!(
            "http GET http://127.0.0.1:{port} 200, 0 B sent, 10 B received"
        ))),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|line| line.ends_with("denied: the run's limit of 1 requests is reached")),
        "{text:?}"
    );
    for (limits, field) in [
        (json!({ "max_requests": 0 }), "http_limits"),
        (json!({ "max_concurrent": 65 }), "http_limits"),
    ] {
        let (status, refused) = stack
            .call_as(
                &acme,
                M::PUT,
                &format!("/api/v1/jobs/{job}"),
                Some(definition(&json!({ "http_limits": limits }))),
            )
            .await;
        assert_eq!(
            (status, &refused["field"]),
            (422, &json!(field)),
            "{refused}"
        );
    }

    // The operator lowers the ceiling: the saved job keeps its grant, but
    // the next run is sent none.
    let (status, _) = stack
        .call(M::PUT, path, Some(json!({ "origins": [] })))
        .await;
    assert_eq!(status, 200);
    let run = stack
        .run_to_end_as(&acme, job, &format!("GET {}", origin.url("/bytes/10")))
        .await;
    assert!(
        run.message
            .clone()
            .unwrap_or_default()
            .starts_with("error: the request was denied"),
        "{run:?}"
    );
    assert_eq!(origin.requests().len(), 1, "only the first run reached it");
    let metrics = reqwest::get(format!("{}/metrics", stack.executor.address()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for expected in [
        "cronbox_executor_http_requests_total 1\n",
        "cronbox_executor_http_denied_total 2\n",
        "cronbox_executor_http_received_bytes_total 10\n",
    ] {
        assert!(metrics.contains(expected), "{expected} in {metrics}");
    }

    // A stored ceiling that no longer parses is never read as empty (nor
    // as anything else): the run ends naming the column.
    let pool = stack.admin_database().await;
    sqlx::query("UPDATE tenant_http_ceiling SET origins = '[\"ftp://x\"]' WHERE tenant = 'acme'")
        .execute(&pool)
        .await
        .unwrap();
    let run = stack.run_to_end_as(&acme, job, "").await;
    let message = run.message.clone().unwrap_or_default();
    assert!(
        message.contains("HTTP ceiling does not decode") && message.contains("origins"),
        "{run:?}"
    );
    stack.shutdown().await;
}

/// A secret is sealed at rest, write-only through the API, sent only with
/// the runs of its own tenant's jobs that reference it, masked in their
/// log and result, never on the executor's disk; a rotation reaches the
/// next run; deleting one a job references needs force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_reach_only_their_tenants_runs_and_are_never_shown() {
    use reqwest::Method as M;
    let origin = cronbox_tests::TestOrigin::start().await;
    let scheduler = SchedulerConfig {
        secrets: Some(std::sync::Arc::new(cronbox_admin::secrets::SecretBox::new(
            &[42; 32],
        ))),
        ..SchedulerConfig::default()
    };
    let stack = stack_configured(scheduler, 16 << 20, |config| {
        config.runtime.http_nets = "127.0.0.1/32".parse().unwrap();
    })
    .await;
    const ACME: &str = "acme-secret-value-1";
    const ACME_ROTATED: &str = "acme-secret-value-2";
    const BETA: &str = "beta-secret-value-1";
    let mut jobs_of = Vec::new();
    for (name, value) in [("acme", ACME), ("beta", BETA)] {
        let token = tenant(&stack, name).await;
        let (status, set) = stack
            .call(
                M::PUT,
                &format!("/api/v1/tenants/{name}/http-ceiling"),
                Some(json!({ "origins": [origin.origin()] })),
            )
            .await;
        assert_eq!(status, 200, "{set}");
        let (status, secret) = stack
            .call_as(
                &token,
                M::PUT,
                "/api/v1/secrets/NOTIFY_TOKEN",
                Some(json!({ "value": value })),
            )
            .await;
        assert_eq!(status, 200, "{secret}");
        assert_eq!(secret["name"], "NOTIFY_TOKEN");
        assert!(!secret.to_string().contains(value), "{secret}");
        for module in ["notify", "config-echo"] {
            let (status, _) = stack
                .upload_as(&token, &format!("?name={module}"), jobs::bytes(module))
                .await;
            assert_eq!(status, 201);
        }
        let notify = stack
            .create_as(
                &token,
                json!({
                    "name": "notify", "module": "notify", "secrets": ["NOTIFY_TOKEN"],
                    "config": { "url": origin.url("/echo") },
                    "http_allow": [origin.origin()],
                }),
            )
            .await;
        let echo = stack
            .create_as(
                &token,
                json!({ "name": "echo", "module": "config-echo", "secrets": ["NOTIFY_TOKEN"] }),
            )
            .await;
        jobs_of.push((token, notify, echo));
    }
    let (acme, acme_notify, acme_echo) = &jobs_of[0];
    let (beta, beta_notify, _) = &jobs_of[1];

    // Each tenant's job sends its own tenant's value.
    for (token, job) in [(acme, acme_notify), (beta, beta_notify)] {
        let run = stack.run_to_end_as(token, *job, "deployed").await;
        assert_eq!(run.message.as_deref(), Some("notified (200)"), "{run:?}");
    }
    let authorizations: Vec<String> = origin
        .requests()
        .iter()
        .map(|request| request.headers["authorization"].clone())
        .collect();
    assert_eq!(
        authorizations,
        [format!("Bearer {ACME}"), format!("Bearer {BETA}")]
    );

    // Printed by the job, it is masked in the log and the result.
    let run = stack.run_to_end_as(acme, *acme_echo, "NOTIFY_TOKEN").await;
    assert_eq!(run.message.as_deref(), Some("********"), "{run:?}");
    let (_, log) = stack
        .call_as(acme, M::GET, &format!("/api/v1/runs/{}/log", run.id), None)
        .await;
    assert!(log.to_string().contains("NOTIFY_TOKEN = ********"), "{log}");
    let mut answers = vec![log];
    for path in [
        format!("/api/v1/runs/{}", run.id),
        format!("/api/v1/jobs/{acme_echo}"),
        "/api/v1/secrets".to_owned(),
        format!("/api/v1/jobs/{acme_echo}/runs"),
    ] {
        let (status, answer) = stack.call_as(acme, M::GET, &path, None).await;
        assert_eq!(status, 200, "{path}: {answer}");
        answers.push(answer);
    }
    assert_eq!(answers[2]["secrets"], json!(["NOTIFY_TOKEN"]));
    let listed = &answers[3][0];
    assert_eq!(
        (&listed["name"], &listed["used_by"]),
        (&json!("NOTIFY_TOKEN"), &json!([acme_notify, acme_echo]))
    );
    for answer in &answers {
        for value in [ACME, BETA] {
            assert!(!answer.to_string().contains(value), "{answer}");
        }
    }

    // A name the tenant does not have is refused; a rotation reaches the
    // next run.
    let (status, refused) = stack
        .call_as(
            beta,
            M::POST,
            "/api/v1/jobs",
            Some(json!({ "name": "x", "module": "config-echo", "secrets": ["ACME_ONLY"] })),
        )
        .await;
    assert_eq!(
        (status, &refused["field"]),
        (422, &json!("secrets")),
        "{refused}"
    );
    let (status, _) = stack
        .call_as(
            acme,
            M::PUT,
            "/api/v1/secrets/NOTIFY_TOKEN",
            Some(json!({ "value": ACME_ROTATED })),
        )
        .await;
    assert_eq!(status, 200);
    let run = stack.run_to_end_as(acme, *acme_notify, "rotated").await;
    assert_eq!(run.message.as_deref(), Some("notified (200)"), "{run:?}");
    assert_eq!(
        origin.requests()[2].headers["authorization"],
        format!("Bearer {ACME_ROTATED}")
    );

    // Deleting a referenced secret needs force.
    let (status, refused) = stack
        .call_as(acme, M::DELETE, "/api/v1/secrets/NOTIFY_TOKEN", None)
        .await;
    assert_eq!(
        (status, &refused["code"]),
        (409, &json!("secret_in_use")),
        "{refused}"
    );
    let (status, deleted) = stack
        .call_as(
            acme,
            M::DELETE,
            "/api/v1/secrets/NOTIFY_TOKEN?force=true",
            None,
        )
        .await;
    assert_eq!(status, 200, "{deleted}");
    assert_eq!(
        deleted["still_referenced_by"],
        json!([acme_notify, acme_echo])
    );

    // Nothing on disk holds a value: the admin's database (a stolen copy
    // reveals nothing without the key) and the executor's spool and cache.
    let data = stack.shutdown_keeping_data().await;
    let mut files = vec![data.path().to_owned()];
    let mut seen = 0;
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(
                std::fs::read_dir(&path)
                    .unwrap()
                    .map(|entry| entry.unwrap().path()),
            );
            continue;
        }
        // The admin's store closed with its shutdown: SQLite's log was
        // folded into the database and removed before this walk began.
        let bytes = std::fs::read(&path).unwrap();
        seen += 1;
        for value in [ACME, ACME_ROTATED, BETA] {
            assert!(
                !bytes
                    .windows(value.len())
                    .any(|window| window == value.as_bytes()),
                "{value} in {}",
                path.display()
            );
        }
    }
    assert!(seen > 3, "the data directory held the database and spool");
}
