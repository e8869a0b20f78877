//! Inside a tenant: secrets, executor groups, names and labels, rules, upload room.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_role_that_manages_secrets_has_code_read_them() {
    let admin = admin().await;
    let (owner, developer) = admin.acme_admin_and_developer().await;

    let (status, body) = owner
        .call(
            Method::PUT,
            "/api/v1/secrets/API_KEY",
            Some(json!({ "value": "the-secret-value" })),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = owner.upload("?name=reader", jobs::bytes("hello")).await;
    assert_eq!(status, 201, "{body}");

    // A developer names no secret in a job.
    let mut reads_secret = a_job("reads", "reader");
    reads_secret["secrets"] = json!(["API_KEY"]);
    let (status, body) = developer
        .call(Method::POST, "/api/v1/jobs", Some(reads_secret.clone()))
        .await;
    assert_eq!((status, &body["field"]), (403, &json!("secrets")), "{body}");
    let (status, body) = developer
        .call(
            Method::POST,
            "/api/v1/jobs/batch",
            Some(json!({ "jobs": [a_job("plain", "reader"), reads_secret.clone()] })),
        )
        .await;
    assert_eq!(
        (status, &body["field"]),
        (403, &json!("jobs[1].secrets")),
        "{body}"
    );
    assert_eq!(developer.get("/api/v1/secrets").await.0, 403);

    // An admin's job that reads one: the developer changes neither it nor
    // the code it follows, and still runs it.
    let (status, job) = owner
        .call(Method::POST, "/api/v1/jobs", Some(reads_secret.clone()))
        .await;
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_i64().unwrap();
    let mut changed = reads_secret.clone();
    changed["param"] = json!("print everything");
    let (status, body) = developer
        .call(Method::PUT, &format!("/api/v1/jobs/{id}"), Some(changed))
        .await;
    assert_eq!((status, &body["field"]), (403, &json!("secrets")), "{body}");
    let (status, body) = developer
        .upload("?name=reader", jobs::bytes("counter"))
        .await;
    assert_eq!((status, &body["field"]), (403, &json!("name")), "{body}");
    let (status, body) = developer
        .call(
            Method::POST,
            "/api/v1/modules/reader/rollback",
            Some(json!({ "version": 1 })),
        )
        .await;
    assert_eq!((status, &body["field"]), (403, &json!("name")), "{body}");
    let (status, body) = developer
        .call(Method::DELETE, &format!("/api/v1/jobs/{id}"), None)
        .await;
    assert_eq!((status, &body["field"]), (403, &json!("secrets")), "{body}");
    let (status, body) = developer
        .call(Method::POST, &format!("/api/v1/jobs/{id}/stop"), None)
        .await;
    assert_ne!(status, 403, "{body}");
    // `cronbox dev` sources in a run's parameter are code: the developer
    // runs the job with a parameter, not with sources; the admin may.
    let trigger = format!("/api/v1/jobs/{id}/trigger");
    let sources = json!({
        "param": format!(
            "{}:{{\"files\":{{\"app.py\":\"print(1)\"}},\"param\":\"\"}}}}",
            cronbox_api::DEV_SOURCES_PREFIX
        )
    });
    let (status, body) = developer
        .call(Method::POST, &trigger, Some(sources.clone()))
        .await;
    assert_eq!((status, &body["field"]), (403, &json!("param")), "{body}");
    let (status, body) = developer
        .call(Method::POST, &trigger, Some(json!({ "param": "a day" })))
        .await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = owner.call(Method::POST, &trigger, Some(sources)).await;
    assert_eq!(status, 202, "{body}");

    // Modules and jobs no secret touches are the developer's as before.
    let (status, body) = developer
        .upload("?name=scratch", jobs::bytes("counter"))
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = developer
        .call(Method::POST, "/api/v1/jobs", Some(a_job("mine", "scratch")))
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = owner.upload("?name=reader", jobs::bytes("counter")).await;
    assert_eq!((status, &body["jobs_moved"]), (201, &json!(1)), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executor_groups_are_the_operators_to_grant() {
    let admin = admin().await;
    let acme = admin.tenant("acme").await;
    let globex = admin.tenant("globex").await;
    for (group, spec) in [
        ("etl", json!({ "address_type": "AUTO" })),
        (
            "private",
            json!({ "address_type": "MANUAL", "addresses": ["http://127.0.0.1:9"] }),
        ),
    ] {
        let (status, body) = admin
            .operator
            .call(Method::PUT, &format!("/api/v1/groups/{group}"), Some(spec))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    for tenant in [&acme, &globex] {
        let (status, body) = tenant.upload("?name=hello", jobs::bytes("hello")).await;
        assert_eq!(status, 201, "{body}");
    }
    let in_group = |group: &str| {
        let mut job = a_job("j", "hello");
        job["group"] = json!(group);
        job
    };

    // Another tenant's (or the operator's) MANUAL group is refused,
    // naming the field and no address; the shared `default` is not.
    let (status, body) = acme
        .call(Method::POST, "/api/v1/jobs", Some(in_group("private")))
        .await;
    assert_eq!((status, &body["field"]), (422, &json!("group")), "{body}");
    assert!(!body.to_string().contains("127.0.0.1"), "{body}");
    let (status, body) = acme
        .call(Method::POST, "/api/v1/jobs", Some(in_group("default")))
        .await;
    assert_eq!(status, 201, "{body}");

    // A tenant lists the groups it may use, without addresses.
    let names = |groups: &Value| -> Vec<String> {
        groups
            .as_array()
            .unwrap()
            .iter()
            .map(|group| group["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, groups) = acme.get("/api/v1/groups").await;
    assert_eq!(status, 200);
    assert_eq!(names(&groups), ["default"], "{groups}");
    assert!(!groups.to_string().contains("127.0.0.1"), "{groups}");

    // The operator grants a group; only the tenant granted gains it.
    let (status, body) = acme
        .call(
            Method::PUT,
            "/api/v1/groups/etl/tenants",
            Some(json!({ "tenants": ["acme"] })),
        )
        .await;
    assert_eq!(status, 403, "a tenant grants nothing: {body}");
    let (status, granted) = admin
        .operator
        .call(
            Method::PUT,
            "/api/v1/groups/etl/tenants",
            Some(json!({ "tenants": ["acme"] })),
        )
        .await;
    assert_eq!(status, 200, "{granted}");
    assert_eq!(granted["tenants"], json!(["acme"]));
    let (status, body) = acme
        .call(Method::POST, "/api/v1/jobs", Some(in_group("etl")))
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = globex
        .call(Method::POST, "/api/v1/jobs", Some(in_group("etl")))
        .await;
    assert_eq!((status, &body["field"]), (422, &json!("group")), "{body}");
    assert_eq!(
        names(&acme.get("/api/v1/groups").await.1),
        ["default", "etl"]
    );
    let (_, everything) = admin.operator.get("/api/v1/groups").await;
    assert!(
        everything.to_string().contains("http://127.0.0.1:9"),
        "the operator sees addresses: {everything}"
    );
    let (status, body) = admin
        .operator
        .call(
            Method::PUT,
            "/api/v1/groups/etl/tenants",
            Some(json!({ "tenants": ["ghost"] })),
        )
        .await;
    assert_eq!((status, &body["field"]), (422, &json!("tenants")), "{body}");
    let (status, _) = admin
        .operator
        .call(
            Method::PUT,
            "/api/v1/groups/nowhere/tenants",
            Some(json!({ "tenants": ["*"] })),
        )
        .await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_labels_and_rules_are_refused_naming_the_field() {
    let admin = admin().await;
    let acme = admin.tenant("acme").await;
    let (status, body) = acme.upload("?name=hello", jobs::bytes("hello")).await;
    assert_eq!(status, 201, "{body}");

    for name in ["\u{1b}[2Jclean", "two\r\nlines", "tab\there"] {
        let (status, body) = acme
            .call(Method::POST, "/api/v1/jobs", Some(a_job(name, "hello")))
            .await;
        assert_eq!((status, &body["field"]), (422, &json!("name")), "{body}");
    }
    for label in ["stable%0D%0A", "a%2Cb", "%09tab", "stable%0B"] {
        let (status, body) = acme
            .call(
                Method::PUT,
                &format!("/api/v1/modules/hello/labels/{label}"),
                Some(json!({ "version": 1 })),
            )
            .await;
        assert_eq!(
            (status, &body["field"]),
            (422, &json!("label")),
            "{label}: {body}"
        );
    }
    let (status, body) = acme
        .call(
            Method::PUT,
            "/api/v1/modules/hello/labels/stable",
            Some(json!({ "version": 1 })),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    // An instant past chrono's range is refused, not dropped.
    for field in ["starts_at_ms", "ends_at_ms"] {
        let mut job = a_job("windowed", "hello");
        job["schedule_type"] = json!("FIX_RATE");
        job["schedule_conf"] = json!("60");
        job["schedule_rules"] = json!({ field: 9_000_000_000_000_000_i64 });
        let (status, body) = acme.call(Method::POST, "/api/v1/jobs", Some(job)).await;
        assert_eq!(
            (status, &body["field"]),
            (422, &json!(format!("schedule_rules.{field}"))),
            "{body}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_are_read_within_bounded_room() {
    // Room for four of the largest uploads (64 KiB, with a 64 KiB
    // envelope): four stalled ones take all of it.
    let admin = admin_with(64 << 10).await;
    let address = admin.base.trim_start_matches("http://").to_owned();
    let mut stalled = Vec::new();
    for _ in 0..4 {
        let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
        let head = format!(
            "POST /api/v1/modules HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {API}\r\n\
             Content-Type: application/wasm\r\nContent-Length: {}\r\n\r\n",
            128 << 10
        );
        socket.write_all(head.as_bytes()).await.unwrap();
        socket.write_all(&[0; 1024]).await.unwrap();
        stalled.push(socket);
    }
    let probe = || async {
        let (status, body) = admin.operator.upload("", b"\0asm".to_vec()).await;
        (status, body)
    };
    let (status, body) = until("the stalled uploads hold the room", || async {
        let (status, body) = probe().await;
        (status == 503).then_some((status, body))
    })
    .await;
    assert_eq!((status, &body["code"]), (503, &json!("uploads_busy")));

    // One goes away: its room is free again.
    drop(stalled.pop());
    let (status, body) = until("a closed upload frees its room", || async {
        let (status, body) = probe().await;
        (status != 503).then_some((status, body))
    })
    .await;
    assert_eq!(status, 422, "read and refused as no component: {body}");
    drop(stalled);
}
