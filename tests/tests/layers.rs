//! The admin's layers import downward only: the HTTP layer (`api`,
//! `console`) over the services, the services over the scheduler, the
//! scheduler over the store, the schedule arithmetic and the workflow
//! planner. A file that names a layer above its own closes an import
//! circle and fails here, naming the file and the line. And the runtime's
//! modules import in one direction.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use std::path::{Path, PathBuf};

/// (the layer's folder under `host/admin/src`, the layers it must not name).
const LAYERS: &[(&str, &[&str])] = &[
    ("service", &["api", "console"]),
    ("scheduler", &["api", "console", "service"]),
    ("store", &["api", "console", "service", "scheduler"]),
    (
        "schedule",
        &["api", "console", "service", "scheduler", "store"],
    ),
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

#[test]
fn the_admins_layers_import_downward_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/admin/src");
    let mut upward = Vec::new();
    let mut files_read = 0;
    for (layer, above) in LAYERS {
        let mut files = Vec::new();
        rust_files(&src.join(layer), &mut files);
        assert!(!files.is_empty(), "no files in the {layer} layer");
        for file in files {
            files_read += 1;
            let text = std::fs::read_to_string(&file).unwrap();
            for (number, line) in text.lines().enumerate() {
                for name in *above {
                    if line.contains(&format!("crate::{name}::"))
                        || line.contains(&format!("crate::{name};"))
                        || line.contains(&format!("crate::{name}::{{"))
                    {
                        upward.push(format!(
                            "{}:{}: the {layer} layer names `{name}`: {}",
                            file.strip_prefix(&src).unwrap().display(),
                            number + 1,
                            line.trim()
                        ));
                    }
                }
            }
        }
    }
    assert!(files_read > 20, "read only {files_read} files");
    assert!(upward.is_empty(), "imports upward:\n{}", upward.join("\n"));
}

/// The runtime's modules import in one direction: no module names one
/// that names it back, directly or through others (its error types are
/// all in `errors`, which names no other module). A circle fails here,
/// naming its modules in order.
#[test]
fn the_runtimes_modules_import_in_one_direction() {
    use std::collections::{BTreeMap, BTreeSet};
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
