//! What a tenant holds besides jobs: `cronbox secret`, `cronbox user`,
//! `cronbox ceiling` and `cronbox quota`.

use super::*;

/// Set, list and delete your tenant's secrets (values are write-only).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  printf %s \"$SLACK_TOKEN\" | cronbox secret set SLACK_TOKEN\n  \
                        cronbox secret set DB_PASSWORD --file ./db-password\n  cronbox secret list\n  \
                        cronbox secret delete SLACK_TOKEN [--force]\n\nA job reads a secret it references \
                        (\"secrets\": [\"SLACK_TOKEN\"] in its definition, or --secret on job \
                        create|update) with ctx.secret(\"SLACK_TOKEN\")."
)]
pub struct SecretArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: SecretCommand,
}

#[derive(Debug, Subcommand)]
enum SecretCommand {
    /// Set a secret from stdin (or --file), replacing any value it had;
    /// runs dispatched from now on read the new value.
    Set {
        name: String,
        /// Read the value from this file instead of stdin (taken as is,
        /// with no trailing newline removed).
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Names, dates and the jobs referencing each; never values.
    List,
    /// Delete a secret (refused while a job references it).
    Delete {
        name: String,
        /// Delete even while jobs reference it.
        #[arg(long)]
        force: bool,
    },
}

pub fn secret(args: SecretArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        match args.command {
            SecretCommand::Set { name, file } => {
                let value = read_input(file.as_ref(), "the secret")?;
                let secret = client.set_secret(&name, &value).await?;
                show(json, &secret, |secret| {
                    outln!("secret {} set ({} bytes)", secret.name, value.len());
                })
            }
            SecretCommand::List => {
                let secrets = client.secrets().await?;
                show(json, &secrets, |secrets| {
                    if secrets.is_empty() {
                        outln!("no secrets yet: `cronbox secret set NAME` adds one");
                    } else {
                        outln!(
                            "{:<10} {:<32} {:<23}  JOBS",
                            "TENANT",
                            "NAME",
                            "UPDATED (UTC)"
                        );
                    }
                    for secret in secrets {
                        let used: Vec<String> = secret.used_by.iter().map(i64::to_string).collect();
                        outln!(
                            "{:<10} {:<32} {:<23}  {}",
                            secret.tenant,
                            crate::out::printable(&secret.name, false),
                            time(Some(secret.updated_at_ms)),
                            if used.is_empty() {
                                "-".to_owned()
                            } else {
                                used.join(", ")
                            }
                        );
                    }
                })
            }
            SecretCommand::Delete { name, force } => {
                let deleted = client.delete_secret(&name, force).await?;
                show(json, &deleted, |deleted| {
                    outln!("secret {} deleted", deleted.name);
                    if !deleted.still_referenced_by.is_empty() {
                        let ids: Vec<String> = deleted
                            .still_referenced_by
                            .iter()
                            .map(i64::to_string)
                            .collect();
                        outln!(
                            "still referenced by job(s) {}: they read nothing under it",
                            ids.join(", ")
                        );
                    }
                })
            }
        }
    })
}

/// Add, list, remove users and set their passwords (what people log in to
/// the console with).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  printf %s \"$PASSWORD\" | cronbox user add ada --role developer\n  \
                        cronbox user add ops --tenant acme --role admin --password-file ./pw\n  \
                        cronbox user list\n  cronbox user passwd ada --password-file ./new-pw\n  \
                        cronbox user remove ada\n\nRoles: viewer (reads), developer (modules, jobs, \
                        runs, state), admin (and users, tokens, secrets), operator (every tenant; \
                        users of tenant default only)."
)]
pub struct UserArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: UserCommand,
}

#[derive(Debug, Subcommand)]
enum UserCommand {
    /// Add a user; its password is read from stdin (or --password-file).
    Add {
        /// 1 to 63 of a-z 0-9 . _ - (unique across tenants).
        name: String,
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// The user's tenant (default: the caller's own).
        #[arg(long)]
        tenant: Option<String>,
        /// Read the password from this file (its trailing newline dropped).
        #[arg(long)]
        password_file: Option<PathBuf>,
    },
    /// The users you manage.
    List {
        /// Only this tenant's (operator).
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Set a user's password from stdin (or --password-file); its sessions end.
    Passwd {
        name: String,
        #[arg(long)]
        password_file: Option<PathBuf>,
    },
    /// Remove a user, ending its sessions and revoking its tokens.
    Remove { name: String },
}

fn parse_role(text: &str) -> Result<Role, String> {
    cronbox_api::parse_ignoring_case(text)
        .map_err(|_| format!("{text:?} is not a role: viewer, developer, admin or operator"))
}

pub fn user(args: UserArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        match args.command {
            UserCommand::Add {
                name,
                role,
                tenant,
                password_file,
            } => {
                let spec = UserSpec {
                    name,
                    tenant,
                    role,
                    password: read_password(password_file.as_ref())?,
                };
                let user = client.create_user(&spec).await?;
                show(json, &user, |user| {
                    outln!(
                        "user {} added to tenant {} as {}",
                        user.name,
                        user.tenant,
                        user.role
                    );
                })
            }
            UserCommand::List { tenant } => {
                let users = client.users(tenant.as_deref()).await?;
                show(json, &users, |users| {
                    for user in users {
                        outln!(
                            "{:<10} {:<24} {:<10} since {}",
                            user.tenant,
                            user.name,
                            user.role,
                            time(Some(user.created_at_ms))
                        );
                    }
                })
            }
            UserCommand::Passwd {
                name,
                password_file,
            } => {
                let password = read_password(password_file.as_ref())?;
                let changed = client.set_password(&name, &password).await?;
                show(json, &changed, |changed| {
                    outln!(
                        "password of {} set; {} session(s) ended",
                        changed.name,
                        changed.sessions_ended
                    );
                })
            }
            UserCommand::Remove { name } => {
                let changed = client.remove_user(&name).await?;
                show(json, &changed, |changed| {
                    outln!(
                        "user {} removed; {} session(s) ended, {} token(s) revoked",
                        changed.name,
                        changed.sessions_ended,
                        changed.tokens_revoked
                    );
                })
            }
        }
    })
}

