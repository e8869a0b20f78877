//! Routes for executors (the shared executor token, or an enrolled
//! executor's, which serves only its groups): registry, deregistration,
//! results, module content by digest.

use super::*;

pub(super) async fn registry(
    State(state): State<Arc<AdminState>>,
    identity: ExecutorIdentity,
    ApiJson(registration): ApiJson<Registration>,
) -> Result<Response, Failure> {
    identity.may_serve(&registration.group)?;
    let executor = registration
        .protocol
        .unwrap_or(cronbox_protocol::UNVERSIONED);
    if let Err(skew) = cronbox_protocol::check_skew(cronbox_protocol::PROTOCOL_VERSION, executor) {
        return Err(Failure::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidRequest,
            skew.to_string(),
        )
        .field("protocol"));
    }
    crate::service::groups::check_executor_address(&registration.address).map_err(|why| {
        Failure::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidRequest,
            why,
        )
        .field("address")
    })?;
    // Run commands carry the executor's credential and the runs' secrets:
    // an admin serving TLS sends them over TLS only.
    if state.serves_tls && registration.address.starts_with("http://") {
        return Err(Failure::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidRequest,
            format!(
                "{} is a plain http:// address, and this admin serves TLS: an executor \
                 registers with an https:// address (--tls-cert), so that run commands, \
                 with its credential and the runs' secrets, never cross a plain connection",
                registration.address
            ),
        )
        .field("address"));
    }
    let credential = match identity {
        ExecutorIdentity::Shared => crate::store::RegisteredWith::default(),
        ExecutorIdentity::Enrolled {
            enrolled,
            admin_proof,
        } => crate::store::RegisteredWith {
            credential_id: Some(enrolled.id),
            admin_proof: Some(admin_proof),
        },
    };
    service::executors::register(&state.services, &registration, credential).await?;
    // The executor checks the admin's version in turn.
    Ok((
        [(
            cronbox_protocol::PROTOCOL_HEADER,
            cronbox_protocol::PROTOCOL_VERSION.to_string(),
        )],
        StatusCode::OK,
    )
        .into_response())
}

pub(super) async fn registry_remove(
    State(state): State<Arc<AdminState>>,
    identity: ExecutorIdentity,
    ApiJson(registration): ApiJson<Registration>,
) -> Result<StatusCode, Failure> {
    identity.may_serve(&registration.group)?;
    if registration.protocol == Some(0) {
        return Err(Failure::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidRequest,
            "protocol versions start at 1",
        )
        .field("protocol"));
    }
    service::executors::deregister(
        state.services.store(),
        &registration.group,
        &registration.address,
    )
    .await?;
    Ok(StatusCode::OK)
}

pub(super) async fn callback(
    State(state): State<Arc<AdminState>>,
    identity: ExecutorIdentity,
    CallbackJson(batch): CallbackJson<CallbackBatch>,
) -> Result<StatusCode, Failure> {
    state
        .intake
        .accept_results(batch.results, identity.result_groups())
        .await
        .map_err(store_failure)?;
    Ok(StatusCode::OK)
}

/// A module's bytes; an enrolled executor gets only the modules its
/// groups run (others are answered as unknown).
pub(super) async fn module_content(
    State(state): State<Arc<AdminState>>,
    identity: ExecutorIdentity,
    Path(digest): Path<String>,
) -> Result<Vec<u8>, Failure> {
    let unknown = || {
        Failure::new(
            StatusCode::NOT_FOUND,
            ErrorCode::UnknownModule,
            format!("no module {digest}"),
        )
    };
    service::executors::module_content(state.services.store(), &digest, identity.result_groups())
        .await?
        .ok_or_else(unknown)
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
