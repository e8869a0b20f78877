//! Configuration: flags override environment variables (`CRONBOX_*`),
//! which override a TOML file, which overrides the built-in defaults.
//!
//! Every setting is a flag with an environment variable; the file names the
//! same settings, either as the variable's name without `CRONBOX_` in lower
//! case (`api_token = "..."`) or grouped in a table whose name is the first
//! word (`[admin] bind = "..."` is `CRONBOX_ADMIN_BIND`). The file is
//! `--config PATH` (or `CRONBOX_CONFIG`), else `./cronbox.toml` if it
//! exists. Values from the file become the flags' defaults before the
//! command line is parsed, so clap's own flag > environment > default
//! order gives the precedence. `cronbox config show` prints every setting
//! with its value and where it came from.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

/// Where the configuration file is looked for when none is named.
pub const DEFAULT_FILE: &str = "cronbox.toml";

/// Settings read from a configuration file, by environment variable name.
#[derive(Debug, Default, Clone)]
pub struct FileSettings {
    pub path: Option<PathBuf>,
    pub values: BTreeMap<String, String>,
}

/// The file named by `--config`/`CRONBOX_CONFIG` in `args`, else
/// `./cronbox.toml` if it exists.
pub fn config_path(args: &[String]) -> Option<PathBuf> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--config" {
            return iter.next().map(PathBuf::from);
        }
        if let Some(path) = arg.strip_prefix("--config=") {
            return Some(PathBuf::from(path));
        }
    }
    if let Some(path) = std::env::var_os("CRONBOX_CONFIG") {
        return Some(PathBuf::from(path));
    }
    let default = PathBuf::from(DEFAULT_FILE);
    default.exists().then_some(default)
}

/// Reads a configuration file into settings keyed by environment variable
/// name, refusing keys no command knows (`known`).
pub fn read_file(path: &Path, known: &[String]) -> anyhow::Result<FileSettings> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the configuration file {}", path.display()))?;
    let table: toml::Table = text
        .parse()
        .with_context(|| format!("{} is not valid TOML", path.display()))?;
    let mut values = BTreeMap::new();
    let mut add = |key: String, value: &toml::Value| -> anyhow::Result<()> {
        let bare = key.to_ascii_uppercase().replace('-', "_");
        // Cronbox's own settings drop `CRONBOX_`; the standard ones
        // (`OTEL_*`) are their variable's name as it is.
        let name = match format!("CRONBOX_{bare}") {
            name if known.contains(&name) => name,
            _ if known.contains(&bare) => bare,
            name => name,
        };
        if !known.contains(&name) {
            bail!(
                "unknown setting {key:?} in {} (it would be {name}; `cronbox config show` lists \
                 every setting)",
                path.display()
            );
        }
        let value = match value {
            toml::Value::String(text) => text.clone(),
            toml::Value::Integer(number) => number.to_string(),
            toml::Value::Float(number) => number.to_string(),
            toml::Value::Boolean(flag) => flag.to_string(),
            toml::Value::Array(items) => items
                .iter()
                .map(|item| match item {
                    toml::Value::String(text) => text.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(","),
            other => bail!(
                "setting {key:?} in {}: unsupported value {other}",
                path.display()
            ),
        };
        values.insert(name, value);
        Ok(())
    };
    for (key, value) in &table {
        match value {
            toml::Value::Table(section) => {
                for (inner, value) in section {
                    add(format!("{key}_{inner}"), value)?;
                }
            }
            value => add(key.clone(), value)?,
        }
    }
    Ok(FileSettings {
        path: Some(path.to_path_buf()),
        values,
    })
}

/// Every environment variable the command tree reads.
pub fn known_settings(command: &clap::Command) -> Vec<String> {
    let mut names = Vec::new();
    collect(command, &mut |_, arg| {
        if let Some(env) = arg.get_env() {
            names.push(env.to_string_lossy().into_owned());
        }
    });
    names.sort();
    names.dedup();
    names
}

fn collect(command: &clap::Command, visit: &mut impl FnMut(&clap::Command, &clap::Arg)) {
    for arg in command.get_arguments() {
        visit(command, arg);
    }
    for sub in command.get_subcommands() {
        collect(sub, visit);
    }
}

/// Makes the file's values the defaults of the flags they belong to.
pub fn apply(command: clap::Command, settings: &FileSettings) -> clap::Command {
    if settings.values.is_empty() {
        return command;
    }
    apply_to(command, settings)
}

fn apply_to(mut command: clap::Command, settings: &FileSettings) -> clap::Command {
    let ids: Vec<(String, String)> = command
        .get_arguments()
        .filter_map(|arg| {
            let env = arg.get_env()?.to_string_lossy().into_owned();
            Some((arg.get_id().to_string(), env))
        })
        .collect();
    for (id, env) in ids {
        if let Some(value) = settings.values.get(&env) {
            let value: &'static str = Box::leak(value.clone().into_boxed_str());
            command = command.mut_arg(id, |arg| arg.default_value(value).required(false));
        }
    }
    let names: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_owned())
        .collect();
    for name in names {
        command = command.mut_subcommand(name, |sub| apply_to(sub, settings));
    }
    command
}

/// One setting as `config show` prints it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Shown {
    pub setting: String,
    pub commands: Vec<String>,
    pub value: Option<String>,
    pub source: String,
    pub help: String,
}

/// Every setting: its effective value and where it came from.
pub fn show(command: &clap::Command, settings: &FileSettings) -> Vec<Shown> {
    let mut shown: BTreeMap<String, Shown> = BTreeMap::new();
    collect(command, &mut |owner, arg| {
        let Some(env) = arg.get_env() else {
            return;
        };
        let env = env.to_string_lossy().into_owned();
        let entry = shown.entry(env.clone()).or_insert_with(|| {
            let secret = arg.is_hide_env_values_set();
            let (value, source) = if let Ok(value) = std::env::var(&env) {
                (Some(value), "environment".to_owned())
            } else if let Some(value) = settings.values.get(&env) {
                let file = settings
                    .path
                    .as_ref()
                    .map_or_else(String::new, |path| path.display().to_string());
                (Some(value.clone()), format!("file {file}"))
            } else {
                let default: Vec<String> = arg
                    .get_default_values()
                    .iter()
                    .map(|value| value.to_string_lossy().into_owned())
                    .collect();
                if default.is_empty() {
                    (None, "unset".to_owned())
                } else {
                    (Some(default.join(",")), "default".to_owned())
                }
            };
            Shown {
                setting: env.clone(),
                commands: Vec::new(),
                value: if secret {
                    value.map(|_| "(hidden)".to_owned())
                } else {
                    value
                },
                source,
                help: arg
                    .get_help()
                    .map(|help| help.to_string())
                    .unwrap_or_default(),
            }
        });
        entry.commands.push(owner.get_name().to_owned());
    });
    shown.into_values().collect()
}
