//! Executor groups (AUTO or MANUAL) and the registered executors.

use super::*;
use bodies::GroupSpec;

pub(super) async fn put_group(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    ApiJson(spec): ApiJson<GroupSpec>,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("configuring an executor group")?;
    let kind = service::groups::put(
        state.scheduler.store(),
        &name,
        &spec.address_type,
        &spec.addresses,
    )
    .await?;
    Ok(Json(bodies::Group {
        name,
        address_type: kind,
        addresses: spec.addresses,
    }))
}

/// Registered executors and their last heartbeat (operator only: executor
/// addresses are the operator's infrastructure).
pub(super) async fn list_executors(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("listing executors")?;
    let alive_since = state.scheduler.alive_since_now().await?;
    let executors: Vec<bodies::Executor> = state
        .scheduler
        .store()
        .registered_executors()
        .await?
        .into_iter()
        .map(|executor| bodies::Executor {
            alive: executor.last_beat_ms >= alive_since,
            group: executor.group,
            address: executor.address,
            last_beat_ms: executor.last_beat_ms,
            busy: executor.load.busy,
            free_slots: executor.load.free_slots,
        })
        .collect();
    Ok(Json(executors))
}

pub(super) async fn list_groups(
    State(state): State<Arc<AdminState>>,
) -> Result<impl IntoResponse, Failure> {
    let groups: Vec<bodies::Group> = state
        .scheduler
        .store()
        .groups()
        .await?
        .into_iter()
        .map(|(name, address_type, addresses)| bodies::Group {
            name,
            address_type,
            addresses,
        })
        .collect();
    Ok(Json(groups))
}
