//! The shipped dashboard and alert rules (`observability/`): the rules pass
//! `promtool check rules` (Debian's `prometheus` package), and every metric
//! the rules and the dashboard query is exported by a running `cronbox up`
//! (its admin's or its executor's `/metrics`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::*;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

/// The metric families a `/metrics` text declares (`# TYPE name kind`).
fn declared(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The metric families queries name: every `cronbox_…` word, without
/// the sample suffixes (`_bucket`, `_sum`, `_count`, `_total`).
fn queried(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.starts_with("cronbox_"))
        .map(|word| {
            ["_bucket", "_sum", "_count", "_total"]
                .iter()
                .find_map(|suffix| word.strip_suffix(suffix))
                .unwrap_or(word)
                .to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_dashboard_and_alerts_query_what_cronbox_exports() {
    let _turn = TESTS.turn();
    let root = repository();
    let rules = root.join("observability/prometheus-alerts.yml");
    let checked = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&rules)
        .output()
        .expect("promtool (Debian's prometheus package, which .ci/run installs)");
    assert!(
        checked.status.success(),
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    let rules = std::fs::read_to_string(rules).unwrap();
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("observability/grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    let expressions: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|panel| panel["targets"].as_array().unwrap().iter())
        .map(|target| target["expr"].as_str().unwrap().to_owned())
        .collect();
    assert!(expressions.len() >= 10, "{expressions:?}");

    let data = tempfile::tempdir().unwrap();
    // `metered` is marked for metrics of its own.
    let (mut process, _, at) = up_with_env(
        data.path(),
        None,
        &[("CRONBOX_ADMIN_JOB_METRICS", Path::new("default/metered"))],
    );
    // A run that succeeds and one that fails: labelled families have a
    // series (and are declared) once something was counted in them.
    let token = std::fs::read_to_string(data.path().join("api-token")).unwrap();
    let api = AdminClient::new(format!("http://{}", at.admin), token.trim());
    let mut jobs = Vec::new();
    for (name, module, expected) in [
        ("metered", "hello", RunStatus::Success),
        ("failing", "panicker", RunStatus::Failed),
    ] {
        let job = api
            .job(name, cronbox_example_jobs::bytes(module), json!({}))
            .await;
        jobs.push((job, expected));
    }
    // A marked job is looked up at each scrape: this one finds `metered`.
    reqwest::get(format!("http://{}/metrics", at.admin))
        .await
        .unwrap();
    for (job, expected) in jobs {
        let run = api.trigger(job, json!({})).await;
        assert_eq!(api.ended(run).await.status, expected);
    }
    let wanted = queried(&format!("{}\n{rules}", expressions.join("\n")));
    assert!(wanted.len() >= 12, "{wanted:?}");
    let scrape = || async {
        let mut exported = BTreeSet::new();
        for address in [at.admin, at.executor] {
            let text = reqwest::get(format!("http://{address}/metrics"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            exported.extend(declared(&text));
        }
        exported
    };
    let found = until_within(
        Duration::from_secs(30),
        "every queried metric is exported",
        || async {
            let exported = scrape().await;
            wanted.is_subset(&exported).then_some(exported)
        },
    )
    .await;
    assert!(found.len() > wanted.len(), "{found:?}");
    terminate(&mut process.0);
}
