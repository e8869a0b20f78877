//! Legacy groups and jobs: xxl-job executors (Java `@XxlJob` handlers,
//! pyxxl, the Go executor) driven by cronbox over xxl-job's own protocol,
//! so that an installation moves to cronbox without rewriting its handlers
//! first. A legacy group is opt-in (the operator makes one and grants it
//! to tenants); a job in it names an `executor_handler` instead of a
//! module and gets every scheduling feature, while what only a
//! WebAssembly run has (fuel, memory limits, configuration, secrets, HTTP
//! grants) is refused when it is saved, naming the field.
//!
//! A group's token is kept sealed under the secrets key when the admin
//! has one ([`stored_token`]). `wire.rs` is the protocol; `scheduler/legacy.rs` sends runs, probes,
//! kills and log reads; `api/xxl_job.rs` answers the executors'
//! registrations and results.

pub mod wire;

use cronbox_api::JobSpec;
use cronbox_protocol::BlockStrategy;

use crate::jobs::{InvalidJob, invalid};
use crate::secrets::SecretBox;

/// Longest handler name (xxl-job's column is 255 characters).
pub const MAX_HANDLER_CHARS: usize = 255;

/// The prefix of a legacy group's token sealed under the secrets key.
const SEALED: &str = "sealed:";

/// What a legacy group's token is sealed as (the secrets' tenant).
const SEALED_AS: &str = "xxl-job-group";

/// A legacy group's token as the database keeps it: sealed under the
/// admin's secrets key when it has one (`sealed:NONCE:CIPHERTEXT`, bound
/// to the group's name), else as given.
pub fn stored_token(secrets: Option<&SecretBox>, group: &str, token: &str) -> String {
    match secrets {
        Some(secrets) => {
            let sealed = secrets.seal(SEALED_AS, group, token);
            format!("{SEALED}{}:{}", sealed.nonce, sealed.ciphertext)
        }
        None => token.to_owned(),
    }
}

/// A legacy group's token from what the database keeps ([`stored_token`]).
pub fn opened_token(
    secrets: Option<&SecretBox>,
    group: &str,
    stored: &str,
) -> Result<String, String> {
    let Some(sealed) = stored.strip_prefix(SEALED) else {
        return Ok(stored.to_owned());
    };
    let secrets = secrets.ok_or_else(|| {
        format!("group {group:?}'s token is sealed and this admin has no secrets key")
    })?;
    let (nonce, ciphertext) = sealed.split_once(':').unwrap_or_default();
    let sealed = crate::secrets::Sealed {
        nonce: nonce.to_owned(),
        ciphertext: ciphertext.to_owned(),
    };
    secrets
        .open(SEALED_AS, group, &sealed)
        .map_err(|error| format!("group {group:?}'s token: {error}"))
}

/// Whether `presented` is the group's token (in constant time).
pub fn tokens_match(token: &str, presented: &str) -> bool {
    use subtle::ConstantTimeEq;
    !token.is_empty() && bool::from(token.as_bytes().ct_eq(presented.as_bytes()))
}

/// Longest handler message kept with a run (xxl-job keeps 15,000
/// characters of `handle_msg`).
pub const MAX_MESSAGE_CHARS: usize = 15_000;

/// A handler's message as a run keeps it: at most
/// [`MAX_MESSAGE_CHARS`] characters.
pub fn bounded_message(message: &str) -> String {
    match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}…", &message[..cut]),
        None => message.to_owned(),
    }
}

/// Refuses xxl-job's GLUE types: cronbox runs no source stored with a
/// job. `BEAN` is accepted for a legacy job (an `executor_handler`).
pub fn check_glue_type(spec: &JobSpec) -> Result<(), InvalidJob> {
    match spec.glue_type.as_deref() {
        None => Ok(()),
        Some(bean) if bean.eq_ignore_ascii_case("BEAN") && spec.executor_handler.is_some() => {
            Ok(())
        }
        Some(bean) if bean.eq_ignore_ascii_case("BEAN") => Err(invalid(
            "glue_type",
            "a BEAN job names its executor_handler (a legacy job of xxl-job executors)",
        )),
        Some(glue) => Err(invalid(
            "glue_type",
            format!(
                "{glue}: cronbox runs no source stored with a job; write the handler as a \
                 module (docs/authoring.md) and name it in `module`"
            ),
        )),
    }
}

