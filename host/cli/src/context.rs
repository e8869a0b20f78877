//! Contexts: where the management commands find an admin and its token
//! from any folder, as `kubectl config` contexts do. `cronbox up` records
//! itself as the context `up` (its admin URL and the file holding its API
//! token) and makes it current; `cronbox context` lists, switches, adds and
//! removes them.
//!
//! The file is `$CRONBOX_CONTEXTS`, else `$XDG_CONFIG_HOME/cronbox/contexts.toml`,
//! else `~/.config/cronbox/contexts.toml`. It holds no token, only where
//! one is kept. How a command picks its admin: `--admin`/`CRONBOX_ADMIN`,
//! else `--context`/`CRONBOX_CONTEXT`'s, else the current context's, else
//! `http://127.0.0.1:8080`. A context's token is used only for that
//! context's own admin, never sent to another.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};

/// The admin used when nothing names one.
pub const DEFAULT_ADMIN: &str = "http://127.0.0.1:8080";

/// The name `cronbox up` records itself under unless told another.
pub const UP_CONTEXT: &str = "up";

/// The contexts file as stored.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contexts {
    /// The context commands use when none is named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    #[serde(default)]
    pub contexts: BTreeMap<String, Context>,
}

/// One admin, and where its API token is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Context {
    pub admin: String,
    /// A file holding the token (absolute); none: the token comes from
    /// `--token` or `CRONBOX_API_TOKEN`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    /// A PEM file of the CA its admin's certificate chains to, when that
    /// is a private one (absolute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
}

impl Context {
    /// The token kept in [`Context::token_file`], if there is one.
    pub fn token(&self) -> anyhow::Result<Option<String>> {
        let Some(file) = &self.token_file else {
            return Ok(None);
        };
        let token = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read the context's token file {}", file.display()))?;
        Ok(Some(token.trim().to_owned()))
    }
}

/// Where the contexts are kept (see the module's doc); `None` without a
/// home directory.
pub fn file() -> Option<PathBuf> {
    if let Some(file) = std::env::var_os("CRONBOX_CONTEXTS").filter(|file| !file.is_empty()) {
        return Some(PathBuf::from(file));
    }
    crate::dirs::config().map(|dir| dir.join("contexts.toml"))
}

impl Contexts {
    /// The contexts in `path` (none if it does not exist).
    pub fn read(path: &Path) -> anyhow::Result<Contexts> {
        match std::fs::read_to_string(path) {
            Ok(text) => toml::from_str(&text)
                .with_context(|| format!("cannot read the contexts in {}", path.display())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Contexts::default()),
            Err(error) => Err(error)
                .with_context(|| format!("cannot read the contexts in {}", path.display())),
        }
    }

    /// The contexts in the user's file (none without one).
    pub fn load() -> anyhow::Result<Contexts> {
        match file() {
            Some(path) => Contexts::read(&path),
            None => Ok(Contexts::default()),
        }
    }

    /// Writes the contexts to `path` (created 0600 with its folder), by a
    /// rename, so a reader never sees half a file.
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        let folder = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(folder)
            .with_context(|| format!("cannot create {}", folder.display()))?;
        let text = toml::to_string(self).context("cannot write the contexts")?;
        let temporary = folder.join(format!(".contexts.{}.tmp", std::process::id()));
        std::fs::write(&temporary, text)
            .with_context(|| format!("cannot write {}", temporary.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o600))?;
        }
        std::fs::rename(&temporary, path)
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// The context named `name`, or a clear error listing the known ones.
    pub fn named(&self, name: &str) -> anyhow::Result<&Context> {
        self.contexts.get(name).ok_or_else(|| {
            let known: Vec<&str> = self.contexts.keys().map(String::as_str).collect();
            anyhow::anyhow!(
                "no context {name:?} (known: {}); `cronbox context` lists them",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )
        })
    }
}

