//! A legacy group: pyxxl (xxl-job's Python executor, from PyPI) started as
//! its own process against `cronbox up`, driven through the CLI: it
//! registers with its group's token, runs a handler with its param, reports
//! a failure, is killed mid-run, has its log read, and removes itself when
//! it stops.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;

use super::session::{cli, ended, json, ok};
use super::*;

/// The pyxxl release the legacy path is tested with.
const PYXXL: &str = "pyxxl==0.4.8";
const TOKEN: &str = "legacy-token-for-tests";

/// The executors registered in `group` that are alive.
async fn alive_in(api: &AdminClient, group: &str) -> Vec<String> {
    let (status, executors) = api.get("/api/v1/executors").await;
    assert_eq!(status, 200, "{executors}");
    executors
        .as_array()
        .unwrap()
        .iter()
        .filter(|executor| executor["group"] == group && executor["alive"] == true)
        .map(|executor| executor["address"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pyxxl_executor_runs_legacy_jobs_under_cronbox() {
    let _turn = TESTS.turn();
    let venv = cronbox_tests::python_tool(PYXXL);
    let data = tempfile::tempdir().unwrap();
    let (mut stack, _, at) = up(data.path(), None);
    let base = format!("http://{}", at.admin);
    let token = std::fs::read_to_string(data.path().join("api-token")).unwrap();
    let token = token.trim();
    let api = AdminClient::new(&base, token);

    let set = ok(
        &base,
        token,
        &[
            "group",
            "set",
            "pyapp",
            "--legacy",
            "xxl-job-3.4",
            "--access-token",
            TOKEN,
        ],
    );
    assert!(set.contains("xxl-job executors (xxl-job-3.4)"), "{set}");
    let listed = ok(&base, token, &["group", "list"]);
    assert!(
        listed.contains("xxl-job-3.4") && !listed.contains(TOKEN),
        "{listed}"
    );

    // A registration with another token is refused, as xxl-job refuses it.
    let refused: Value = api
        .http
        .post(format!("{base}/xxl-job-admin/api/registry"))
        .header("XXL-JOB-ACCESS-TOKEN", "not-the-token")
        .json(&json!({
            "registryGroup": "EXECUTOR",
            "registryKey": "pyapp",
            "registryValue": "http://127.0.0.1:9/"
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(refused["code"], 500, "{refused}");
    assert!(alive_in(&api, "pyapp").await.is_empty());

    // pyxxl, configured as for xxl-job's admin.
    let logs = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/legacy/pyxxl_executor.py");
    let mut pyxxl = Command::new(venv.join("bin").join("python"))
        .arg(script)
        .arg(format!("{base}/xxl-job-admin/api/"))
        .arg("pyapp")
        .arg(logs.path())
        .env("XXL_JOB_TOKEN", TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut listening = String::new();
    BufReader::new(pyxxl.stdout.take().unwrap())
        .read_line(&mut listening)
        .unwrap();
    let address = listening
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("pyxxl did not start: {listening:?}"))
        .to_owned();
    until_within(Duration::from_secs(30), "pyxxl registers", || async {
        (alive_in(&api, "pyapp").await == [address.clone()]).then_some(())
    })
    .await;

    // A legacy job names a handler; what such a run cannot honour is refused.
    let create = |name: &str, handler: &str| {
        json(
            &base,
            token,
            &[
                "job",
                "create",
                "--name",
                name,
                "--group",
                "pyapp",
                "--handler",
                handler,
            ],
        )["id"]
            .to_string()
    };
    let (code, _, said) = cli(
        &base,
        token,
        &[
            "job", "create", "--name", "x", "--group", "pyapp", "--module", "hello",
        ],
    );
    assert!(code != 0 && said.contains("executor_handler"), "{said}");
    let (code, _, said) = cli(
        &base,
        token,
        &[
            "job",
            "create",
            "--name",
            "x",
            "--group",
            "pyapp",
            "--handler",
            "echo",
            "--secret",
            "db",
        ],
    );
    assert!(code != 0 && said.contains("secrets"), "{said}");
    let (code, _, said) = cli(
        &base,
        token,
        &["job", "create", "--name", "x", "--handler", "echo"],
    );
    assert!(code != 0 && said.contains("runs modules"), "{said}");

    // A run with its param echoed back, its log read from pyxxl.
    let echo = create("py-echo", "echo");
    let run = json(
        &base,
        token,
        &["job", "trigger", &echo, "--param", "from cronbox"],
    )["run_id"]
        .as_i64()
        .unwrap();
    let echoed = ended(&base, token, &echo, run);
    assert_eq!(echoed["status"], "success", "{echoed}");
    assert_eq!(echoed["message"], "echo: from cronbox", "{echoed}");
    assert_eq!(echoed["executor"], address.as_str(), "{echoed}");
    let log = ok(&base, token, &["logs", &run.to_string()]);
    assert!(log.contains("echoing from cronbox"), "{log}");

    // Moved to a module and back, keeping its id and its runs.
    ok(
        &base,
        token,
        &[
            "job", "update", &echo, "--group", "default", "--module", "hello",
        ],
    );
    let run = json(&base, token, &["job", "trigger", &echo, "--param", "wasm"])["run_id"]
        .as_i64()
        .unwrap();
    let greeted = ended(&base, token, &echo, run);
    assert_eq!(greeted["status"], "success", "{greeted}");
    assert!(
        greeted["message"].as_str().unwrap().contains("wasm"),
        "{greeted}"
    );
    assert_ne!(greeted["module_digest"], "", "{greeted}");
    ok(
        &base,
        token,
        &[
            "job",
            "update",
            &echo,
            "--group",
            "pyapp",
            "--handler",
            "echo",
        ],
    );
    let run = json(&base, token, &["job", "trigger", &echo, "--param", "back"])["run_id"]
        .as_i64()
        .unwrap();
    assert_eq!(ended(&base, token, &echo, run)["message"], "echo: back");
    let runs = json(&base, token, &["runs", "--job", &echo]);
    assert_eq!(runs["runs"].as_array().unwrap().len(), 3, "{runs}");

    // A failure is reported as one (and retried as any run would be).
    let fail = create("py-fail", "fail");
    let run = json(&base, token, &["job", "trigger", &fail])["run_id"]
        .as_i64()
        .unwrap();
    let failed = ended(&base, token, &fail, run);
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["message"]
            .as_str()
            .unwrap()
            .contains("failed on purpose"),
        "{failed}"
    );

    // Killed mid-run: its first line, followed, says it runs.
    let slow = create("py-slow", "slow");
    let run = json(&base, token, &["job", "trigger", &slow])["run_id"]
        .as_i64()
        .unwrap();
    let mut follower = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(["logs", &run.to_string(), "--follow"])
        .env("CRONBOX_ADMIN", &base)
        .env("CRONBOX_API_TOKEN", token)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follower.stdout.take().unwrap()).lines();
    let first = lines
        .by_ref()
        .map(Result::unwrap)
        .find(|line| line.contains("slow handler started"));
    assert!(first.is_some(), "the slow handler's log was followed");
    let (code, killed, said) = cli(&base, token, &["kill", &run.to_string()]);
    assert_eq!(code, 0, "{said}");
    assert!(killed.contains("killed"), "{killed}");
    for _ in lines {}
    assert_eq!(
        follower.wait().unwrap().code(),
        Some(1),
        "a killed run's follower exits 1"
    );
    let killed = ended(&base, token, &slow, run);
    assert_eq!(killed["outcome"], "killed", "{killed}");

    // Past its timeout: pyxxl stops the handler and reports an ordinary
    // failure (code 500); the run, ended at its deadline, ends `timeout`.
    let late = json(
        &base,
        token,
        &[
            "job",
            "create",
            "--name",
            "py-late",
            "--group",
            "pyapp",
            "--handler",
            "slow",
            "--timeout-ms",
            "1000",
        ],
    )["id"]
        .to_string();
    let run = json(&base, token, &["job", "trigger", &late])["run_id"]
        .as_i64()
        .unwrap();
    let timed_out = ended(&base, token, &late, run);
    assert_eq!(
        (&timed_out["status"], &timed_out["outcome"]),
        (&json!("failed"), &json!("timeout")),
        "{timed_out}"
    );

    // Stopped, pyxxl removes itself from the group.
    let status = Command::new("kill")
        .args(["-TERM", &pyxxl.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    pyxxl.wait().unwrap();
    until_within(Duration::from_secs(15), "pyxxl deregisters", || async {
        alive_in(&api, "pyapp").await.is_empty().then_some(())
    })
    .await;
    terminate(&mut stack.0);
}

/// The jobs of `group` by name.
async fn jobs_of(api: &AdminClient, group: &str) -> HashMap<String, cronbox_api::Job> {
    api.api
        .jobs(&JobQuery {
            group: Some(group.to_owned()),
            ..JobQuery::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|listed| (listed.job.name.clone(), listed.job))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_xxl_job_dump_is_imported_as_legacy_groups_and_jobs_once() {
    let _turn = TESTS.turn();
    let data = tempfile::tempdir().unwrap();
    let (mut stack, _, at) = up(data.path(), None);
    let base = format!("http://{}", at.admin);
    let token = std::fs::read_to_string(data.path().join("api-token")).unwrap();
    let token = token.trim();
    let api = AdminClient::new(&base, token);
    let dump = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/legacy/xxl_job.sql");
    let import = |apply: bool| {
        let mut args = vec![
            "import",
            "xxl-job",
            dump.to_str().unwrap(),
            "--zone",
            "Asia/Shanghai",
            "--access-token",
            TOKEN,
        ];
        if apply {
            args.push("--apply");
        }
        ok(&base, token, &args)
    };

    // A dry run: the table of what would be done, and nothing done.
    let planned = import(false);
    assert!(
        planned.contains("dry run: 4 jobs and 2 groups to create, 0 exist already, 1 refused"),
        "{planned}"
    );
    let shell = planned.lines().find(|line| line.starts_with("3 ")).unwrap();
    assert!(
        shell.contains("refused") && shell.contains("GLUE_SHELL") && shell.contains("module"),
        "{shell}"
    );
    assert!(
        planned.contains("hourly report #4") && planned.contains("hourly report #5"),
        "{planned}"
    );
    assert!(
        planned.contains("alarm_email ops@example.com dropped"),
        "{planned}"
    );
    assert!(!ok(&base, token, &["group", "list"]).contains("order-service"));

    // Applied: legacy groups (AUTO, or MANUAL with the export's addresses)
    // and jobs mapped field by field, started as they were, children linked.
    let applied = import(true);
    assert!(
        applied.contains("4 jobs are in cronbox; 1 refused; 2 groups made"),
        "{applied}"
    );
    let groups = api.api.groups().await.unwrap();
    let group = |name: &str| {
        groups
            .iter()
            .find(|group| group.name == name)
            .unwrap()
            .clone()
    };
    assert_eq!(
        group("order-service").legacy,
        Some(cronbox_api::LegacyProtocol::XxlJob34)
    );
    assert_eq!(group("order-service").address_type, "AUTO");
    assert_eq!(
        group("report-service").addresses,
        ["http://127.0.0.1:9998/", "http://127.0.0.1:9997/"]
    );
    let orders = jobs_of(&api, "order-service").await;
    let reports = jobs_of(&api, "report-service").await;
    assert_eq!(
        (orders.len(), reports.len()),
        (2, 2),
        "{orders:?} {reports:?}"
    );
    let nightly = &orders["nightly orders"];
    assert_eq!(nightly.executor_handler.as_deref(), Some("orderJobHandler"));
    assert_eq!(
        (nightly.schedule_conf.as_str(), nightly.time_zone.as_str()),
        ("0 0 2 * * ?", "Asia/Shanghai")
    );
    assert_eq!((nightly.timeout_ms, nightly.retry_count), (600_000, 2));
    assert_eq!(nightly.param, r#"{"full": true}"#);
    assert!(nightly.enabled);
    assert_eq!(
        nightly.children,
        [orders["after orders"].id, reports["hourly report #5"].id]
    );
    let after = &orders["after orders"];
    assert_eq!(after.param, "it's done");
    assert_eq!(
        (
            after.route.as_str(),
            after.block_strategy.as_str(),
            after.enabled
        ),
        ("ROUND", "DISCARD_LATER", false)
    );
    let hourly = &reports["hourly report #4"];
    assert_eq!(
        (hourly.schedule_type.as_str(), hourly.schedule_conf.as_str()),
        ("FIX_RATE", "3600")
    );
    assert_eq!(
        (
            hourly.misfire.as_str(),
            hourly.route.as_str(),
            hourly.enabled
        ),
        ("FIRE_ONCE_NOW", "FAILOVER", true)
    );

    // Each job records its xxl-job id, by which xxl-job 3.5's job API
    // finds it: `triggerJob {"id": 2}` with its group's token runs it.
    assert_eq!(
        (nightly.xxl_job_id, after.xxl_job_id, hourly.xxl_job_id),
        (Some(1), Some(2), Some(4))
    );
    let triggered: Value = api
        .http
        .post(format!("{base}/api/triggerJob"))
        .header("XXL-JOB-APPNAME", "order-service")
        .header("XXL-JOB-ACCESS-TOKEN", TOKEN)
        .json(&json!({"id": 2, "executorParam": "by xxl-job id", "addressList": null}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(triggered["code"], 200, "{triggered}");
    let runs = api.api.job_runs(after.id, None, 10).await.unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].param, "by xxl-job id");

    // Again: nothing is created twice.
    let again = import(true);
    assert!(
        again.contains("4 jobs are in cronbox; 1 refused; 0 groups made"),
        "{again}"
    );
    assert_eq!(jobs_of(&api, "order-service").await.len(), 2);
    assert_eq!(jobs_of(&api, "report-service").await.len(), 2);

    // The two tables exported as JSON and CSV instead.
    let exports = tempfile::tempdir().unwrap();
    let groups_json = exports.path().join("xxl_job_group.json");
    let jobs_csv = exports.path().join("xxl_job_info.csv");
    std::fs::write(
        &groups_json,
        r#"[{"id": 7, "app_name": "billing", "title": "billing", "address_type": 0, "address_list": null}]"#,
    )
    .unwrap();
    std::fs::write(
        &jobs_csv,
        "id,job_group,job_desc,schedule_type,schedule_conf,executor_handler,executor_param,glue_type,trigger_status\n\
         40,7,\"invoices, daily\",CRON,0 0 6 * * ?,invoiceHandler,NULL,BEAN,0\n",
    )
    .unwrap();
    let files = [groups_json.to_str().unwrap(), jobs_csv.to_str().unwrap()];
    let import_as = |more: &[&str]| {
        let mut args = vec![
            "import",
            "xxl-job",
            files[0],
            files[1],
            "--access-token",
            TOKEN,
        ];
        args.extend(more);
        cli(&base, token, &args)
    };
    // A webhook the admin may not call stops even the dry run, before
    // anything is made; so does a tenant that does not exist.
    let (code, _, refused) = import_as(&["--alarm-webhook", "http://127.0.0.1:9/alarm", "--apply"]);
    assert_eq!(code, 1, "{refused}");
    assert!(
        refused.contains("--alarm-webhook") && refused.contains("--alarm-allow-nets"),
        "{refused}"
    );
    let (code, _, refused) = import_as(&["--tenant", "nobody", "--apply"]);
    assert!(code == 1 && refused.contains("no such tenant"), "{refused}");
    assert!(!ok(&base, token, &["group", "list"]).contains("billing"));

    // --tenant: the group is granted to it and the jobs are its own.
    api.api.create_tenant("acme").await.unwrap();
    let (code, planned, _) = import_as(&["--tenant", "acme"]);
    assert!(
        code == 0 && planned.contains("groups granted to tenant acme: billing"),
        "{planned}"
    );
    let (code, imported, stderr) = import_as(&["--tenant", "acme", "--apply"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        imported.contains("1 jobs are in cronbox; 0 refused; 1 groups made"),
        "{imported}"
    );
    let granted = api.api.groups().await.unwrap();
    let granted = granted
        .iter()
        .find(|group| group.name == "billing")
        .unwrap();
    assert_eq!(granted.tenants, ["acme"]);
    let tenants = api.api.tenants().await.unwrap();
    let acme = tenants.iter().find(|tenant| tenant.name == "acme").unwrap();
    assert_eq!(acme.tokens, 1, "the import's token of acme is revoked");
    let billing = jobs_of(&api, "billing").await;
    assert_eq!(billing["invoices, daily"].tenant, "acme");
    assert_eq!(
        billing["invoices, daily"].executor_handler.as_deref(),
        Some("invoiceHandler")
    );
    assert_eq!(billing["invoices, daily"].param, "");
    terminate(&mut stack.0);
}
