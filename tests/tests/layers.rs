//! The architecture's layers, checked. The crates depend downward only,
//! along the edges listed here (the compiler then refuses a wrong import
//! across crates); inside the admin's two crates (the admin: HTTP and
//! services; the scheduler: firing and its domain) every module belongs to
//! a layer and names only its own layer and those below; and the runtime's
//! modules import in one direction.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each workspace crate and the workspace crates it may depend on (normal
/// dependencies; tests and benches may use the harness). A new edge fails
/// until it is added here with the architecture's consent: the store and
/// the schedule arithmetic never reach up to the admin, the admin never
/// links the runtime (it talks to executors over HTTP), the executor never
/// links the admin's crates.
const CRATE_EDGES: &[(&str, &[&str])] = &[
    ("cronbox-protocol", &[]),
    ("cronbox-tls", &[]),
    ("cronbox-net-policy", &[]),
    ("cronbox-component-check", &[]),
    ("cronbox-guest-target", &[]),
    ("cronbox-guest-build", &[]),
    ("cronbox-guest", &[]),
    ("cronbox-example-jobs", &[]),
    ("cronbox-language-jobs", &[]),
    ("cronbox-tasks", &[]),
    ("cronbox-api", &["cronbox-protocol", "cronbox-tls"]),
    ("cronbox-telemetry", &["cronbox-protocol", "cronbox-tls"]),
    (
        "cronbox-runtime",
        &[
            "cronbox-component-check",
            "cronbox-net-policy",
            "cronbox-protocol",
        ],
    ),
    (
        "cronbox-executor",
        &[
            "cronbox-protocol",
            "cronbox-runtime",
            "cronbox-tasks",
            "cronbox-telemetry",
            "cronbox-tls",
        ],
    ),
    ("cronbox-schedule", &["cronbox-api"]),
    (
        "cronbox-store",
        &[
            "cronbox-api",
            "cronbox-net-policy",
            "cronbox-protocol",
            "cronbox-schedule",
        ],
    ),
    (
        "cronbox-scheduler",
        &[
            "cronbox-api",
            "cronbox-net-policy",
            "cronbox-protocol",
            "cronbox-schedule",
            "cronbox-store",
            "cronbox-tasks",
            "cronbox-telemetry",
            "cronbox-tls",
        ],
    ),
    (
        "cronbox-admin",
        &[
            "cronbox-api",
            "cronbox-component-check",
            "cronbox-net-policy",
            "cronbox-protocol",
            "cronbox-scheduler",
            "cronbox-telemetry",
            "cronbox-tls",
        ],
    ),
    (
        "cronbox-tests",
        &["cronbox-api", "cronbox-protocol", "cronbox-tls"],
    ),
    (
        "cronbox",
        &[
            "cronbox-admin",
            "cronbox-api",
            "cronbox-example-jobs",
            "cronbox-executor",
            "cronbox-guest-build",
            "cronbox-net-policy",
            "cronbox-protocol",
            "cronbox-runtime",
            "cronbox-telemetry",
            "cronbox-tls",
        ],
    ),
];

/// The workspace's crates and the workspace crates each depends on
/// (normal dependencies), read from `cargo metadata`.
fn crate_graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let members: BTreeSet<String> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|package| package["name"].as_str().unwrap().to_owned())
        .collect();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|package| {
            let depends_on = package["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|dependency| dependency["kind"].is_null())
                .map(|dependency| dependency["name"].as_str().unwrap().to_owned())
                .filter(|name| members.contains(name))
                .collect();
            (package["name"].as_str().unwrap().to_owned(), depends_on)
        })
        .collect()
}