/// What recording a context did: whether it became current, and the
/// context that stays current when it did not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub current: bool,
    pub kept: Option<String>,
}

/// Records `context` as `name` (what `cronbox up` does when it is ready):
/// it becomes current when no other context is, or when the current one's
/// admin does not answer (`current_unreachable`); another `cronbox up` on
/// the machine never takes over a context in use.
pub fn record(name: &str, context: Context, current_unreachable: bool) -> anyhow::Result<Recorded> {
    let path = file().context("no home directory to keep contexts in (set CRONBOX_CONTEXTS)")?;
    record_in(&path, name, context, current_unreachable)
}

/// [`record`] in the contexts file `path`.
fn record_in(
    path: &Path,
    name: &str,
    context: Context,
    current_unreachable: bool,
) -> anyhow::Result<Recorded> {
    let mut contexts = Contexts::read(path)?;
    let other = contexts
        .current
        .clone()
        .filter(|current| current != name && contexts.contexts.contains_key(current));
    contexts.contexts.insert(name.to_owned(), context);
    let recorded = match other {
        Some(kept) if !current_unreachable => Recorded {
            current: false,
            kept: Some(kept),
        },
        _ => {
            contexts.current = Some(name.to_owned());
            Recorded {
                current: true,
                kept: None,
            }
        }
    };
    contexts.write(path)?;
    Ok(recorded)
}

/// The current context when it is another than `name`: its name and where
/// it is (whether `cronbox up` recording `name` may take over asks it).
pub fn current_other_than(name: &str) -> Option<(String, Context)> {
    let contexts = Contexts::load().ok()?;
    let current = contexts.current.filter(|current| current != name)?;
    let context = contexts.contexts.get(&current)?.clone();
    Some((current, context))
}

/// Where a management command sends its requests, and with which token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub admin: String,
    pub token: Option<String>,
    /// The private CA to trust for it (the context's, for its own admin).
    pub ca_file: Option<PathBuf>,
}

/// Picks the admin and token (see the module's doc): `admin` and `token`
/// as given by flag or variable, `context` the context named.
pub fn resolve(
    admin: Option<&str>,
    token: Option<&str>,
    context: Option<&str>,
    contexts: &Contexts,
) -> anyhow::Result<Target> {
    let name = context.or(contexts.current.as_deref());
    let chosen = match name {
        Some(name) => match (contexts.named(name), context) {
            (Ok(chosen), _) => Some(chosen),
            // A current context that was removed by hand is not an error.
            (Err(_), None) => None,
            (Err(error), Some(_)) => return Err(error),
        },
        None => None,
    };
    // An error of a context names it, and how to take another.
    let which = || {
        format!(
            "context {:?} ({}): `cronbox context use NAME` switches, `--context NAME` picks one \
             for a command, `cronbox context` lists them",
            name.unwrap_or_default(),
            if context.is_some() {
                "given"
            } else {
                "the current one"
            }
        )
    };
    let admin = admin
        .map(str::to_owned)
        .or_else(|| chosen.map(|chosen| chosen.admin.clone()))
        .unwrap_or_else(|| DEFAULT_ADMIN.to_owned());
    let token = match token {
        Some(token) => Some(token.to_owned()),
        None => match chosen {
            // Its token goes to its own admin only.
            Some(chosen) if same_admin(&chosen.admin, &admin) => {
                chosen.token().with_context(which)?
            }
            _ => None,
        },
    };
    let ca_file = chosen
        .filter(|chosen| same_admin(&chosen.admin, &admin))
        .and_then(|chosen| chosen.ca_file.clone());
    Ok(Target {
        admin,
        token,
        ca_file,
    })
}

