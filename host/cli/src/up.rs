//! `cronbox up`: an admin and an executor in one process on embedded SQLite,
//! with the demo jobs deployed — from clone to watching sandboxed jobs run
//! in one command.
//!
//! Everything lives under the data directory (default `./cronbox-data`):
//! the admin's database, the executor's modules, artifacts and spool, and
//! the two tokens (`api-token`, `executor-token`) and the console user
//! `admin`'s password (`admin-password`), created on the first start. A
//! restart carries on: the demo jobs are matched by name, so none is added
//! twice; they follow named modules, so a changed built-in
//! component becomes a new version they move to; one the user stopped
//! stays stopped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Args;
use cronbox_admin::{AdminConfig, Database, SchedulerConfig};
use cronbox_executor::ExecutorConfig;

use cronbox_api::{Client, JobId, JobQuery, JobSpec};

/// Run an admin and an executor in this process, with demo jobs deployed.
///
/// Stops gracefully on SIGINT or SIGTERM; run it again to carry on where it
/// left off.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox up
  cronbox up --data-dir /tmp/cronbox --bind 127.0.0.1:18080 --executor-bind 127.0.0.1:19090
  CRONBOX_API_TOKEN=s3cret cronbox up --no-demo
  cronbox up --tls")]
pub struct UpArgs {
    /// Directory for the database, modules, spool and tokens.
    #[arg(long, env = "CRONBOX_DATA_DIR", default_value = "cronbox-data")]
    data_dir: PathBuf,
    /// Address of the admin API.
    #[arg(long, env = "CRONBOX_ADMIN_BIND", default_value = "127.0.0.1:8080")]
    bind: SocketAddr,
    /// Address of the executor.
    #[arg(long, env = "CRONBOX_EXECUTOR_BIND", default_value = "127.0.0.1:9090")]
    executor_bind: SocketAddr,
    /// Token of the user API (default: the one in DATA_DIR/api-token,
    /// created at random on the first start).
    #[arg(long, env = "CRONBOX_API_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Deploy no demo jobs.
    #[arg(long)]
    no_demo: bool,
    /// Serve the admin and the executor over TLS, with a certificate for
    /// 127.0.0.1/::1/localhost from a CA made in DATA_DIR/tls (recorded in
    /// the context, so every command trusts it).
    #[arg(long, env = "CRONBOX_UP_TLS")]
    tls: bool,
    /// Networks beyond the public internet that granted jobs may call
    /// (comma-separated CIDRs), e.g. 127.0.0.1/32 for a service on this
    /// machine. A job still needs a grant within its tenant's ceiling
    /// (`cronbox ceiling default --set ORIGIN`).
    #[arg(long, env = "CRONBOX_EXECUTOR_HTTP_ALLOW_NETS", default_value = "")]
    http_allow_nets: cronbox_net_policy::NetPolicy,
    /// The context this admin is recorded as (made current), so that every
    /// command finds it from any folder; `cronbox context` lists them.
    #[arg(long = "context", value_name = "NAME", default_value = crate::context::UP_CONTEXT)]
    context_name: String,
    #[command(flatten)]
    tenant_policy: crate::admin::TenantPolicyArgs,
    #[command(flatten)]
    liveness: crate::admin::LivenessArgs,
    #[command(flatten)]
    compiler: crate::executor::CompilerArgs,
    #[command(flatten)]
    cache: crate::cache::CacheArgs,
}

/// A demo job: (name, built-in component, schedule, route, parameter, what
/// it shows).
struct Demo {
    name: &'static str,
    component: &'static str,
    cron: &'static str,
    route: &'static str,
    param: &'static str,
    about: &'static str,
}

const DEMOS: &[Demo] = &[
    Demo {
        name: "hello",
        component: "hello",
        cron: "*/5 * * * * ?",
        route: "FIRST",
        param: "cronbox",
        about: "every 5 s",
    },
    Demo {
        name: "counter",
        component: "counter",
        cron: "*/10 * * * * ?",
        route: "FIRST",
        param: "",
        about: "every 10 s, keeping a count in its durable state",
    },
    Demo {
        name: "sharded",
        component: "sharded",
        cron: "0 * * * * ?",
        route: "SHARDING_BROADCAST",
        param: "",
        about: "every minute, one shard per executor",
    },
];

