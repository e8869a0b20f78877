//! Job definitions: deletion, configuration, listings, batches, module versions.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_is_deleted_unless_it_is_a_child() {
    let stack = stack(SchedulerConfig::default()).await;
    let child = stack.job("child", "hello", json!({})).await;
    let parent = stack
        .job("parent", "hello", json!({ "children": [child] }))
        .await;
    let run = stack.run_to_end(child, "once").await;

    let (status, error) = stack
        .call(
            reqwest::Method::DELETE,
            &format!("/api/v1/jobs/{child}"),
            None,
        )
        .await;
    assert_eq!(status, 409, "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("parent"),
        "{error}"
    );
    let (status, _) = stack.get(&format!("/api/v1/jobs/{child}")).await;
    assert_eq!(status, 200, "still there");

    for id in [parent, child] {
        let (status, body) = stack
            .call(reqwest::Method::DELETE, &format!("/api/v1/jobs/{id}"), None)
            .await;
        assert_eq!(status, 200, "{body}");
        let (status, _) = stack.get(&format!("/api/v1/jobs/{id}")).await;
        assert_eq!(status, 404);
    }
    let (status, _) = stack
        .call(
            reqwest::Method::DELETE,
            &format!("/api/v1/jobs/{child}"),
            None,
        )
        .await;
    assert_eq!(status, 404, "deleting twice");
    let (status, kept) = stack.get(&format!("/api/v1/runs/{}", run.id.0)).await;
    assert_eq!((status, &kept["message"]), (200, &json!("hello, once")));
    stack.shutdown().await;
}

