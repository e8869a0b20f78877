//! `cronbox deploy`: one command from a folder to a running job, as
//! `spin up` or `kubectl apply` are. It reads `job.toml` (a job definition,
//! plus a `[deploy]` table), builds the project when its files changed
//! since the last build, pushes the component as the next version of the
//! job's module unless that version is already the latest, creates or
//! updates the job by name, starts or stops it, and prints what changed.
//! Run again with nothing changed, it changes nothing. `--dry-run` prints
//! what it would do and does none of it.
//!
//! A folder without a `job.toml` but with sub-folders holding one deploys
//! each of them, then saves the folder's `workflow.toml` (if it has one)
//! as the workflow's next version, unless it is unchanged.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::Args;
use cronbox_api::{Client, ClientError, Digest, JobQuery, JobSpec};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

/// Build, push and create or update the job of a folder's `job.toml`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox new hello && cd hello && cronbox deploy
  cronbox deploy --dry-run
  cronbox deploy jobs/          (every sub-folder holding a job.toml)
  cronbox deploy example-jobs/etl   (its jobs, then its workflow.toml)")]
pub struct DeployArgs {
    #[command(flatten)]
    connection: crate::manage::Connection,
    /// A folder holding `job.toml` (or folders that do), or a job file.
    #[arg(default_value = ".")]
    path: PathBuf,
    /// Print what would change; build, push and change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Where componentize-py and componentize-js are installed on first
    /// use (default: cronbox/tools under the user's cache directory).
    #[arg(long, env = "CRONBOX_TOOLS_DIR")]
    tools_dir: Option<PathBuf>,
}

/// The `[deploy]` table of a job file.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeployTable {
    /// The project to build, relative to the job file (default: its
    /// folder, when that is a project).
    pub(crate) source: Option<PathBuf>,
    /// A component already built, pushed as it is (instead of `source`).
    component: Option<PathBuf>,
    /// Start the job after deploying (false: leave it stopped).
    #[serde(default = "yes")]
    start: bool,
}

fn yes() -> bool {
    true
}

/// One job file read: the job's definition and how to deploy it.
pub(crate) struct JobFile {
    path: PathBuf,
    pub(crate) folder: PathBuf,
    pub(crate) spec: JobSpec,
    /// The fields the file sets, as the API names them (what an update
    /// compares).
    fields: Map<String, Value>,
    pub(crate) deploy: DeployTable,
}

impl JobFile {
    /// The folder of the job's sources: `[deploy] source`, else the job
    /// file's.
    pub(crate) fn source_folder(&self) -> PathBuf {
        match &self.deploy.source {
            Some(source) => self.folder.join(source),
            None => self.folder.clone(),
        }
    }

    /// The project a deploy builds the job from: none when the job is
    /// pinned to a module version or the file names a built component.
    pub(crate) fn project_to_build(&self) -> Option<PathBuf> {
        (!self.pinned() && self.deploy.component.is_none()).then(|| self.source_folder())
    }

    /// Whether the job follows one version of its module (`name@3`).
    fn pinned(&self) -> bool {
        self.spec.module.as_deref().is_some_and(|m| m.contains('@'))
    }
}

pub fn main(args: DeployArgs) -> anyhow::Result<()> {
    let files = job_files(&args.path)?;
    let (client, _json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        let workflow = args.path.join("workflow.toml");
        let workflow = (args.path.is_dir() && workflow.is_file()).then_some(workflow);
        if let ([path], None) = (files.as_slice(), &workflow) {
            let file = read_job_file(path)?;
            return deploy(&client, &file, args.dry_run, args.tools_dir.clone())
                .await
                .map(|_| ());
        }
        // A folder of jobs: each deployed whatever became of the others,
        // and every failure reported at the end.
        let mut failed = Vec::new();
        for path in &files {
            let deployed = async {
                let file = read_job_file(path)?;
                deploy(&client, &file, args.dry_run, args.tools_dir.clone())
                    .await
                    .map(|_| ())
            };
            if let Err(error) = deployed.await {
                eprintln!("error: {}: {error:#}", path.display());
                failed.push(path.display().to_string());
            }
        }
        if let Some(workflow) = &workflow
            && let Err(error) = deploy_workflow(&client, workflow, args.dry_run).await
        {
            eprintln!("error: {}: {error:#}", workflow.display());
            failed.push(workflow.display().to_string());
        }
        if !failed.is_empty() {
            let all = files.len() + usize::from(workflow.is_some());
            bail!(
                "{} of {all} did not deploy ({}); the others did",
                failed.len(),
                failed.join(", ")
            );
        }
        Ok(())
    })
}

