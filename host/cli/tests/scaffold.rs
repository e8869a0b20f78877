//! `cronbox new`, `cronbox build` and `cronbox deploy` as a user runs them:
//! a project in each language, built with one command, runs with `cronbox
//! run`; deployed to `cronbox up` with one command.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

mod support;

use std::path::Path;
use std::process::Output;

fn cronbox(args: &[&str], dir: &Path) -> Output {
    cronbox_with(args, dir, &[])
}

/// [`cronbox`] with these environment variables set.
fn cronbox_with(args: &[&str], dir: &Path, env: &[(&str, &Path)]) -> Output {
    support::authoring_command()
        .args(args)
        .current_dir(dir)
        .env_remove("CRONBOX_ADMIN")
        .env_remove("CRONBOX_API_TOKEN")
        .envs(env.iter().copied())
        .output()
        .expect("cronbox starts")
}

fn printed(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn a_new_project_in_each_language_builds_with_one_command_and_runs() {
    let home = tempfile::tempdir().unwrap();
    // The three languages side by side: each build waits on its own tools
    // much of its time.
    std::thread::scope(|languages| {
        for (lang, title) in [("rust", "Rust"), ("python", "Python"), ("js", "JavaScript")] {
            let home = home.path();
            languages.spawn(move || new_build_and_run(home, lang, title));
        }
    });
}

/// `cronbox new` of a `lang` project under `home`, `cronbox build` in it
/// and `cronbox run` of what it built.
fn new_build_and_run(home: &Path, lang: &str, title: &str) {
    let name = format!("greeter-{lang}");
    let created = cronbox(&["new", &name, "--lang", lang], home);
    assert!(created.status.success(), "{}", printed(&created));
    assert!(
        printed(&created).contains("cronbox build")
            && printed(&created).contains(&format!("({title} job {name})")),
        "{}",
        printed(&created)
    );
    let project = home.join(&name);
    let built = cronbox(&["build"], &project);
    assert!(built.status.success(), "{lang}: {}", printed(&built));
    let component = project.join(format!("{name}.wasm"));
    assert!(component.is_file(), "{lang}: {}", printed(&built));
    let ran = cronbox(
        &["run", component.to_str().unwrap(), "--param", "scaffold"],
        home,
    );
    let text = printed(&ran);
    assert_eq!(ran.status.code(), Some(0), "{lang}: {text}");
    assert!(
        text.contains("outcome: success (200): hello, scaffold"),
        "{lang}: {text}"
    );
}

#[test]
fn new_and_build_refuse_clearly_and_write_nothing() {
    let home = tempfile::tempdir().unwrap();
    let refused = cronbox(&["new", "bad name", "--lang", "python"], home.path());
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        printed(&refused).contains("must be letters, digits"),
        "{}",
        printed(&refused)
    );
    std::fs::create_dir(home.path().join("taken")).unwrap();
    std::fs::write(home.path().join("taken/notes.txt"), "mine").unwrap();
    let refused = cronbox(&["new", "taken", "--lang", "js"], home.path());
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        printed(&refused).contains("exists and is not empty"),
        "{}",
        printed(&refused)
    );
    assert_eq!(
        std::fs::read_dir(home.path().join("taken"))
            .unwrap()
            .count(),
        1,
        "nothing written"
    );
    let refused = cronbox(&["build", "taken"], home.path());
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        printed(&refused).contains("is not a job project"),
        "{}",
        printed(&refused)
    );
    let unknown = cronbox(&["new", "x", "--lang", "cobol"], home.path());
    assert_eq!(unknown.status.code(), Some(2), "{}", printed(&unknown));
}