/// A job's configuration is stored with it, answered with it, sent with
/// each run and read by the guest; past its bounds it is refused naming
/// `config`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_configuration_reaches_its_runs() {
    let stack = stack(SchedulerConfig::default()).await;
    let job = stack
        .job_as(
            API,
            "greeter",
            "config-echo",
            json!({ "config": { "greeting": "hi" } }),
        )
        .await;
    let (_, stored) = stack.get(&format!("/api/v1/jobs/{job}")).await;
    assert_eq!(stored["config"], json!({ "greeting": "hi" }), "{stored}");
    let run = stack.run_to_end(job, "greeting").await;
    assert_eq!(run.message.as_deref(), Some("hi"), "{run:?}");
    // This admin has no secrets key: secrets cannot be set.
    let (status, refused) = stack
        .call(
            reqwest::Method::PUT,
            "/api/v1/secrets/TOKEN",
            Some(json!({ "value": "x" })),
        )
        .await;
    assert_eq!(
        (status, &refused["code"]),
        (409, &json!("secrets_disabled"))
    );

    let many: serde_json::Map<String, Value> = (0..65)
        .map(|key| (format!("k{key}"), Value::from("v")))
        .collect();
    for config in [
        json!({ "": "empty key" }),
        json!({ "big": "v".repeat(5000) }),
        Value::Object(many),
    ] {
        let (status, refused) = stack
            .call(
                reqwest::Method::PUT,
                &format!("/api/v1/jobs/{job}"),
                Some(json!({ "name": "greeter", "module": "config-echo", "config": config })),
            )
            .await;
        assert_eq!(
            (status, &refused["field"]),
            (422, &json!("config")),
            "{refused}"
        );
    }
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_listed_by_filter_and_page() {
    let stack = stack(SchedulerConfig::default()).await;
    let api = &stack.api;
    let (status, _) = api
        .call(
            reqwest::Method::PUT,
            "/api/v1/groups/batch",
            Some(json!({ "address_type": "AUTO" })),
        )
        .await;
    assert_eq!(status, 200);
    let mut ids = Vec::new();
    for (name, group) in [
        ("a", "default"),
        ("b", "batch"),
        ("b", "default"),
        ("c", "batch"),
        ("d", "default"),
    ] {
        ids.push(
            stack
                .job(
                    name,
                    "hello",
                    json!({ "group": group, "schedule_type": "FIX_RATE", "schedule_conf": "3600" }),
                )
                .await,
        );
    }
    api.call(
        reqwest::Method::POST,
        &format!("/api/v1/jobs/{}/start", ids[4]),
        None,
    )
    .await;
    let page = |query: &'static str| async move {
        let (status, jobs) = api.get(&format!("/api/v1/jobs{query}")).await;
        assert_eq!(status, 200, "{query}: {jobs}");
        jobs.as_array()
            .unwrap()
            .iter()
            .map(|job| JobId(job["id"].as_i64().unwrap()))
            .collect::<Vec<JobId>>()
    };
    // Pages of two, each after the last id of the one before.
    let first = page("?limit=2").await;
    assert_eq!(first, ids[..2]);
    let (_, next) = api
        .get(&format!("/api/v1/jobs?limit=2&after={}", first[1]))
        .await;
    let next: Vec<JobId> = next
        .as_array()
        .unwrap()
        .iter()
        .map(|job| JobId(job["id"].as_i64().unwrap()))
        .collect();
    assert_eq!(next, ids[2..4]);
    assert_eq!(page("?name=b").await, [ids[1], ids[2]]);
    assert_eq!(page("?group=batch").await, [ids[1], ids[3]]);
    assert_eq!(page("?enabled=true").await, [ids[4]]);
    assert_eq!(page("?group=default&enabled=false").await, [ids[0], ids[2]]);
    // A part of the name in any letter case; a schedule type; a module.
    assert_eq!(page("?search=B").await, [ids[1], ids[2]]);
    assert_eq!(page("?search=%25").await, [], "% is taken literally");
    assert_eq!(page("?schedule_type=fix_rate").await, ids);
    assert_eq!(page("?schedule_type=CRON").await, []);
    api.api
        .upload(jobs::bytes("hello"), Some("greeter"), &[])
        .await
        .unwrap();
    let named = api
        .api
        .create_job(&JobSpec::new("named", "greeter"))
        .await
        .unwrap()
        .id;
    assert_eq!(page("?module=greeter").await, [named]);
    assert_eq!(page("?module=greeter&search=NAM").await, [named]);
    // Three characters or more go through the index of names' trigrams,
    // which follows renames and deletions.
    assert_eq!(page("?search=aME").await, [named]);
    assert_eq!(page("?search=a%22me").await, [], "a quote is a character");
    let mut renamed = api.api.job(named).await.unwrap();
    renamed.name = "other-x".into();
    api.api
        .update_job(named, &JobSpec::from(renamed))
        .await
        .unwrap();
    assert_eq!(page("?search=named").await, []);
    assert_eq!(page("?search=HER-").await, [named]);
    let (status, refused) = api.get("/api/v1/jobs?schedule_type=HOURLY").await;
    assert_eq!((status, &refused["field"]), (400, &json!("schedule_type")));
    let (status, refused) = api.get("/api/v1/jobs?colour=red").await;
    assert_eq!((status, &refused["field"]), (400, &json!("colour")));
    // The typed client carries the admin's refusal whole: status, code,
    // message.
    let missing = api.api.job(JobId(i64::MAX)).await.unwrap_err();
    assert_eq!(
        (missing.status(), missing.code()),
        (Some(404), Some(ErrorCode::UnknownJob)),
        "{missing}"
    );
    assert!(missing.to_string().contains("no job"), "{missing}");
    let (status, refused) = api.get("/api/v1/jobs?limit=5000").await;
    assert_eq!((status, &refused["field"]), (400, &json!("limit")));
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_created_in_batches_all_or_none() {
    let stack = stack(SchedulerConfig::default()).await;
    let api = &stack.api;
    api.api
        .upload(jobs::bytes("hello"), Some("greeter"), &[])
        .await
        .unwrap();
    let spec = |name: String, conf: &str| {
        json!({
            "name": name, "module": "greeter",
            "schedule_type": "CRON", "schedule_conf": conf,
        })
    };
    let count = |answer: &Value| answer.as_array().map_or(0, Vec::len);

    // One bad schedule refuses the whole batch, naming the job's place.
    let mut batch: Vec<Value> = (0..5)
        .map(|i| spec(format!("b{i}"), "0 0 3 * * ?"))
        .collect();
    batch[3] = spec("bad".into(), "0 0 25 * * ?");
    let (status, refused) = stack
        .call(
            reqwest::Method::POST,
            "/api/v1/jobs/batch",
            Some(json!({ "jobs": batch })),
        )
        .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["field"], "jobs[3].schedule_conf", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .starts_with("job 3 of the batch"),
        "{refused}"
    );
    let (_, listed) = stack.get("/api/v1/jobs").await;
    assert_eq!(count(&listed), 0, "nothing of a refused batch is stored");

    // A whole batch, started: ids in the batch's order, each with a next
    // fire; a batch past the quota of jobs is refused whole.
    let batch: Vec<JobSpec> = (0..300)
        .map(|i| serde_json::from_value(spec(format!("job-{i:03}"), "0 0 3 * * ?")).unwrap())
        .collect();
    let created = api
        .api
        .create_jobs(&JobBatch {
            jobs: batch.clone(),
            start: true,
        })
        .await
        .unwrap();
    assert_eq!((created.ids.len(), created.started), (300, 300));
    let (_, listed) = stack.get("/api/v1/jobs?limit=1000").await;
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 300);
    for (id, job) in created.ids.iter().zip(listed) {
        assert_eq!(job["id"], id.0);
        assert_eq!(job["enabled"], true, "{job}");
        assert!(job["next_fire_at_ms"].as_i64().is_some(), "{job}");
    }
    assert_eq!(listed[7]["name"], "job-007");
    let set = stack
        .call(
            reqwest::Method::PUT,
            "/api/v1/tenants/default/quotas",
            Some(json!({ "jobs": 400 })),
        )
        .await;
    assert_eq!(set.0, 200, "{}", set.1);
    let refused = api
        .api
        .create_jobs(&JobBatch {
            jobs: batch[..101].to_vec(),
            start: false,
        })
        .await
        .unwrap_err();
    assert_eq!(refused.status(), Some(403), "{refused}");
    assert!(refused.to_string().contains("this adds 101"), "{refused}");
    let fits = api
        .api
        .create_jobs(&JobBatch {
            jobs: batch[..100].to_vec(),
            start: false,
        })
        .await
        .unwrap();
    assert_eq!((fits.ids.len(), fits.started), (100, 0));

    // At most 1,000 a batch.
    let (status, refused) = stack
        .call(
            reqwest::Method::POST,
            "/api/v1/jobs/batch",
            Some(json!({ "jobs": vec![spec("x".into(), "0 0 3 * * ?"); 1001] })),
        )
        .await;
    assert_eq!(
        (status, &refused["field"]),
        (422, &json!("jobs")),
        "{refused}"
    );
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_in_batches_and_name_searches_on_postgres() {
    let database = PostgresServer::fresh_database();
    let admin = cronbox_admin::start(AdminConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        database: Database::Url(database.url()),
        migrations: Default::default(),
        api_token: API.into(),
        executor_token: EXEC.into(),
        scheduler: SchedulerConfig::default(),
        max_request_bytes: 16 << 20,
        tls: None,
        metrics_export: None,
    })
    .await
    .unwrap();
    let api = AdminClient::new(format!("http://{}", admin.local_addr()), API);
    api.api
        .upload(jobs::bytes("hello"), Some("greeter"), &[])
        .await
        .unwrap();
    let spec = |name: String| -> JobSpec {
        serde_json::from_value(json!({
            "name": name, "module": "greeter",
            "schedule_type": "CRON", "schedule_conf": "0 0 3 * * ?",
        }))
        .unwrap()
    };
    // A batch with one bad schedule stores nothing; a good one stores all,
    // in its order, started.
    let mut refused: Vec<JobSpec> = (0..3).map(|i| spec(format!("no-{i}"))).collect();
    refused[1].schedule_conf = "0 0 25 * * ?".into();
    let error = api
        .api
        .create_jobs(&JobBatch {
            jobs: refused,
            start: false,
        })
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(422), "{error}");
    let batch: Vec<JobSpec> = (0..500)
        .map(|i| spec(format!("nightly-{i:03}-{}", ["export", "cleanup"][i % 2])))
        .collect();
    let created = create_started(&api, batch).await;
    assert_eq!((created.ids.len(), created.started), (500, 500));
    let names = |path: String| {
        let api = &api;
        async move {
            let (status, jobs) = api.get(&path).await;
            assert_eq!(status, 200, "{path}: {jobs}");
            jobs.as_array()
                .unwrap()
                .iter()
                .map(|job| job["name"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    let all = names("/api/v1/jobs?limit=1000".into()).await;
    assert_eq!(all.len(), 500, "nothing of the refused batch");
    assert_eq!(all[7], "nightly-007-cleanup");
    // A search by part of a name, in any letter case, paged by id.
    let found = names("/api/v1/jobs?search=7-CLEAN&limit=1000".into()).await;
    assert_eq!(
        found,
        (0..500)
            .filter(|i| i % 2 == 1 && i % 10 == 7)
            .map(|i| format!("nightly-{i:03}-cleanup"))
            .collect::<Vec<_>>()
    );
    let first = names("/api/v1/jobs?search=export&limit=100".into()).await;
    assert_eq!(first.len(), 100);
    let after = created.ids[first.len() * 2 - 2].0;
    let next = names(format!(
        "/api/v1/jobs?search=export&limit=100&after={after}"
    ))
    .await;
    assert_eq!(next.first().map(String::as_str), Some("nightly-200-export"));
    assert_eq!(
        names("/api/v1/jobs?search=%25".into()).await,
        [] as [String; 0]
    );
    admin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_pin_new_version_and_rollback_with_runs_naming_what_ran() {
    let stack = stack(SchedulerConfig::default()).await;
    // v1 through multipart, with a label.
    let form = reqwest::multipart::Form::new()
        .part(
            "module",
            reqwest::multipart::Part::bytes(jobs::bytes("hello")).file_name("hello.wasm"),
        )
        .text("name", "greeter")
        .text("labels", "stable");
    let v1: Value = stack
        .http
        .post(format!("{}/api/v1/modules", stack.base))
        .bearer_auth(API)
        .multipart(form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (v1["name"].as_str(), v1["version"].as_i64()),
        (Some("greeter"), Some(1)),
        "{v1}"
    );
    let follower = stack
        .create_as(API, json!({ "name": "follows", "module": "greeter" }))
        .await;
    let pinned = stack
        .create_as(API, json!({ "name": "pinned", "module": "greeter@1" }))
        .await;
    let ran = |run: &Run| {
        (
            run.message.clone().unwrap_or_default(),
            json!(run.module_digest),
        )
    };
    let first = stack.run_to_end(follower, "v1").await;
    assert_eq!(ran(&first), ("hello, v1".to_owned(), v1["digest"].clone()));

    // v2: another program under the same name; the follower moves, the
    // pinned job stays.
    let (status, v2) = stack
        .upload_as(API, "?name=greeter&labels=beta", jobs::bytes("counter"))
        .await;
    assert_eq!(status, 201, "{v2}");
    assert_eq!(
        (v2["version"].as_i64(), v2["jobs_moved"].as_i64()),
        (Some(2), Some(1))
    );
    let second = stack.run_to_end(follower, "").await;
    assert!(
        second.message.as_deref().unwrap().starts_with("count=1"),
        "{second:?}"
    );
    assert_eq!(json!(second.module_digest), v2["digest"]);
    let still = stack.run_to_end(pinned, "pinned").await;
    assert_eq!(
        ran(&still),
        ("hello, pinned".to_owned(), v1["digest"].clone())
    );

    // The same content again is not a new version.
    let (_, again) = stack
        .upload_as(API, "?name=greeter", jobs::bytes("counter"))
        .await;
    assert_eq!(again["version"].as_i64(), Some(2));

    // Rollback to v1: a new version 3 with v1's content.
    let (status, rolled) = stack
        .call(
            reqwest::Method::POST,
            "/api/v1/modules/greeter/rollback",
            Some(json!({ "version": 1 })),
        )
        .await;
    assert_eq!(status, 201, "{rolled}");
    assert_eq!(rolled["version"]["version"], 3);
    assert_eq!(rolled["version"]["digest"], v1["digest"]);
    let third = stack.run_to_end(follower, "back").await;
    assert_eq!(
        ran(&third),
        ("hello, back".to_owned(), v1["digest"].clone())
    );
    let (status, error) = stack
        .call(
            reqwest::Method::POST,
            "/api/v1/modules/greeter/rollback",
            Some(json!({ "version": 9 })),
        )
        .await;
    assert_eq!(
        (status, error["field"].as_str()),
        (404, Some("version")),
        "{error}"
    );

    // Labels move between versions; the list shows history newest first.
    let (status, versions) = stack
        .call(
            reqwest::Method::PUT,
            "/api/v1/modules/greeter/labels/beta",
            Some(json!({ "version": 3 })),
        )
        .await;
    assert_eq!(status, 200, "{versions}");
    let summary: Vec<(i64, Vec<String>, String)> = versions
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["version"].as_i64().unwrap(),
                serde_json::from_value(v["labels"].clone()).unwrap(),
                v["note"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                3,
                vec!["beta".to_owned()],
                "rollback to version 1".to_owned()
            ),
            (2, vec![], String::new()),
            (1, vec!["stable".to_owned()], String::new()),
        ]
    );
    let (_, modules) = stack.get("/api/v1/modules").await;
    assert_eq!(modules[0]["version"], 3);

    // A job naming a version that does not exist is refused.
    let (status, error) = stack
        .call(
            reqwest::Method::POST,
            "/api/v1/jobs",
            Some(json!({ "name": "x", "module": "greeter@7" })),
        )
        .await;
    assert_eq!(
        (status, error["field"].as_str()),
        (422, Some("module")),
        "{error}"
    );
    stack.shutdown().await;
}
