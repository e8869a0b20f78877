//! The admin's layers import downward only: the HTTP layer (`api`,
//! `console`) over the services, the services over the scheduler, the
//! scheduler over the store, the schedule arithmetic and the workflow
//! planner. A file that
//! names a layer above its own closes an import circle and fails here,
//! naming the file and the line.
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