/// Saves the workflow of `file` as its next version, unless the saved
/// one is the same (or, with `dry_run`, says what it would do).
async fn deploy_workflow(client: &Client, file: &Path, dry_run: bool) -> anyhow::Result<()> {
    let (name, spec) = crate::manage::read_workflow_file(file)?;
    outln!("workflow {name} ({})", file.display());
    let saved = match client.workflow(&name).await {
        Ok(saved) => Some(saved),
        Err(ClientError::Refused { status: 404, .. }) => None,
        Err(error) => return Err(error.into()),
    };
    match saved {
        Some(saved) if saved.definition == spec => {
            outln!("  workflow unchanged (version {})", saved.version);
        }
        _ if dry_run => outln!("  workflow would be saved"),
        _ => {
            let saved = client.put_workflow(&name, &spec).await?;
            outln!(
                "  workflow saved: version {}, {} node(s); run it: cronbox workflow run {name} --wait",
                saved.version,
                saved.definition.nodes.len()
            );
        }
    }
    Ok(())
}

/// The job files under `path`: itself if it is a file, its `job.toml`,
/// or each sub-folder's.
pub(crate) fn job_files(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_owned()]);
    }
    let own = path.join("job.toml");
    if own.is_file() {
        return Ok(vec![own]);
    }
    let mut found = Vec::new();
    let entries =
        std::fs::read_dir(path).with_context(|| format!("cannot read {}", path.display()))?;
    for entry in entries {
        let file = entry?.path().join("job.toml");
        if file.is_file() {
            found.push(file);
        }
    }
    found.sort();
    if found.is_empty() {
        bail!(
            "no job.toml in {} nor in its folders; `cronbox new NAME` makes a project with one",
            path.display()
        );
    }
    Ok(found)
}

pub(crate) fn read_job_file(path: &Path) -> anyhow::Result<JobFile> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut table: toml::Table = text
        .parse()
        .with_context(|| format!("{} is not valid TOML", path.display()))?;
    let deploy = match table.remove("deploy") {
        Some(value) => value.try_into().with_context(|| {
            format!(
                "{}: [deploy] takes source, component and start",
                path.display()
            )
        })?,
        None => DeployTable::default(),
    };
    let Value::Object(mut fields) = serde_json::to_value(&table)? else {
        bail!("{} is not a table", path.display());
    };
    let Some(name) = fields
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        bail!(
            "{}: a job file names its job (name = \"...\")",
            path.display()
        );
    };
    // The module defaults to the job's name.
    fields
        .entry("module")
        .or_insert_with(|| Value::String(name.clone()));
    let spec: JobSpec = serde_json::from_value(Value::Object(fields.clone()))
        .with_context(|| format!("{} is not a job definition", path.display()))?;
    let folder = path
        .parent()
        .map(Path::to_owned)
        .unwrap_or_else(|| PathBuf::from("."));
    Ok(JobFile {
        path: path.to_owned(),
        folder,
        spec,
        fields,
        deploy,
    })
}

/// One job file deployed (or, with `dry_run`, what would be); the job's
/// id, unless a dry run would create it.
pub(crate) async fn deploy(
    client: &Client,
    file: &JobFile,
    dry_run: bool,
    tools_dir: Option<PathBuf>,
) -> anyhow::Result<Option<cronbox_api::JobId>> {
    deploy_component(client, file, dry_run, tools_dir, None).await
}