/// From `cronbox new` to a running job in one more command, against
/// `cronbox up` found through its context: built, pushed, created and
/// started; run again, nothing changes and nothing is built; an edit of
/// `job.toml` is shown by `--dry-run` (which changes nothing) and applied
/// by the next deploy.
#[test]
fn a_new_project_is_deployed_with_one_command_and_again_changes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("cronbox-data");
    let (_up, _, at) = support::up(&data, None);
    let contexts = data.join("contexts.toml");
    let env = [("CRONBOX_CONTEXTS", contexts.as_path())];
    let created = cronbox(&["new", "greeter", "--lang", "rust"], home.path());
    assert!(
        printed(&created).contains("deploy it: cronbox deploy"),
        "{}",
        printed(&created)
    );
    let project = home.path().join("greeter");
    let deploy = |args: &[&str]| {
        let mut all = vec!["deploy"];
        all.extend_from_slice(args);
        let output = cronbox_with(&all, &project, &env);
        assert!(output.status.success(), "{}", printed(&output));
        printed(&output)
    };

    let first = deploy(&[]);
    for expected in [
        "  build   built ",
        "  module  greeter version 1 pushed",
        "  job     greeter created",
        "  state   started",
    ] {
        assert!(first.contains(expected), "{expected:?} in {first}");
    }
    let api = cronbox_api::Client::new(
        &format!("http://{}", at.admin),
        std::fs::read_to_string(data.join("api-token"))
            .unwrap()
            .trim(),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let job = || {
        let named = cronbox_api::JobQuery {
            name: Some("greeter".to_owned()),
            ..Default::default()
        };
        runtime.block_on(api.jobs(&named)).unwrap().remove(0).job
    };
    let deployed = job();
    assert_eq!(
        (
            deployed.enabled,
            deployed.module_name.as_deref(),
            deployed.schedule_conf.as_str(),
            deployed.param.as_str()
        ),
        (true, Some("greeter"), "0 * * * * ?", "world")
    );

    let again = deploy(&[]);
    for expected in [
        "  build   unchanged since the last build",
        "  module  greeter version 1 unchanged",
        "  job     greeter unchanged",
        "  state   running",
    ] {
        assert!(again.contains(expected), "{expected:?} in {again}");
    }

    let file = project.join("job.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace("param = \"world\"", "param = \"deployed\""),
    )
    .unwrap();
    let planned = deploy(&["--dry-run"]);
    assert!(
        planned.contains("  job     greeter would be updated: param"),
        "{planned}"
    );
    assert_eq!(job().param, "world", "a dry run changes nothing");
    let applied = deploy(&[]);
    assert!(
        applied.contains("  job     greeter updated: param"),
        "{applied}"
    );
    assert_eq!(job().param, "deployed");

    // A folder of projects: one that does not read does not stop the
    // others, and every failure is named at the end.
    let broken = home.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    std::fs::write(broken.join("job.toml"), "name = ").unwrap();
    let all = cronbox_with(
        &["deploy", "--dry-run", home.path().to_str().unwrap()],
        &project,
        &env,
    );
    let said = printed(&all);
    assert_eq!(all.status.code(), Some(1), "{said}");
    assert!(
        said.contains("job     greeter unchanged")
            && said.contains("broken/job.toml is not valid TOML")
            && said.contains("1 of 2 did not deploy"),
        "{said}"
    );
    std::fs::remove_dir_all(&broken).unwrap();

    // `cronbox dev`: deployed and run at once, its log printed; a save of
    // the source is built, pushed and run again.
    let dev = DevSession::start(&project, &contexts);
    let wait_for = |wanted: &str| dev.wait_for(wanted);
    wait_for("ended: success (hello, deployed)");
    wait_for("waiting for a change");
    let source = project.join("src").join("lib.rs");
    let code = std::fs::read_to_string(&source).unwrap();
    assert!(code.contains("hello, {who}"), "{code}");
    std::fs::write(&source, code.replace("hello, {who}", "hi, {who}")).unwrap();
    let turn = wait_for("ended: success (hi, deployed)");
    assert!(
        turn.iter()
            .any(|line| line.contains("module  greeter version 2 pushed")),
        "{turn:#?}"
    );
    let took = wait_for("waiting for a change");
    eprintln!("the inner loop after a save: {}", took.last().unwrap());
}

/// A `cronbox dev` process in a project, what it prints read line by line.
struct DevSession {
    process: support::Process,
    said: std::sync::mpsc::Receiver<String>,
}

