//! xxl-job's admin API, for the xxl-job executors of legacy groups: an
//! executor configured with `xxl.job.admin.addresses=http://ADMIN/xxl-job-admin`
//! (or `http://ADMIN` since xxl-job 3.4.1) and its group's access token
//! registers, beats, deregisters and reports results here unchanged. Both
//! release lines: a bare list of results with `logDateTim` (up to 3.4) or
//! `callbackList` (3.5, with the `XXL-JOB-APPNAME` header). Answers are
//! xxl-job's envelope (`{code, msg}`, HTTP 200 even for a refusal, as
//! xxl-job answers). Not part of cronbox's own API (nor its document):
//! the token is the legacy group's, never the executor token of cronbox
//! executors.

use axum::http::HeaderMap;
use axum::routing::post;

use super::*;
use crate::legacy::wire::{APPNAME_HEADER, Callback, Envelope, TOKEN_HEADER};
use crate::legacy::{tokens_match, wire};

/// Longest executor address accepted (xxl-job's column is 255).
const MAX_ADDRESS_CHARS: usize = 255;

/// The routes, under both base paths xxl-job executors use.
pub(super) fn routes() -> Router<Arc<AdminState>> {
    let mut router = Router::new();
    for base in ["/xxl-job-admin/api", "/api"] {
        router = router
            .route(&format!("{base}/registry"), post(registry))
            .route(&format!("{base}/registryRemove"), post(registry_remove))
            .route(
                &format!("{base}/callback"),
                post(callback).layer(DefaultBodyLimit::max(CALLBACK_BODY_BYTES)),
            );
    }
    router
}

pub(super) fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// xxl-job's refusal of a caller whose token is not its group's.
pub(super) fn invalid_token() -> Envelope {
    Envelope::refused("invalid request, accessToken or appname invalid.")
}

/// Whether `token` is legacy group `group`'s (`what` names the call in the
/// warning a wrong one logs): xxl-job's refusal when there is no such
/// legacy group or the token is another's.
pub(super) async fn check_group_token(
    state: &AdminState,
    group: &str,
    token: &str,
    what: &str,
) -> Result<(), Envelope> {
    let legacy = state
        .intake
        .legacy_group(group)
        .await
        .map_err(|error| Envelope::refused(error.to_string()))?
        .ok_or_else(invalid_token)?;
    if !tokens_match(&legacy.token, token) {
        tracing::warn!(%group, "{what} was refused: wrong token");
        return Err(invalid_token());
    }
    Ok(())
}

/// The registration in `body`, checked against its group's token: the
/// group (legacy) and the address, or xxl-job's refusal.
async fn checked_registration(
    state: &AdminState,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(String, String), Json<Envelope>> {
    let refused = |message: String| Json(Envelope::refused(message));
    let registration: wire::Registration = serde_json::from_slice(body)
        .map_err(|error| refused(format!("malformed registration: {error}")))?;
    let (group, address) = (registration.registry_key, registration.registry_value);
    if group.is_empty() || address.is_empty() {
        return Err(refused("Illegal Argument.".to_owned()));
    }
    let token = header(headers, TOKEN_HEADER).unwrap_or_default();
    check_group_token(state, &group, token, "an xxl-job executor's registration")
        .await
        .map_err(Json)?;
    if header(headers, APPNAME_HEADER).is_some_and(|appname| appname != group) {
        tracing::warn!(%group, "an xxl-job executor's registration was refused: another appname");
        return Err(Json(invalid_token()));
    }
    let is_http = address.starts_with("http://") || address.starts_with("https://");
    if !is_http || address.chars().count() > MAX_ADDRESS_CHARS || address.contains(',') {
        return Err(refused(format!(
            "registryValue must be the executor's http(s) URL (at most {MAX_ADDRESS_CHARS} characters)"
        )));
    }
    crate::service::groups::check_executor_address(&address)
        .map_err(|why| refused(format!("registryValue: {why}")))?;
    Ok((group, address))
}

/// An answer of this API: xxl-job's envelope, for a refusal too.
type Answer = Result<Json<Envelope>, Json<Envelope>>;

async fn registry(State(state): State<Arc<AdminState>>, headers: HeaderMap, body: Bytes) -> Answer {
    let (group, address) = checked_registration(&state, &headers, &body).await?;
    let beat = service::executors::legacy_beat(&state.services, &group, &address).await;
    Ok(Json(Envelope::of(beat)))
}

async fn registry_remove(
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let (group, address) = checked_registration(&state, &headers, &body).await?;
    let removed = service::executors::legacy_remove(state.services.store(), &group, &address).await;
    Ok(Json(Envelope::of(removed)))
}

/// Results: each ends its run once, if the run is one of a legacy group
/// whose token the caller presented (others are ignored and counted).
/// Answers 200 once the body is read, as xxl-job does.
async fn callback(State(state): State<Arc<AdminState>>, headers: HeaderMap, body: Bytes) -> Answer {
    let callback: Callback = serde_json::from_slice(&body)
        .map_err(|error| Json(Envelope::refused(format!("malformed callback: {error}"))))?;
    let token = header(&headers, TOKEN_HEADER).unwrap_or_default();
    let appname = header(&headers, APPNAME_HEADER);
    let accepted = state
        .intake
        .accept_legacy_results(appname, token, callback.items())
        .await;
    Ok(Json(Envelope::of(accepted)))
}