#[test]
fn the_crates_depend_only_along_the_architectures_edges() {
    let graph = crate_graph();
    let allowed: BTreeMap<&str, BTreeSet<&str>> = CRATE_EDGES
        .iter()
        .map(|(name, edges)| (*name, edges.iter().copied().collect()))
        .collect();
    let mut wrong = Vec::new();
    for (name, depends_on) in &graph {
        let Some(may) = allowed.get(name.as_str()) else {
            wrong.push(format!("{name} is not in CRATE_EDGES: give it its place"));
            continue;
        };
        for dependency in depends_on {
            if !may.contains(dependency.as_str()) {
                wrong.push(format!("{name} depends on {dependency}, which it may not"));
            }
        }
    }
    assert!(graph.len() > 15, "read only {} crates", graph.len());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The admin's layers, top to bottom, each with its modules (a folder or
/// a file under `host/admin/src` for HTTP and services, under
/// `host/scheduler/src` for the rest: the compiler already keeps that
/// crate from naming the two above it, and the admin re-exports its
/// modules under their names). A module names only modules of its own
/// layer and those below; every module of both crates is listed, so a new
/// one fails until it is given a layer.
const ADMIN_LAYERS: &[(&str, &[&str])] = &[
    ("http", &["api", "console"]),
    ("services", &["service"]),
    (
        "firing",
        &["scheduler", "housekeeping", "alarms", "metrics"],
    ),
    (
        "domain",
        &["jobs", "legacy", "quotas", "routing", "workflow", "secrets"],
    ),
    ("base", &["model", "clock"]),
];

fn rust_files(folder: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// The top-level modules a file names through `crate::` (`crate::a::…`
/// or `crate::{a, b::…}`), each with its line.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let leading_name = |part: &str| -> String {
        part.trim()
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect()
    };
    let mut named = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        let line = text[..at].matches('\n').count() + 1;
        let rest = &text[at + "crate::".len()..];
        let names: Vec<String> = match rest.strip_prefix('{') {
            // A group: the first name of each of its (top-level) parts.
            Some(group) => {
                let mut depth = 0;
                let end = group
                    .char_indices()
                    .find(|(_, c)| match c {
                        '{' => {
                            depth += 1;
                            false
                        }
                        '}' if depth == 0 => true,
                        '}' => {
                            depth -= 1;
                            false
                        }
                        _ => false,
                    })
                    .map_or(group.len(), |(end, _)| end);
                let mut parts = Vec::new();
                let mut depth = 0;
                let mut start = 0;
                for (index, c) in group[..end].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            parts.push(leading_name(&group[start..index]));
                            start = index + 1;
                        }
                        _ => {}
                    }
                }
                parts.push(leading_name(&group[start..end]));
                parts
            }
            None => vec![leading_name(rest)],
        };
        named.extend(
            names
                .into_iter()
                .filter(|name| !name.is_empty())
                .map(|name| (line, name)),
        );
    }
    named
}

#[test]
fn the_admins_modules_name_only_their_layer_and_below() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../host");
    let rank: BTreeMap<&str, usize> = ADMIN_LAYERS
        .iter()
        .enumerate()
        .flat_map(|(rank, (_, modules))| modules.iter().map(move |module| (*module, rank)))
        .collect();
    let mut files = Vec::new();
    for krate in ["admin", "scheduler"] {
        let src = root.join(krate).join("src");
        let mut found = Vec::new();
        rust_files(&src, &mut found);
        files.extend(found.into_iter().map(|file| (src.clone(), file)));
    }
    let mut wrong = Vec::new();
    for (src, file) in &files {
        let relative = file.strip_prefix(src).unwrap();
        let first = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs");
        if module == "lib" {
            continue; // the crate root assembles the layers
        }
        let Some(&own) = rank.get(module) else {
            wrong.push(format!("module {module} has no layer in ADMIN_LAYERS"));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (line, named) in crate_paths(&text) {
            if let Some(&theirs) = rank.get(named.as_str())
                && theirs < own
            {
                wrong.push(format!(
                    "{}:{line}: {module} ({} layer) names {named} ({} layer, above it)",
                    relative.display(),
                    ADMIN_LAYERS[own].0,
                    ADMIN_LAYERS[theirs].0
                ));
            }
        }
    }
    assert!(files.len() > 60, "read only {} files", files.len());
    assert!(wrong.is_empty(), "imports upward:\n{}", wrong.join("\n"));
}