/// Checks a legacy job's handler and refuses every field a run on an
/// xxl-job executor cannot honour (never silently ignored).
pub fn check_handler(handler: &str, spec: &JobSpec) -> Result<(), InvalidJob> {
    if handler.trim().is_empty() || handler.chars().count() > MAX_HANDLER_CHARS {
        return Err(invalid(
            "executor_handler",
            format!("must be 1 to {MAX_HANDLER_CHARS} characters"),
        ));
    }
    if handler.chars().any(char::is_control) {
        return Err(invalid(
            "executor_handler",
            "must not contain control characters",
        ));
    }
    let cannot = |field: &'static str, what: &str| {
        Err(invalid(
            field,
            format!(
                "a legacy job (executor_handler) runs on xxl-job executors, which {what}: \
                 leave {field} out, or move the job to a module"
            ),
        ))
    };
    if spec.module.is_some() || !spec.module_digest.is_empty() {
        return Err(invalid(
            "executor_handler",
            "give either a module or an executor_handler (a legacy job), not both",
        ));
    }
    let defaults = JobSpec::legacy("", "", "");
    if spec.fuel.is_some() {
        return cannot("fuel", "do not meter fuel");
    }
    if spec.memory_bytes != defaults.memory_bytes {
        return cannot("memory_bytes", "have no memory limit per run");
    }
    if spec.fresh_instance {
        return cannot("fresh_instance", "keep no instances");
    }
    if !spec.config.is_empty() {
        return cannot("config", "cannot read a job's configuration");
    }
    if !spec.secrets.is_empty() {
        return cannot("secrets", "are never sent secrets");
    }
    if !spec.http_allow.is_empty() {
        return cannot("http_allow", "make HTTP calls outside cronbox's grants");
    }
    if spec.http_limits != defaults.http_limits {
        return cannot("http_limits", "make HTTP calls outside cronbox's limits");
    }
    if spec
        .block_strategy
        .eq_ignore_ascii_case(BlockStrategy::Concurrent.as_str())
    {
        return cannot(
            "block_strategy",
            "know SERIAL_EXECUTION, DISCARD_LATER and COVER_EARLY only",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_groups_token_is_sealed_to_its_group_under_the_key() {
        let secrets = SecretBox::new(&[3; 32]);
        let stored = stored_token(Some(&secrets), "app", "the-token-1");
        assert!(stored.starts_with(SEALED) && !stored.contains("the-token-1"));
        assert_eq!(
            opened_token(Some(&secrets), "app", &stored).unwrap(),
            "the-token-1"
        );
        assert!(opened_token(Some(&secrets), "other-app", &stored).is_err());
        assert!(
            opened_token(None, "app", &stored)
                .unwrap_err()
                .contains("no secrets key")
        );
        assert_eq!(stored_token(None, "app", "plain-token"), "plain-token");
        assert_eq!(
            opened_token(None, "app", "plain-token").unwrap(),
            "plain-token"
        );
    }

    #[test]
    fn what_a_legacy_run_cannot_honour_is_refused_naming_the_field() {
        let spec = JobSpec::legacy("nightly", "legacy", "demoJobHandler");
        assert!(check_handler("demoJobHandler", &spec).is_ok());
        let refused = |spec: JobSpec| check_handler("demoJobHandler", &spec).unwrap_err().field;
        assert_eq!(
            refused(JobSpec {
                fuel: Some(1),
                ..spec.clone()
            }),
            "fuel"
        );
        assert_eq!(
            refused(JobSpec {
                memory_bytes: 1 << 20,
                ..spec.clone()
            }),
            "memory_bytes"
        );
        assert_eq!(
            refused(JobSpec {
                secrets: vec!["db".into()],
                ..spec.clone()
            }),
            "secrets"
        );
        assert_eq!(
            refused(JobSpec {
                http_allow: vec!["https://example.com".into()],
                ..spec.clone()
            }),
            "http_allow"
        );
        assert_eq!(
            refused(JobSpec {
                module: Some("hello".into()),
                ..spec.clone()
            }),
            "executor_handler"
        );
        assert_eq!(
            check_handler(" ", &spec).unwrap_err().field,
            "executor_handler"
        );
        let glue = |glue: &str, spec: &JobSpec| {
            check_glue_type(&JobSpec {
                glue_type: Some(glue.into()),
                ..spec.clone()
            })
        };
        assert!(glue("BEAN", &spec).is_ok());
        let shell = glue("GLUE_SHELL", &spec).unwrap_err();
        assert!(shell.field == "glue_type" && shell.message.contains("module"));
        assert!(glue("BEAN", &JobSpec::new("x", "hello")).is_err());
    }
}