/// Show or set the origins a tenant's jobs may be granted for HTTP.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  cronbox ceiling acme\n  cronbox ceiling acme --set \
                        'https://*.example.com' https://hooks.slack.com\n  cronbox ceiling acme --clear"
)]
pub struct CeilingArgs {
    #[command(flatten)]
    connection: Connection,
    /// The tenant (`default` for the operator's own jobs).
    tenant: String,
    /// Replace the ceiling with these origins (operator token).
    #[arg(long, num_args = 1.., value_name = "ORIGIN")]
    set: Vec<String>,
    /// Allow no origin at all (operator token).
    #[arg(long, conflicts_with = "set")]
    clear: bool,
}

pub fn ceiling(args: CeilingArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        let answer = if args.set.is_empty() && !args.clear {
            client.http_ceiling(&args.tenant).await?
        } else {
            let ceiling = cronbox_api::HttpCeiling { origins: args.set };
            client.set_http_ceiling(&args.tenant, &ceiling).await?
        };
        show(json, &answer, |answer| {
            if answer.origins.is_empty() {
                outln!("tenant {}: no origin (jobs may not use HTTP)", args.tenant);
            }
            for origin in &answer.origins {
                outln!("{origin}");
            }
        })
    })
}

/// Show or set a tenant's quotas.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  cronbox quota show acme\n  cronbox quota set acme jobs=500 \
                        state_bytes=64MiB min_interval_ms=1m running_runs=default"
)]
pub struct QuotaArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: QuotaCommand,
}

#[derive(Debug, Subcommand)]
enum QuotaCommand {
    /// Every quota of a tenant: its limit, whether the tenant has its own,
    /// and its use.
    Show {
        /// The tenant (a tenant's token may read its own).
        #[arg(default_value = "default")]
        tenant: String,
    },
    /// Set some of a tenant's quotas (operator token); `NAME=default`
    /// returns one to the operator's default.
    Set {
        tenant: String,
        /// `NAME=VALUE`: a number, a size for the byte quotas (`64MiB`), a
        /// duration for the millisecond ones (`1m`), or `default`.
        #[arg(required = true, value_parser = parse_quota_change)]
        changes: Vec<(Quota, Option<u64>)>,
    },
}

/// `NAME=VALUE` for a quota: a number; a size (`64MiB`) for the byte
/// quotas; a duration (`1m`, `2h`) for the millisecond ones; `default`
/// for none of the tenant's own.
pub(crate) fn parse_quota_change(text: &str) -> Result<(Quota, Option<u64>), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not NAME=VALUE"))?;
    let quota: Quota = name.trim().parse().map_err(|error| format!("{error}"))?;
    let value = value.trim();
    if value == "default" {
        return Ok((quota, None));
    }
    if let Ok(number) = value.parse::<u64>() {
        return Ok((quota, Some(number)));
    }
    let unit = quota.as_str();
    let parsed = if unit.contains("bytes") {
        value
            .parse::<bytesize::ByteSize>()
            .map(|size| size.as_u64())
            .map_err(|_| "a number of bytes or a size such as 64MiB")
    } else if unit.contains("ms") {
        humantime::parse_duration(value)
            .map(|duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
            .map_err(|_| "a number of milliseconds or a duration such as 1m")
    } else {
        Err("a number")
    };
    parsed
        .map(|limit| (quota, Some(limit)))
        .map_err(|expected| format!("quota {quota}: {value:?} is not {expected}"))
}

pub fn quota(args: QuotaArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        let answer = match args.command {
            QuotaCommand::Show { tenant } => client.quotas(&tenant).await?,
            QuotaCommand::Set { tenant, changes } => {
                // The tenant's own quotas stay unless changed (the API
                // replaces them all).
                let mut own = QuotaSettings::default();
                for quota in client.quotas(&tenant).await?.quotas {
                    if quota.own {
                        own.set(quota.quota, Some(quota.limit));
                    }
                }
                for (quota, limit) in changes {
                    own.set(quota, limit);
                }
                client.set_quotas(&tenant, &own).await?
            }
        };
        show(json, &answer, |answer| {
            outln!("tenant {}", answer.tenant);
            let rows: Vec<Vec<String>> = answer
                .quotas
                .iter()
                .map(|quota| {
                    vec![
                        quota.quota.to_string(),
                        quota.limit.to_string(),
                        if quota.own { "tenant" } else { "default" }.to_owned(),
                        or_dash(quota.used),
                    ]
                })
                .collect();
            print_table(&["QUOTA", "LIMIT", "SET BY", "USED"], &rows);
        })
    })
}
