//! Routes for executors (the executor token): registry, deregistration,
//! results, module content by digest.

use super::*;

pub(super) async fn registry(
    State(state): State<Arc<AdminState>>,
    ApiJson(registration): ApiJson<Registration>,
) -> Result<StatusCode, Failure> {
    if state
        .scheduler
        .store()
        .legacy_group(&registration.group)
        .await?
        .is_some()
    {
        return Err(Failure::new(
            StatusCode::CONFLICT,
            ErrorCode::InvalidGroup,
            format!(
                "group {:?} is a legacy group of xxl-job executors; a cronbox executor \
                 registers in another group",
                registration.group
            ),
        ));
    }
    state
        .scheduler
        .store()
        .registry_beat(
            &registration.group,
            &registration.address,
            crate::store::ExecutorLoad {
                busy: registration.busy.map(i64::from),
                free_slots: registration.free_slots.map(i64::from),
            },
            state.scheduler.now_ms(),
        )
        .await?;
    Ok(StatusCode::OK)
}

pub(super) async fn registry_remove(
    State(state): State<Arc<AdminState>>,
    ApiJson(registration): ApiJson<Registration>,
) -> Result<StatusCode, Failure> {
    state
        .scheduler
        .store()
        .registry_remove(&registration.group, &registration.address)
        .await?;
    Ok(StatusCode::OK)
}

pub(super) async fn callback(
    State(state): State<Arc<AdminState>>,
    CallbackJson(batch): CallbackJson<CallbackBatch>,
) -> Result<StatusCode, Failure> {
    state.scheduler.accept_results(batch.results).await?;
    Ok(StatusCode::OK)
}

pub(super) async fn module_content(
    State(state): State<Arc<AdminState>>,
    Path(digest): Path<String>,
) -> Result<Vec<u8>, Failure> {
    state
        .scheduler
        .store()
        .module(&digest)
        .await?
        .ok_or_else(|| {
            Failure::new(
                StatusCode::NOT_FOUND,
                ErrorCode::UnknownModule,
                format!("no module {digest}"),
            )
        })
}

/// This file's routes: each one's document, the access it needs and its
/// handler.
pub(super) fn routes(table: &mut Routes) {
    let operation = op(
        "post",
        admin_paths::REGISTRY,
        "executors",
        "Register or beat an executor (executor token)",
        Some(schema("Registration")),
        "200",
        Value::Null,
    );
    table.route(operation, Access::Executor, registry);
    let operation = op(
        "post",
        admin_paths::REGISTRY_REMOVE,
        "executors",
        "Deregister an executor (executor token)",
        Some(schema("Registration")),
        "200",
        Value::Null,
    );
    table.route(operation, Access::Executor, registry_remove);
    let operation = op(
        "post",
        admin_paths::CALLBACK,
        "executors",
        "Deliver run results, idempotent by run id (executor token)",
        Some(schema("CallbackBatch")),
        "200",
        Value::Null,
    );
    table.route(
        operation,
        Access::Executor,
        callback.layer(DefaultBodyLimit::max(CALLBACK_BODY_BYTES)),
    );
    let operation = op(
        "get",
        "/api/v1/modules/{digest}/content",
        "executors",
        "A module's bytes by sha256 (executor token)",
        None,
        "200",
        json!({ "type": "string", "format": "binary" }),
    )
    .with_media("application/octet-stream");
    table.route(operation, Access::Executor, module_content);
}
