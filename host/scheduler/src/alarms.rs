//! Alarms: when a run fails, its job's webhook is called once with a JSON
//! description of the failure, and the outcome is recorded on the run.
//!
//! A failed run is written with alarm status `due`. Every admin's monitor
//! looks for due alarms each second and claims each with a conditional
//! update (`due` → `sending`), so of several admins on one database exactly
//! one sends it. The webhook gets up to three attempts (5 s timeout each,
//! backoff 0.5 s then 1 s); a 2xx answer is `sent`, anything else `failed`,
//! with the last error in `alarm_message`. A claim older than five minutes
//! (its admin died mid-send) goes back to `due`: an alarm is sent at least
//! once, and exactly once unless an admin dies while sending it.
//!
//! The webhook's URL is the tenant's, so the admin calls it only where the
//! operator allows: its host is resolved once, the address checked against
//! the admin's [`NetPolicy`] (no loopback, private, link-local or metadata
//! address unless the operator allowed that network), and the connection
//! made to that very address, with no proxy and no redirect followed. A
//! refusal fails the alarm with a generic message; the detail goes to the
//! operator's log.
//!
//! The body (POST, `content-type: application/json`):
//!
//! ```json
//! { "event": "run_failed", "tenant": "default",
//!   "job": { "id": 7, "name": "nightly-report" },
//!   "run": { "id": 912, "kind": "schedule", "attempt": 0,
//!            "scheduled_at_ms": 1795326255000, "finished_at_ms": 1795326255113,
//!            "outcome": "timeout", "code": 502, "message": "...",
//!            "executor": "http://10.0.0.7:9090", "module_digest": "..." } }
//! ```

use std::sync::Arc;
use std::time::Duration;

use cronbox_net_policy::NetPolicy;

use crate::clock::Clock;
use crate::metrics::Metrics;
use crate::store::{AlarmState, RunRow, Store, StoreError};
use crate::tasks::Tasks;

/// How often due alarms are looked for.
const POLL: Duration = Duration::from_secs(1);
/// Attempts per alarm, the timeout of each, the first backoff (doubled).
const ATTEMPTS: u32 = 3;
const TIMEOUT: Duration = Duration::from_secs(5);
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// A claim older than this is taken back.
const STALE_CLAIM: Duration = Duration::from_secs(300);

/// Sends due alarms until `stop`, to the addresses `nets` allows.
pub(crate) async fn run(
    store: Store,
    metrics: Arc<Metrics>,
    clock: Arc<dyn Clock>,
    nets: NetPolicy,
    tasks: Tasks,
) {
    let stop = tasks.stopping();
    let nets = Arc::new(nets);
    loop {
        if let Err(error) = pass(&store, &nets, &metrics, clock.as_ref(), &tasks).await {
            tracing::warn!(%error, "alarm pass failed; trying again");
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}

async fn pass(
    store: &Store,
    nets: &Arc<NetPolicy>,
    metrics: &Arc<Metrics>,
    clock: &dyn Clock,
    tasks: &Tasks,
) -> Result<(), StoreError> {
    let now = clock.now_ms();
    let stale_before = now - STALE_CLAIM.as_millis() as i64;
    for (run, url, job_name) in store.due_alarms(stale_before, 100).await? {
        if url.is_empty() {
            store
                .finish_alarm(run.id, AlarmState::Due, AlarmState::NotConfigured, "")
                .await?;
            continue;
        }
        if !store.claim_alarm(run.id, clock.now_ms()).await? {
            continue; // another admin has it
        }
        let store = store.clone();
        let nets = nets.clone();
        let metrics = metrics.clone();
        tasks.spawn(async move {
            let (status, message) = match send(&nets, &url, &body(&run, &job_name)).await {
                Ok(()) => {
                    metrics.alarms_sent.inc();
                    (AlarmState::Sent, String::new())
                }
                Err(error) => {
                    metrics.alarm_failures.inc();
                    tracing::warn!(run = %run.id, %url, %error, "alarm not delivered");
                    (AlarmState::Failed, error)
                }
            };
            if let Err(error) = store
                .finish_alarm(run.id, AlarmState::Sending, status, &message)
                .await
            {
                tracing::warn!(run = %run.id, %error, "cannot record an alarm's outcome");
            }
        });
    }
    Ok(())
}

fn body(run: &RunRow, job_name: &str) -> serde_json::Value {
    serde_json::json!({
        "event": "run_failed",
        "tenant": run.tenant,
        "job": { "id": run.job_id, "name": job_name },
        "run": {
            "id": run.id,
            "kind": run.kind,
            "attempt": run.attempt,
            "scheduled_at_ms": run.scheduled_at_ms,
            "finished_at_ms": run.finished_at_ms,
            "outcome": run.outcome,
            "code": run.code,
            "message": run.message,
            "executor": run.executor,
            "module_digest": run.module_digest,
        },
    })
}

/// A client that reaches `url`'s host only at an address `nets` allows,
/// resolved once here; no proxy, no redirects (a tenant's webhook must not
/// steer the admin elsewhere).
async fn client_for(nets: &NetPolicy, url: &str) -> Result<reqwest::Client, String> {
    let parsed = reqwest::Url::parse(url).map_err(|error| format!("{url}: {error}"))?;
    let host = parsed
        .host_str()
        .ok_or_else(|| format!("{url} has no host"))?;
    let port = parsed
        .port_or_known_default()
        .ok_or_else(|| format!("{url} has no port"))?;
    let address = nets
        .resolve(host, port)
        .await
        .map_err(|denied| format!("{url}: {denied}"))?;
    cronbox_tls::client::builder()
        .timeout(TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .resolve(host, address)
        .build()
        .map_err(|error| format!("{url}: {error}"))
}

/// POSTs `body`, retrying; the last error if no attempt got a 2xx.
async fn send(nets: &NetPolicy, url: &str, body: &serde_json::Value) -> Result<(), String> {
    let http = match client_for(nets, url).await {
        Ok(http) => http,
        Err(refused) => {
            tracing::warn!(%url, refused, "alarm webhook address refused");
            return Err(
                "not delivered: the webhook's address is not one the admin may call (the \
                 admin's log has the detail)"
                    .to_owned(),
            );
        }
    };
    let mut backoff = FIRST_BACKOFF;
    let mut last_error = String::new();
    for attempt in 1..=ATTEMPTS {
        match http.post(url).json(body).send().await {
            Ok(response) if response.status().is_success() => return Ok(()),
            Ok(response) => last_error = format!("{url} answered {}", response.status()),
            Err(error) => last_error = format!("{url}: {error}"),
        }
        if attempt < ATTEMPTS {
            tokio::time::sleep(backoff).await;
            backoff *= 2;
        }
    }
    // The detail (status, connection error) goes to the operator's log
    // only: shown to the tenant it would make the webhook a probe of what
    // the admin can reach.
    tracing::warn!(%url, last_error, "alarm webhook failed");
    Err(format!(
        "not delivered after {ATTEMPTS} attempts (the admin's log has the detail)"
    ))
}