/// [`deploy`], pushing `component` (already built) when given instead of
/// what the file names or its project builds to.
pub(crate) async fn deploy_component(
    client: &Client,
    file: &JobFile,
    dry_run: bool,
    tools_dir: Option<PathBuf>,
    component: Option<&Path>,
) -> anyhow::Result<Option<cronbox_api::JobId>> {
    let would = if dry_run { "would be " } else { "" };
    outln!("{} ({})", file.spec.name, file.path.display());
    let module = file
        .spec
        .module
        .as_deref()
        .map(|module| module.split('@').next().unwrap_or(module).to_owned())
        .unwrap_or_else(|| file.spec.name.clone());

    // Build.
    let component = match (component, file.project_to_build()) {
        (Some(built), _) => Some(built.to_owned()),
        (None, Some(project)) => Some(build_if_changed(&project, dry_run, tools_dir).await?),
        // A component the file names, unless the job is pinned.
        (None, None) if !file.pinned() => {
            file.deploy.component.as_ref().map(|c| file.folder.join(c))
        }
        (None, None) => None,
    };

    // Push.
    if let Some(component) = &component {
        let latest = match client.module_versions(&module).await {
            Ok(versions) => versions.into_iter().max_by_key(|v| v.version),
            Err(ClientError::Refused { status: 404, .. }) => None,
            Err(error) => return Err(error.into()),
        };
        match std::fs::read(component) {
            Ok(bytes) => {
                let digest = Digest::from_sha256(&Sha256::digest(&bytes));
                match latest {
                    Some(latest) if latest.digest == digest => outln!(
                        "  module  {module} version {} unchanged ({})",
                        latest.version,
                        digest.short()
                    ),
                    latest if dry_run => outln!(
                        "  module  {module} version {} would be pushed ({})",
                        latest.map_or(1, |v| v.version + 1),
                        digest.short()
                    ),
                    _ => {
                        let pushed = client.upload(bytes, Some(&module), &[]).await?;
                        outln!(
                            "  module  {module} version {} pushed ({})",
                            pushed.version.map_or("?".to_owned(), |v| v.to_string()),
                            pushed.digest.short()
                        );
                    }
                }
            }
            Err(_) if dry_run => outln!("  module  {module} would be pushed once built"),
            Err(error) => {
                return Err(error).with_context(|| format!("cannot read {}", component.display()));
            }
        }
    }

    // The job, by name.
    let named = JobQuery {
        name: Some(file.spec.name.clone()),
        ..JobQuery::default()
    };
    let existing = client.jobs(&named).await?.into_iter().next().map(|l| l.job);
    let job = match existing {
        None if dry_run => {
            outln!("  job     {} {would}created", file.spec.name);
            None
        }
        None => {
            let created = client.create_job(&file.spec).await?;
            outln!("  job     {} created (id {})", created.name, created.id);
            Some(created)
        }
        Some(job) => {
            let changed = changed_fields(&file.fields, &JobSpec::from(job.clone()))?;
            if changed.is_empty() {
                outln!("  job     {} unchanged (id {})", job.name, job.id);
                Some(job)
            } else if dry_run {
                outln!(
                    "  job     {} would be updated: {}",
                    job.name,
                    changed.join(", ")
                );
                Some(job)
            } else {
                let desired = desired_spec(&file.fields, JobSpec::from(job.clone()))?;
                let updated = client.update_job(job.id, &desired).await?;
                outln!("  job     {} updated: {}", updated.name, changed.join(", "));
                Some(updated)
            }
        }
    };

    // Started or stopped, as the file says.
    let start = file.deploy.start;
    let id = job.as_ref().map(|job| job.id);
    match job {
        Some(job) if job.enabled == start => {
            outln!("  state   {}", if start { "running" } else { "stopped" })
        }
        Some(_) if dry_run => outln!(
            "  state   would be {}",
            if start { "started" } else { "stopped" }
        ),
        Some(job) if start => {
            client.start_job(job.id).await?;
            outln!("  state   started");
        }
        Some(job) => {
            client.stop_job(job.id).await?;
            outln!("  state   stopped");
        }
        None => outln!(
            "  state   would be {}",
            if start { "started" } else { "stopped" }
        ),
    }
    Ok(id)
}

/// The fields `wanted` sets whose value differs from `current`'s.
fn changed_fields(wanted: &Map<String, Value>, current: &JobSpec) -> anyhow::Result<Vec<String>> {
    let Value::Object(current) = serde_json::to_value(current)? else {
        return Ok(Vec::new());
    };
    Ok(wanted
        .iter()
        .filter(|(field, value)| !same_value(current.get(*field), value))
        .map(|(field, _)| field.clone())
        .collect())
}

/// Whether a stored value is the one written (names of enums in any
/// letter case, as the admin reads them).
fn same_value(current: Option<&Value>, wanted: &Value) -> bool {
    match (current, wanted) {
        (Some(Value::String(current)), Value::String(wanted)) => {
            current.eq_ignore_ascii_case(wanted)
        }
        (Some(current), wanted) => current == wanted,
        (None, _) => false,
    }
}

/// `current` with the fields `wanted` sets replaced: a job file sets what
/// it names, and leaves the rest as it is.
fn desired_spec(wanted: &Map<String, Value>, current: JobSpec) -> anyhow::Result<JobSpec> {
    let Value::Object(mut fields) = serde_json::to_value(current)? else {
        bail!("a job definition is an object");
    };
    for (field, value) in wanted {
        fields.insert(field.clone(), value.clone());
    }
    Ok(serde_json::from_value(Value::Object(fields))?)
}

