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

/// The longest parameter the admin takes (`MAX_PARAM_BYTES`): a dev run's
/// sources and parameter, as JSON, must fit.
pub(crate) const MAX_PARAMETER_BYTES: usize = 64 << 10;

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

/// The parameter of a dev run of the project: its `.py` files by path
/// (`/`-separated, relative to it, without the SDK's copy) and the job's
/// own parameter, as JSON; `Err` with its length when it is longer than
/// [`MAX_PARAMETER_BYTES`].
pub(crate) fn dev_parameter(project: &Path, param: &str) -> anyhow::Result<Result<String, usize>> {
    let mut files = BTreeMap::new();
    collect(project, "", &mut files)?;
    let parameter = parameter(&files, param);
    Ok(if parameter.len() > MAX_PARAMETER_BYTES {
        Err(parameter.len())
    } else {
        Ok(parameter)
    })
}

fn collect(
    folder: &Path,
    prefix: &str,
    files: &mut BTreeMap<String, String>,
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
                collect(&path, &format!("{relative}/"), files)?;
            }
        } else if name.ends_with(".py") {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            files.insert(relative, text);
        }
    }
    Ok(())
}

/// The parameter of a dev run: the sources and the job's own parameter.
fn parameter(files: &BTreeMap<String, String>, param: &str) -> String {
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
        let sent = dev_parameter(project.path(), "p").unwrap().unwrap();
        assert!(sent.starts_with(cronbox_api::DEV_SOURCES_PREFIX));
        let sent: serde_json::Value = serde_json::from_str(&sent).unwrap();
        let files = sent["cronbox_dev"]["files"].as_object().unwrap();
        assert_eq!(
            files.keys().collect::<Vec<_>>(),
            ["app.py", "helpers/__init__.py", "helpers/text.py"]
        );
        assert_eq!(files["helpers/text.py"], "X = 1\n");
        assert_eq!(sent["cronbox_dev"]["param"], "p");

        // Measured as sent: newlines take two bytes in JSON.
        write("big.py", &"\n".repeat(MAX_PARAMETER_BYTES / 2));
        let too_long = dev_parameter(project.path(), "p").unwrap().unwrap_err();
        assert!(too_long > MAX_PARAMETER_BYTES, "{too_long}");
    }
}