/// Whether two admin URLs name the same admin (a trailing `/` aside).
fn same_admin(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

/// List, switch, add and remove the admins commands talk to.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox context
  cronbox context use up
  cronbox context add staging --admin https://cronbox.example.com --token-file ~/.cronbox-staging
  cronbox context remove staging")]
pub struct ContextArgs {
    #[command(subcommand)]
    command: Option<ContextCommand>,
}

#[derive(Debug, Subcommand)]
enum ContextCommand {
    /// Every context, the current one marked `*` (the default command).
    List,
    /// Make a context the current one.
    Use { name: String },
    /// Add or replace a context.
    Add {
        name: String,
        /// Base URL of its admin API.
        #[arg(long)]
        admin: String,
        /// A file holding its API token (none: pass --token or set
        /// CRONBOX_API_TOKEN with each command).
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// The CA its admin's certificate chains to, if a private one.
        #[arg(long)]
        ca_file: Option<PathBuf>,
    },
    /// Remove a context.
    Remove { name: String },
}

pub fn main(args: ContextArgs) -> anyhow::Result<()> {
    let path = file().context("no home directory to keep contexts in (set CRONBOX_CONTEXTS)")?;
    let mut contexts = Contexts::read(&path)?;
    match args.command.unwrap_or(ContextCommand::List) {
        ContextCommand::List => {
            if contexts.contexts.is_empty() {
                outln!(
                    "no contexts yet: `cronbox up` records one, `cronbox context add` adds one \
                     ({})",
                    path.display()
                );
            }
            for (name, context) in &contexts.contexts {
                let mark = if contexts.current.as_deref() == Some(name) {
                    "*"
                } else {
                    " "
                };
                let token = context.token_file.as_ref().map_or(
                    "token from --token or CRONBOX_API_TOKEN".to_owned(),
                    |file| format!("token in {}", file.display()),
                );
                outln!("{mark} {name:<12} {}  ({token})", context.admin);
            }
        }
        ContextCommand::Use { name } => {
            contexts.named(&name)?;
            contexts.current = Some(name.clone());
            contexts.write(&path)?;
            outln!("now using context {name:?}");
        }
        ContextCommand::Add {
            name,
            admin,
            token_file,
            ca_file,
        } => {
            let absolute = |file: Option<PathBuf>| -> anyhow::Result<Option<PathBuf>> {
                file.map(|file| {
                    std::path::absolute(&file)
                        .with_context(|| format!("cannot resolve {}", file.display()))
                })
                .transpose()
            };
            let token_file = absolute(token_file)?;
            let ca_file = absolute(ca_file)?;
            if !admin.starts_with("http://") && !admin.starts_with("https://") {
                bail!("--admin must be an http:// or https:// URL, got {admin:?}");
            }
            contexts.contexts.insert(
                name.clone(),
                Context {
                    admin,
                    token_file,
                    ca_file,
                },
            );
            contexts.current.get_or_insert_with(|| name.clone());
            contexts.write(&path)?;
            outln!("context {name:?} saved in {}", path.display());
        }
        ContextCommand::Remove { name } => {
            if contexts.contexts.remove(&name).is_none() {
                contexts.named(&name)?;
            }
            if contexts.current.as_deref() == Some(name.as_str()) {
                contexts.current = None;
            }
            contexts.write(&path)?;
            outln!("context {name:?} removed");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contexts_with_up(token_file: &Path) -> Contexts {
        let mut contexts = Contexts::default();
        contexts.contexts.insert(
            UP_CONTEXT.to_owned(),
            Context {
                admin: "http://127.0.0.1:18080".to_owned(),
                token_file: Some(token_file.to_owned()),
                ca_file: Some(token_file.with_file_name("ca.pem")),
            },
        );
        contexts.current = Some(UP_CONTEXT.to_owned());
        contexts
    }

    #[test]
    fn flags_win_then_the_named_context_then_the_current_one() {
        let folder = tempfile::tempdir().unwrap();
        let token_file = folder.path().join("api-token");
        std::fs::write(&token_file, "up-token\n").unwrap();
        let contexts = contexts_with_up(&token_file);
        let target = resolve(None, None, None, &contexts).unwrap();
        assert_eq!(
            target,
            Target {
                admin: "http://127.0.0.1:18080".to_owned(),
                token: Some("up-token".to_owned()),
                ca_file: Some(folder.path().join("ca.pem")),
            }
        );
        let given = resolve(None, Some("mine"), None, &contexts).unwrap();
        assert_eq!(given.token.as_deref(), Some("mine"));
        let error = resolve(None, None, Some("staging"), &contexts).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("no context \"staging\" (known: up)")
        );
        let none = resolve(None, None, None, &Contexts::default()).unwrap();
        assert_eq!((none.admin.as_str(), none.token), (DEFAULT_ADMIN, None));
    }

    #[test]
    fn a_contexts_token_and_ca_never_go_to_another_admin() {
        let folder = tempfile::tempdir().unwrap();
        let token_file = folder.path().join("api-token");
        std::fs::write(&token_file, "up-token").unwrap();
        let contexts = contexts_with_up(&token_file);
        let elsewhere = resolve(Some("http://127.0.0.2:8080"), None, None, &contexts).unwrap();
        assert_eq!((elsewhere.token, elsewhere.ca_file), (None, None));
        let same = resolve(Some("http://127.0.0.1:18080/"), None, None, &contexts).unwrap();
        assert_eq!(same.token.as_deref(), Some("up-token"));
        assert_eq!(same.ca_file, Some(folder.path().join("ca.pem")));
    }

    #[test]
    fn up_takes_the_current_context_only_from_one_that_does_not_answer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("contexts.toml");
        let at = |admin: &str| Context {
            admin: admin.to_owned(),
            token_file: None,
            ca_file: None,
        };
        let first = record_in(&path, "up", at("http://127.0.0.1:8080"), false).unwrap();
        assert!(first.current, "nothing was current");
        let second = record_in(&path, "up-2", at("http://127.0.0.1:8081"), false).unwrap();
        assert_eq!(second.kept.as_deref(), Some("up"), "{second:?}");
        let read = Contexts::read(&path).unwrap();
        assert_eq!(read.current.as_deref(), Some("up"));
        assert!(read.contexts.contains_key("up-2"), "recorded all the same");
        let again = record_in(&path, "up", at("http://127.0.0.1:8080"), false).unwrap();
        assert!(again.current, "the current context recorded again");
        let taken = record_in(&path, "up-2", at("http://127.0.0.1:8081"), true).unwrap();
        assert!(taken.current, "the current one does not answer");
        let read = Contexts::read(&path).unwrap();
        assert_eq!(read.current.as_deref(), Some("up-2"));
    }

    #[test]
    fn a_contexts_unreadable_token_names_the_context_and_how_to_switch() {
        let mut contexts = Contexts::default();
        contexts.contexts.insert(
            "prod".to_owned(),
            Context {
                admin: "http://127.0.0.1:9".to_owned(),
                token_file: Some(PathBuf::from("/nonexistent/token")),
                ca_file: None,
            },
        );
        contexts.current = Some("prod".to_owned());
        let error = format!("{:#}", resolve(None, None, None, &contexts).unwrap_err());
        assert!(
            error.contains("context \"prod\"") && error.contains("cronbox context use"),
            "{error}"
        );
    }

    #[test]
    fn contexts_are_written_privately_and_read_back() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("cronbox").join("contexts.toml");
        let contexts = contexts_with_up(&folder.path().join("api-token"));
        contexts.write(&path).unwrap();
        let read = Contexts::read(&path).unwrap();
        assert_eq!(read.current.as_deref(), Some(UP_CONTEXT));
        assert_eq!(read.contexts, contexts.contexts);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&path, "current = 3").unwrap();
        let error = format!("{:#}", Contexts::read(&path).unwrap_err());
        assert!(error.contains("contexts.toml"), "{error}");
    }
}
