//! xxl-job 3.5's job API against `cronbox up`: requests written as
//! xxl-job's `JobAddRequest`, `JobUpdateRequest`, `JobOperateRequest` and
//! `JobTriggerRequest` serialize them (Gson, every field), sent with a
//! legacy group's appname and token, under both base paths; each acts on
//! that group's jobs only and lands in the audit log.

use super::session::ok;
use super::*;

const TOKEN: &str = "token-of-the-orders-group";

/// A call to xxl-job's API at `path` as `group` with `token`: its envelope.
async fn call(api: &AdminClient, path: &str, group: &str, token: &str, body: &Value) -> Value {
    let response = api
        .http
        .post(format!("{}{path}", api.base))
        .header("XXL-JOB-APPNAME", group)
        .header("XXL-JOB-ACCESS-TOKEN", token)
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{path}: xxl-job answers HTTP 200");
    response.json().await.unwrap()
}

/// `JobAddRequest` as xxl-job's client writes it, for group `job_group`.
fn add_request(job_group: i64, name: &str, glue_type: &str) -> Value {
    json!({
        "jobGroup": job_group,
        "name": name,
        "author": "XXL",
        "alarmEmail": "",
        "scheduleType": "CRON",
        "scheduleConf": "0 0 3 * * ?",
        "misfireStrategy": "DO_NOTHING",
        "executorRouteStrategy": "ROUND",
        "executorHandler": "orderJobHandler",
        "executorParam": " full\trun\n",
        "executorBlockStrategy": "DISCARD_LATER",
        "executorTimeout": 30,
        "executorFailRetryCount": 2,
        "glueType": glue_type,
        "glueSource": "",
        "glueRemark": "GLUE代码初始化"
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xxl_job_35s_job_api_manages_a_legacy_groups_jobs() {
    let _turn = TESTS.turn();
    let data = tempfile::tempdir().unwrap();
    let (mut stack, _, at) = up(data.path(), None);
    let base = format!("http://{}", at.admin);
    let token = std::fs::read_to_string(data.path().join("api-token")).unwrap();
    let token = token.trim();
    let api = AdminClient::new(&base, token);
    for (group, group_token) in [("orders", TOKEN), ("billing", "token-of-billing")] {
        let args = [
            "group",
            "set",
            group,
            "--legacy",
            "xxl-job-3.5",
            "--access-token",
            group_token,
        ];
        ok(&base, token, &args);
    }

    // Refused as xxl-job refuses: no headers, a wrong token, an empty body.
    let anonymous: Value = api
        .http
        .post(format!("{base}/api/addJob"))
        .json(&add_request(1, "nightly", "BEAN"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        anonymous["msg"], "invalid request, accessToken or appname is empty.",
        "{anonymous}"
    );
    let wrong = call(
        &api,
        "/api/addJob",
        "orders",
        "token-of-billing",
        &add_request(1, "n", "BEAN"),
    )
    .await;
    assert_eq!(
        wrong["msg"],
        "invalid request, accessToken or appname invalid."
    );
    let empty = call(
        &api,
        "/api/addJob",
        "orders",
        TOKEN,
        &Value::String(String::new()),
    )
    .await;
    assert_eq!(empty["code"], 500, "{empty}");

    // addJob: a stopped legacy job of the token's group, every field
    // mapped (the param byte for byte), answered with its xxl-job id.
    let added = call(
        &api,
        "/api/addJob",
        "orders",
        TOKEN,
        &add_request(1, "nightly", "BEAN"),
    )
    .await;
    assert_eq!(added["code"], 200, "{added}");
    let xxl_id: i64 = added["data"].as_str().unwrap().parse().unwrap();
    let jobs = api.api.jobs(&JobQuery::default()).await.unwrap();
    let job = &jobs
        .iter()
        .find(|listed| listed.job.xxl_job_id == Some(xxl_id))
        .expect("the added job")
        .job;
    assert_eq!(
        (
            job.group_name.as_str(),
            job.name.as_str(),
            job.executor_handler.as_deref()
        ),
        ("orders", "nightly", Some("orderJobHandler"))
    );
    assert_eq!(job.param, " full\trun\n");
    assert_eq!(
        (job.timeout_ms, job.retry_count, job.enabled),
        (30_000, 2, false)
    );
    assert_eq!(
        (job.route.as_str(), job.block_strategy.as_str()),
        ("ROUND", "DISCARD_LATER")
    );
    let glue = call(
        &api,
        "/api/addJob",
        "orders",
        TOKEN,
        &add_request(1, "shell", "GLUE_SHELL"),
    )
    .await;
    assert_eq!(glue["code"], 500);
    assert!(
        glue["msg"].as_str().unwrap().contains("GLUE_SHELL"),
        "{glue}"
    );

    // updateJob (JobUpdateRequest: the fields of addJob but jobGroup, and
    // the id), under xxl-job's older base path too.
    let mut update = add_request(1, "nightly, later", "BEAN");
    update.as_object_mut().unwrap().remove("jobGroup");
    update["id"] = json!(xxl_id);
    update["scheduleConf"] = json!("0 30 4 * * ?");
    update["executorParam"] = json!("second");
    let updated = call(
        &api,
        "/xxl-job-admin/api/updateJob",
        "orders",
        TOKEN,
        &update,
    )
    .await;
    assert_eq!(updated["code"], 200, "{updated}");
    let job = api.api.job(job.id).await.unwrap();
    assert_eq!(
        (
            job.name.as_str(),
            job.schedule_conf.as_str(),
            job.param.as_str()
        ),
        ("nightly, later", "0 30 4 * * ?", "second")
    );
    assert_eq!(
        job.xxl_job_id,
        Some(xxl_id),
        "the update keeps the xxl-job id"
    );

    // startJob and stopJob (JobOperateRequest).
    let started = call(
        &api,
        "/api/startJob",
        "orders",
        TOKEN,
        &json!({"id": xxl_id}),
    )
    .await;
    assert_eq!(started["code"], 200, "{started}");
    assert!(api.api.job(job.id).await.unwrap().enabled);
    let stopped = call(
        &api,
        "/api/stopJob",
        "orders",
        TOKEN,
        &json!({"id": xxl_id}),
    )
    .await;
    assert_eq!(stopped["code"], 200, "{stopped}");
    assert!(!api.api.job(job.id).await.unwrap().enabled);

    // triggerJob (JobTriggerRequest): a run with the given param.
    let trigger = json!({"id": xxl_id, "executorParam": "now", "addressList": ""});
    let triggered = call(&api, "/api/triggerJob", "orders", TOKEN, &trigger).await;
    assert_eq!(triggered["code"], 200, "{triggered}");
    // (No executor runs it here: it fails, and its retries follow.)
    let runs = api.api.job_runs(job.id, None, 10).await.unwrap();
    let triggered: Vec<_> = runs
        .iter()
        .filter(|run| run.kind == TriggerKind::Api)
        .collect();
    assert_eq!(triggered.len(), 1, "{runs:?}");
    assert_eq!(triggered[0].param, "now");

    // Another group's token reaches none of this group's jobs, by either
    // id; and a job of that group is its own.
    let other = json!({"id": xxl_id});
    let foreign = call(
        &api,
        "/api/removeJob",
        "billing",
        "token-of-billing",
        &other,
    )
    .await;
    assert_eq!(foreign["code"], 500, "{foreign}");
    let by_cronbox_id = json!({"id": job.id.0});
    let foreign = call(
        &api,
        "/api/stopJob",
        "billing",
        "token-of-billing",
        &by_cronbox_id,
    )
    .await;
    assert_eq!(foreign["code"], 500, "{foreign}");
    let billing = call(
        &api,
        "/api/addJob",
        "billing",
        "token-of-billing",
        &add_request(2, "invoices", "BEAN"),
    )
    .await;
    assert_eq!(billing["code"], 200, "{billing}");
    assert_ne!(
        billing["data"], added["data"],
        "xxl-job ids are the admin's own"
    );

    // An xxl-job id is one job's in its group: the cronbox API refuses a
    // second job with it, naming the field.
    let mut twin = cronbox_api::JobSpec::legacy("twin", "orders", "orderJobHandler");
    twin.xxl_job_id = Some(xxl_id);
    let refused = api.api.create_job(&twin).await.unwrap_err().to_string();
    assert!(
        refused.contains("xxl_job_id") && refused.contains(&format!("job {}", job.id)),
        "{refused}"
    );

    // removeJob: gone.
    let removed = call(
        &api,
        "/api/removeJob",
        "orders",
        TOKEN,
        &json!({"id": xxl_id}),
    )
    .await;
    assert_eq!(removed["code"], 200, "{removed}");
    assert!(api.api.job(job.id).await.is_err());
    let again = call(
        &api,
        "/api/removeJob",
        "orders",
        TOKEN,
        &json!({"id": xxl_id}),
    )
    .await;
    assert_eq!(again["code"], 500, "{again}");

    // Every call is in the audit log, the group's token its actor.
    let audit = api
        .api
        .audit(&cronbox_api::AuditQuery {
            actor: Some("xxl-job token of group orders".to_owned()),
            ..Default::default()
        })
        .await
        .unwrap();
    let actions: Vec<&str> = audit
        .entries
        .iter()
        .map(|entry| entry.action.as_str())
        .collect();
    for action in [
        "addJob",
        "updateJob",
        "startJob",
        "stopJob",
        "triggerJob",
        "removeJob",
    ] {
        assert!(
            actions.iter().any(|logged| logged.ends_with(action)),
            "{action}: {actions:?}"
        );
    }
    terminate(&mut stack.0);
}