impl DevSession {
    fn start(project: &Path, contexts: &Path) -> DevSession {
        let mut dev = support::authoring_command()
            .arg("dev")
            .current_dir(project)
            .env_remove("CRONBOX_ADMIN")
            .env_remove("CRONBOX_API_TOKEN")
            .env("CRONBOX_CONTEXTS", contexts)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // What it prints on either stream, line by line.
        let (lines, said) = std::sync::mpsc::channel();
        let streams: [Box<dyn std::io::Read + Send>; 2] = [
            Box::new(dev.stdout.take().unwrap()),
            Box::new(dev.stderr.take().unwrap()),
        ];
        for stream in streams {
            let lines = lines.clone();
            std::thread::spawn(move || {
                use std::io::BufRead as _;
                for line in std::io::BufReader::new(stream)
                    .lines()
                    .map_while(Result::ok)
                {
                    if lines.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        DevSession {
            process: support::Process::new(dev),
            said,
        }
    }

    /// Stops it as Ctrl-C would (SIGTERM, which it treats alike).
    fn stop(&self) {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.process.0.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// The lines printed until one holds `wanted` (that one last).
    fn wait_for(&self, wanted: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            let line = self
                .said
                .recv_timeout(std::time::Duration::from_secs(180))
                .unwrap_or_else(|_| panic!("{wanted:?} never came; said: {seen:#?}"));
            let found = line.contains(wanted);
            seen.push(line);
            if found {
                return seen;
            }
        }
    }
}

/// `cronbox dev` on a Python job: the job is deployed once with the dev
/// runner (built once) and each run carries the project's sources, so a
/// save is one trigger — no componentize-py, no new version for the
/// executor to compile. The job's modules import each other; an error in
/// them fails the run with its message, and the next save recovers.
#[test]
fn a_python_job_under_cronbox_dev_runs_each_save_without_a_build() {
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("cronbox-data");
    let (_up, _, _at) = support::up(&data, None);
    let contexts = data.join("contexts.toml");
    let created = cronbox(&["new", "pyloop", "--lang", "python"], home.path());
    assert!(created.status.success(), "{}", printed(&created));
    let project = home.path().join("pyloop");
    std::fs::write(
        project.join("app.py"),
        "from cronbox_job import Context, job\n\nimport helpers\n\n\n@job\n\
         def execute(ctx: Context) -> str:\n    return helpers.greet(ctx.param or \"world\")\n",
    )
    .unwrap();
    let helpers = project.join("helpers.py");
    std::fs::write(&helpers, "def greet(who):\n    return f\"hello, {who}\"\n").unwrap();

    let dev = DevSession::start(&project, &contexts);
    let first = dev.wait_for("ended: success (hello, world)");
    assert!(
        first
            .iter()
            .any(|line| line.contains("module  pyloop version 1 pushed")),
        "{first:#?}"
    );
    dev.wait_for("waiting for a change");

    std::fs::write(&helpers, "def greet(who):\n    return f\"hi, {who}\"\n").unwrap();
    let turn = dev.wait_for("ended: success (hi, world)");
    assert!(
        turn.iter()
            .any(|line| line.contains("module  pyloop version 1 unchanged")),
        "the same runner, nothing pushed: {turn:#?}"
    );
    let took = dev.wait_for("waiting for a change");
    eprintln!(
        "the Python inner loop after a save: {}",
        took.last().unwrap()
    );

    std::fs::write(&helpers, "def greet(who):\n    return (\n").unwrap();
    dev.wait_for("SyntaxError");
    dev.wait_for("waiting for a change");
    std::fs::write(&helpers, "def greet(who):\n    return f\"hey, {who}\"\n").unwrap();
    dev.wait_for("ended: success (hey, world)");
    dev.wait_for("waiting for a change");
    // Stopped, it says the job needs a real build for its scheduled runs.
    dev.stop();
    dev.wait_for("`cronbox deploy` builds and pushes it");
}