/// The project in `source` built into its component, unless its files are
/// those of the last build (a fingerprint kept in `.cronbox/`); the
/// component's path.
async fn build_if_changed(
    source: &Path,
    dry_run: bool,
    tools_dir: Option<PathBuf>,
) -> anyhow::Result<PathBuf> {
    let source = std::path::absolute(source)
        .with_context(|| format!("cannot resolve {}", source.display()))?;
    let name = source
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "job".to_owned());
    let output = source.join(format!("{name}.wasm"));
    let fingerprint = fingerprint(&source)?;
    let kept = source.join(".cronbox").join("built-from");
    let unchanged = output.is_file()
        && std::fs::read_to_string(&kept).is_ok_and(|text| text.trim() == fingerprint);
    if unchanged {
        outln!(
            "  build   unchanged since the last build: {} kept",
            output.display()
        );
        return Ok(output);
    }
    if dry_run {
        outln!("  build   would build {}", output.display());
        return Ok(output);
    }
    let (out, built_from) = (output.clone(), source.clone());
    let built = tokio::task::spawn_blocking(move || {
        crate::scaffold::build_project(&source, Some(out), tools_dir)
    })
    .await??;
    outln!(
        "  build   built {} ({}, {:.1} s)",
        built.output.display(),
        bytesize::ByteSize(built.bytes),
        built.seconds
    );
    if let Some(folder) = kept.parent() {
        std::fs::create_dir_all(folder)
            .with_context(|| format!("cannot create {}", folder.display()))?;
    }
    // Taken again: a build may write sources of its own (Cargo.lock).
    let fingerprint = self::fingerprint(&built_from)?;
    std::fs::write(&kept, &fingerprint)
        .with_context(|| format!("cannot write {}", kept.display()))?;
    Ok(built.output)
}

/// A sha256 over the project's source files (their paths and contents),
/// leaving out what builds make: `target/`, `.cronbox/`, components,
/// Python's caches and hidden folders.
pub(crate) fn fingerprint(dir: &Path) -> anyhow::Result<String> {
    let mut files = Vec::new();
    collect_sources(dir, dir, &mut files)?;
    files.sort();
    let mut hash = Sha256::new();
    for relative in files {
        let bytes = std::fs::read(dir.join(&relative))
            .with_context(|| format!("cannot read {}", relative.display()))?;
        hash.update(relative.to_string_lossy().as_bytes());
        hash.update([0]);
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(&bytes);
    }
    Ok(hex::encode(hash.finalize()))
}

fn collect_sources(root: &Path, dir: &Path, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            let made_by_builds = matches!(name.as_ref(), "target" | "__pycache__" | "node_modules")
                || name.starts_with('.');
            if !made_by_builds {
                collect_sources(root, &path, files)?;
            }
        } else if kind.is_file() && !name.ends_with(".wasm") {
            files.push(path.strip_prefix(root).unwrap_or(&path).to_owned());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_follows_sources_not_what_builds_make() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("app.py"), "print(1)").unwrap();
        let first = fingerprint(dir.path()).unwrap();
        for made in ["target", "__pycache__", ".cronbox"] {
            std::fs::create_dir(dir.path().join(made)).unwrap();
            std::fs::write(dir.path().join(made).join("x"), "built").unwrap();
        }
        std::fs::write(dir.path().join("app.wasm"), "component").unwrap();
        assert_eq!(fingerprint(dir.path()).unwrap(), first);
        std::fs::write(dir.path().join("app.py"), "print(2)").unwrap();
        assert_ne!(fingerprint(dir.path()).unwrap(), first);
    }

    #[test]
    fn only_the_fields_a_file_sets_are_compared() {
        let current = JobSpec {
            param: "old".to_owned(),
            ..JobSpec::new("hello", "hello").with_cron("0 * * * * ?")
        };
        let wanted: Map<String, Value> = serde_json::from_value(serde_json::json!({
            "name": "hello", "schedule_type": "cron", "schedule_conf": "0 * * * * ?",
            "param": "new"
        }))
        .unwrap();
        assert_eq!(changed_fields(&wanted, &current).unwrap(), ["param"]);
        let desired = desired_spec(&wanted, current).unwrap();
        assert_eq!(desired.param, "new");
    }
}