/// The services reach the firing engine only through their context
/// (`service/context.rs`: `Services` and its `Firing` handle): no other
/// file of `service/` names the scheduler.
#[test]
fn the_services_reach_the_engine_only_through_their_context() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/admin/src/service");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut wrong = Vec::new();
    for file in &files {
        if file.ends_with("context.rs") {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (line, named) in crate_paths(&text) {
            if named == "scheduler" {
                wrong.push(format!("{}:{line}", file.display()));
            }
        }
        for (at, _) in text.match_indices("Scheduler") {
            let line = text[..at].matches('\n').count() + 1;
            wrong.push(format!("{}:{line}: Scheduler", file.display()));
        }
    }
    assert!(files.len() > 8, "read only {} files", files.len());
    assert!(
        wrong.is_empty(),
        "the scheduler named:\n{}",
        wrong.join("\n")
    );
}

/// Handlers reach the store only through the services: no file of
/// `api/` calls a method of the store (they hand `services.store()` on
/// to a service function), and none names the scheduler (what the API
/// hands the engine besides changes goes through its `Intake`).
#[test]
fn the_handlers_reach_the_store_only_through_services() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/admin/src/api");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut wrong = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let line_of = |at: usize| text[..at].matches('\n').count() + 1;
        for (at, _) in text.match_indices("store()") {
            let after = text[at + "store()".len()..].trim_start();
            if after.starts_with('.') {
                wrong.push(format!(
                    "{}:{}: a store method called",
                    file.display(),
                    line_of(at)
                ));
            }
        }
        for (at, _) in text.match_indices("store.") {
            let before = text[..at].chars().next_back();
            if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                wrong.push(format!(
                    "{}:{}: a store method called",
                    file.display(),
                    line_of(at)
                ));
            }
        }
        for (at, _) in text.match_indices("Scheduler") {
            wrong.push(format!("{}:{}: Scheduler", file.display(), line_of(at)));
        }
    }
    assert!(files.len() > 20, "read only {} files", files.len());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The runtime's modules import in one direction: no module names one
/// that names it back, directly or through others (its error types are
/// all in `errors`, which names no other module). A circle fails here,
/// naming its modules in order.
#[test]
fn the_runtimes_modules_import_in_one_direction() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/runtime/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    // Each top-level module (a file, or a folder with its files) and the
    // modules of the crate it names.
    let module_of = |file: &Path| -> String {
        let relative = file.strip_prefix(&src).unwrap();
        let first = relative.components().next().unwrap().as_os_str();
        first.to_string_lossy().trim_end_matches(".rs").to_owned()
    };
    let modules: BTreeSet<String> = files.iter().map(|file| module_of(file)).collect();
    let mut names: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_of(file);
        let text = std::fs::read_to_string(file).unwrap();
        let named = names.entry(module.clone()).or_default();
        for (at, _) in text.match_indices("crate::") {
            let rest = &text[at + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if name != module && modules.contains(&name) {
                named.insert(name);
            }
        }
    }
    assert!(
        names["errors"].is_empty(),
        "errors names {:?}",
        names["errors"]
    );
    // A walk from each module along what it names; meeting a module
    // already on the path is a circle.
    fn walk(
        module: &str,
        names: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|on| on == module) {
            let mut circle = path[start..].to_vec();
            circle.push(module.to_owned());
            return Some(circle);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_owned());
        for next in names.get(module).into_iter().flatten() {
            if let Some(circle) = walk(next, names, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(module.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    for module in names.keys() {
        let circle = walk(module, &names, &mut Vec::new(), &mut done);
        assert!(
            circle.is_none(),
            "the runtime's modules import in a circle: {}",
            circle.unwrap_or_default().join(" → ")
        );
    }
    assert!(names.len() > 10, "read only {} modules", names.len());
}
