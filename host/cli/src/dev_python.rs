//! `cronbox dev`'s fast path for a Python job: instead of building the
//! job into a component on every save (componentize-py spends seconds
//! compiling the interpreter each time, and the executor compiles each new
//! version again), the job is deployed once with the dev runner, a
//! component holding the interpreter, the standard library and the SDK
//! (built once, `scaffold::python_dev_runner`), and each run carries the
//! project's `.py` files in its parameter (see
//! `guest-sdk/python/dev-runner/cronbox_dev_runner.py`). A save then costs
//! one trigger. Projects whose sources do not fit a parameter are built as
//! `cronbox deploy` builds them.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;

/// The most source a run's parameter carries (the admin takes 64 KiB).
pub(crate) const MAX_SOURCE_BYTES: usize = 60 << 10;

/// Folders that are never a job's sources.
const SKIPPED: [&str; 7] = [
    "cronbox_job",
    "__pycache__",
    "wit",
    "target",
    "node_modules",
    "venv",
    "site-packages",
];

/// The project's `.py` files by path (`/`-separated, relative to it),
/// without the SDK's copy; `Err` with their size when they are more than
/// [`MAX_SOURCE_BYTES`].
pub(crate) fn sources(project: &Path) -> anyhow::Result<Result<BTreeMap<String, String>, usize>> {
    let mut files = BTreeMap::new();
    let mut total = 0;
    collect(project, "", &mut files, &mut total)?;
    Ok(if total > MAX_SOURCE_BYTES {
        Err(total)
    } else {
        Ok(files)
    })
}

fn collect(
    folder: &Path,
    prefix: &str,
    files: &mut BTreeMap<String, String>,
    total: &mut usize,
) -> anyhow::Result<()> {
    let entries =
        std::fs::read_dir(folder).with_context(|| format!("cannot read {}", folder.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot read {}", folder.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let relative = format!("{prefix}{name}");
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            if !(prefix.is_empty() && SKIPPED.contains(&name.as_str())) && name != "__pycache__" {
                collect(&path, &format!("{relative}/"), files, total)?;
            }
        } else if name.ends_with(".py") {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            *total += relative.len() + text.len();
            files.insert(relative, text);
        }
    }
    Ok(())
}

/// The parameter of a dev run: the sources and the job's own parameter.
pub(crate) fn parameter(files: &BTreeMap<String, String>, param: &str) -> String {
    serde_json::json!({ "cronbox_dev": { "files": files, "param": param } }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_projects_sources_are_its_python_files_without_the_sdk_or_caches() {
        let project = tempfile::tempdir().unwrap();
        let write = |path: &str, text: &str| {
            let file = project.path().join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, text).unwrap();
        };
        write("app.py", "import helpers.text\n");
        write("helpers/__init__.py", "");
        write("helpers/text.py", "X = 1\n");
        write("cronbox_job/__init__.py", "sdk");
        write("helpers/__pycache__/text.cpython-312.pyc", "");
        write(".venv/lib/x.py", "");
        write("job.toml", "name = 'x'");
        let files = sources(project.path()).unwrap().unwrap();
        assert_eq!(
            files.keys().collect::<Vec<_>>(),
            ["app.py", "helpers/__init__.py", "helpers/text.py"]
        );
        let sent: serde_json::Value = serde_json::from_str(&parameter(&files, "p")).unwrap();
        assert_eq!(sent["cronbox_dev"]["files"]["helpers/text.py"], "X = 1\n");
        assert_eq!(sent["cronbox_dev"]["param"], "p");
        assert!(parameter(&files, "p").starts_with(cronbox_api::DEV_SOURCES_PREFIX));

        write("big.py", &"#".repeat(MAX_SOURCE_BYTES));
        assert!(sources(project.path()).unwrap().is_err());
    }
}