pub fn main(
    args: UpArgs,
    metrics_export: Option<cronbox_telemetry::MetricsExporter>,
) -> anyhow::Result<ExitCode> {
    // 0700: it holds the database, tokens and keys.
    cronbox_admin::create_private_dir(&args.data_dir)
        .with_context(|| format!("cannot create {}", args.data_dir.display()))?;
    let token_file = args.data_dir.join("api-token");
    let token_file = std::path::absolute(&token_file)
        .with_context(|| format!("cannot resolve {}", token_file.display()))?;
    let (api_token, token_source, kept_in) = match args.token {
        Some(token) if token.is_empty() => bail!("--token must not be empty"),
        Some(token) => (
            token,
            "given by --token or CRONBOX_API_TOKEN".to_owned(),
            None,
        ),
        None => (
            stored_token(&token_file)?,
            format!("in {}", token_file.display()),
            Some(token_file),
        ),
    };
    let executor_token = stored_token(&args.data_dir.join("executor-token"))?;
    let threads = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let (tls, ca_file) = match args.tls {
        true => {
            let (identity, ca_file) = crate::tls::up_identity(&args.data_dir)?;
            (Some(identity), Some(ca_file))
        }
        false => (None, None),
    };
    let scheme = if args.tls { "https" } else { "http" };
    threads.block_on(async move {
        let admin = cronbox_admin::start(AdminConfig {
            bind: args.bind,
            database: Database::Sqlite(args.data_dir.join("admin")),
            migrations: Default::default(),
            api_token: api_token.clone(),
            executor_token: executor_token.clone(),
            scheduler: args.tenant_policy.apply(SchedulerConfig {
                // Kept beside the database, not in it.
                secrets: Some(std::sync::Arc::new(
                    cronbox_admin::secrets::SecretBox::generate_key_file(
                        &args.data_dir.join("secrets.key"),
                    )?,
                )),
                ca_file: ca_file.clone(),
                dead_after: args.liveness.dead_after,
                lost_after: args.liveness.lost_after,
                ..SchedulerConfig::default()
            })?,
            max_request_bytes: 64 << 20,
            tls: tls.clone(),
            metrics_export: metrics_export.clone(),
        })
        .await?;
        let admin_url = format!("{scheme}://{}", admin.local_addr());
        let mut executor_config = ExecutorConfig::new(
            args.executor_bind,
            vec![admin_url.clone()],
            executor_token,
            args.data_dir.join("executor"),
        );
        executor_config.beat_interval = Duration::from_secs(10);
        executor_config.tls = tls;
        executor_config.metrics_export = metrics_export;
        executor_config.ca_file = ca_file.clone();
        executor_config.runtime.compiler = args.compiler.compiler()?;
        executor_config.runtime.http_nets = args.http_allow_nets.clone();
        // Without a user cache, the executor keeps its own in DATA_DIR.
        args.cache.apply(&mut executor_config.runtime);
        let executor = cronbox_executor::start(executor_config).await?;

        let http = cronbox_tls::client_builder(ca_file.as_deref())?.build()?;
        let client = Client::with_http(&admin_url, &api_token, http);
        let password_file = args.data_dir.join("admin-password");
        ensure_console_user(&client, &password_file).await?;
        let deployed = if args.no_demo {
            Vec::new()
        } else {
            let deployed = deploy_demos(&client).await?;
            deploy_demo_workflow(&client).await?;
            deployed
        };
        let context = crate::context::Context {
            admin: admin_url.clone(),
            token_file: kept_in.clone(),
            ca_file: ca_file.clone(),
        };
        // Another context in use stays current while its admin answers.
        let unreachable = match crate::context::current_other_than(&args.context_name) {
            Some((_, current)) => !answers(&current).await,
            None => true,
        };
        let recorded = match crate::context::record(&args.context_name, context, unreachable) {
            Ok(recorded) => Some((args.context_name.as_str(), recorded)),
            Err(error) => {
                eprintln!("warning: this admin is not recorded as a context: {error:#}");
                None
            }
        };
        print_welcome(
            &Welcome {
                admin_url: &admin_url,
                executor: executor.address(),
                data_dir: &args.data_dir,
                token_source: &token_source,
                token_file: kept_in.as_deref(),
                password_file: &password_file,
                context: recorded.as_ref().map(|(name, recorded)| (*name, recorded)),
                ca_file: ca_file.as_deref(),
            },
            &deployed,
        );

        crate::shutdown_signal().await;
        // The admin fires nothing more while the executor drains, so that
        // no run is sent to it that it would refuse (nor recorded failed
        // without being tried); runs claimed but not sent stay pending for
        // the next start.
        eprintln!(
            "cronbox shutting down: no more fires; the executor finishes its running runs (at \
             most {}), then both stop",
            humantime::format_duration(executor.shutdown_grace())
        );
        admin.stop_firing();
        executor.shutdown().await;
        admin.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}

/// The token in `path`, or a new random one written there (readable by the
/// owner only).
fn stored_token(path: &Path) -> anyhow::Result<String> {
    if let Ok(token) = std::fs::read_to_string(path) {
        let token = token.trim().to_owned();
        if !token.is_empty() {
            return Ok(token);
        }
    }
    let token = hex::encode(rand::random::<[u8; 24]>());
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    std::io::Write::write_all(&mut file, token.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(token)
}

/// Pushes the demo components as named modules (a changed component
/// becomes a new version, which the demo jobs follow) and creates and
/// starts the demo jobs that do not exist yet. Returns (job id, demo) for
/// each.
async fn deploy_demos(client: &Client) -> anyhow::Result<Vec<(JobId, &'static Demo)>> {
    let mut deployed = Vec::new();
    for demo in DEMOS {
        let bytes = cronbox_example_jobs::embedded(demo.component)
            .with_context(|| format!("no built-in component {}", demo.component))?;
        client
            .upload(bytes.to_vec(), Some(demo.component), &[])
            .await
            .with_context(|| format!("cannot push the demo component {}", demo.component))?;
        let named = JobQuery {
            name: Some(demo.name.to_owned()),
            ..JobQuery::default()
        };
        let id = match client.jobs(&named).await?.first() {
            Some(listed) => listed.job.id,
            None => {
                let spec = JobSpec {
                    route: demo.route.to_owned(),
                    param: demo.param.to_owned(),
                    ..JobSpec::new(demo.name, demo.component).with_cron(demo.cron)
                };
                let id = client.create_job(&spec).await?.id;
                client.start_job(id).await?;
                id
            }
        };
        deployed.push((id, demo));
    }
    Ok(deployed)
}

/// The demo workflow: `hello` twice, the second run greeting the first's
/// output (made once; a later start leaves it as it may have been edited).
const DEMO_WORKFLOW: &str = "greet-twice";

async fn deploy_demo_workflow(client: &Client) -> anyhow::Result<()> {
    use cronbox_api::{WorkflowEdge, WorkflowNode, WorkflowSpec};
    if client.workflow(DEMO_WORKFLOW).await.is_ok() {
        return Ok(());
    }
    let node = |name: &str, param: &str| WorkflowNode {
        name: name.to_owned(),
        job: "hello".to_owned(),
        param: Some(param.to_owned()),
        ..WorkflowNode::default()
    };
    let spec = WorkflowSpec {
        description: "hello, then hello again with the first greeting".to_owned(),
        nodes: vec![
            node("first", "{{ input.who }}"),
            node("second", "again: {{ nodes.first.output }}"),
        ],
        edges: vec![WorkflowEdge {
            from: "first".to_owned(),
            to: "second".to_owned(),
            on: Default::default(),
            when: None,
        }],
        schedule: None,
        deadline_ms: None,
    };
    client
        .put_workflow(DEMO_WORKFLOW, &spec)
        .await
        .context("cannot save the demo workflow")?;
    Ok(())
}

/// The console's first user: operator `admin`, created on the first start
/// with a random password kept in `password_file` (0600). A later start
/// leaves the user as it is (its password may have been changed since).
async fn ensure_console_user(client: &Client, password_file: &Path) -> anyhow::Result<()> {
    let exists = client
        .users(Some("default"))
        .await?
        .iter()
        .any(|user| user.name == CONSOLE_USER);
    if exists {
        return Ok(());
    }
    let password = stored_token(password_file)?;
    let spec = cronbox_api::UserSpec {
        name: CONSOLE_USER.to_owned(),
        tenant: None,
        role: cronbox_api::Role::Operator,
        password,
    };
    client
        .create_user(&spec)
        .await
        .context("cannot create the console's admin user")?;
    Ok(())
}

/// The operator user `cronbox up` creates.
const CONSOLE_USER: &str = "admin";

/// What the summary `cronbox up` prints says.
struct Welcome<'a> {
    admin_url: &'a str,
    executor: &'a str,
    data_dir: &'a Path,
    token_source: &'a str,
    /// The file holding the API token (none when it was given).
    token_file: Option<&'a Path>,
    password_file: &'a Path,
    /// The context this admin was recorded as, and whether it is current.
    context: Option<(&'a str, &'a crate::context::Recorded)>,
    /// The private CA of `--tls`.
    ca_file: Option<&'a Path>,
}

fn print_welcome(welcome: &Welcome<'_>, demos: &[(JobId, &Demo)]) {
    let Welcome {
        admin_url,
        executor,
        data_dir,
        token_source,
        token_file,
        password_file,
        context,
        ca_file,
    } = welcome;
    outln!("cronbox is up");
    outln!(
        "  console     {admin_url}/  (user {CONSOLE_USER}, password in {})",
        password_file.display()
    );
    outln!("  admin API   {admin_url}");
    outln!("  executor    {executor}");
    outln!("  data        {}", data_dir.display());
    outln!("  API token   {token_source}");
    outln!(
        "  secrets key {} (secrets are sealed under it)",
        data_dir.join("secrets.key").display()
    );
    if !demos.is_empty() {
        outln!("  demo jobs");
        for (id, demo) in demos {
            outln!("    {id:>4}  {:<8} {}", demo.name, demo.about);
        }
        outln!("  demo workflow {DEMO_WORKFLOW}: hello, then hello again with its output");
    }
    outln!();
    match context {
        Some((name, recorded)) if recorded.current => outln!(
            "Try, from any folder (this admin is the current context {name:?}; `cronbox context` \
             lists them):"
        ),
        Some((name, recorded)) => outln!(
            "Try, with `--context {name}` (this admin is context {name:?}; the current one stays \
             {:?}, whose admin answers: `cronbox context use {name}` switches):",
            recorded.kept.as_deref().unwrap_or_default()
        ),
        None => outln!("Try (with the exports below):"),
    }
    outln!("  cronbox job list");
    if let Some((id, _)) = demos.first() {
        outln!("  cronbox runs --job {id}");
        outln!("  cronbox job trigger {id} --param you     (prints the run's id)");
        outln!("  cronbox logs --follow RUN");
        outln!("  cronbox workflow run {DEMO_WORKFLOW} --input '{{\"who\": \"you\"}}' --wait");
    }
    outln!("  cronbox new hello --lang rust   (then `cronbox build` and `cronbox module push`)");
    outln!("For scripts and curl:");
    outln!("  export CRONBOX_ADMIN={admin_url}");
    match token_file {
        Some(file) => outln!("  export CRONBOX_API_TOKEN=$(cat {})", file.display()),
        None => outln!("  export CRONBOX_API_TOKEN=...   (the token you gave)"),
    }
    if let Some(ca_file) = ca_file {
        outln!(
            "  export CRONBOX_CA_FILE={}   (curl --cacert $CRONBOX_CA_FILE)",
            ca_file.display()
        );
    }
    outln!("Ctrl-C stops cronbox; run it again to carry on where it left off.");
}

/// Whether the admin of `context` answers (any answer to `GET /readyz`
/// within two seconds).
async fn answers(context: &crate::context::Context) -> bool {
    let Ok(builder) = cronbox_tls::client_builder(context.ca_file.as_deref()) else {
        return false;
    };
    let Ok(client) = builder.timeout(Duration::from_secs(2)).build() else {
        return false;
    };
    let url = format!("{}/readyz", context.admin.trim_end_matches('/'));
    client.get(url).send().await.is_ok()
}
