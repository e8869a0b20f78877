//! Enrolled executors, the operator's: `/api/v1/executor-tokens` to
//! enroll one (its token shown once), list them (never their tokens),
//! rotate one's token with an overlap, and revoke one (its registrations
//! end at once). The rules are `service::executor_tokens`'.

use cronbox_api::{ExecutorTokenRotation, ExecutorTokenSpec};

use super::*;

async fn create(
    State(state): State<Arc<AdminState>>,
    ApiJson(spec): ApiJson<ExecutorTokenSpec>,
) -> Result<impl IntoResponse, Failure> {
    let issued =
        service::executor_tokens::create(state.services.store(), &spec, state.services.now_ms())
            .await?;
    let note = AuditNote::detail(json!({ "id": issued.id, "name": issued.name,
        "groups": issued.groups }));
    Ok((StatusCode::CREATED, note, Json(issued)))
}

async fn list(State(state): State<Arc<AdminState>>) -> Result<impl IntoResponse, Failure> {
    Ok(Json(
        service::executor_tokens::list(state.services.store()).await?,
    ))
}

async fn rotate(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<i64>,
    body: Bytes,
) -> Result<impl IntoResponse, Failure> {
    let rotation: ExecutorTokenRotation = optional_json(&body)?;
    let issued = service::executor_tokens::rotate(
        state.services.store(),
        id,
        rotation.overlap_ms,
        state.services.now_ms(),
    )
    .await?;
    let note =
        AuditNote::detail(json!({ "previous_valid_until_ms": issued.previous_valid_until_ms }));
    Ok((note, Json(issued)))
}

async fn revoke(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    let revoked = service::executor_tokens::revoke(&state.services, id).await?;
    Ok(Json(revoked))
}

pub(super) fn routes(table: &mut Routes) {
    let operation = op(
        "post",
        "/api/v1/executor-tokens",
        "executor-tokens",
        "Enroll an executor (operator): a token that registers only in the groups named; shown once",
        Some(schema("ExecutorTokenSpec")),
        "201",
        schema("ExecutorTokenIssued"),
    );
    table.route(operation, OPERATOR, create);
    let operation = op(
        "get",
        "/api/v1/executor-tokens",
        "executor-tokens",
        "Enrolled executors, newest first, with the addresses registered with each (operator; never their tokens)",
        None,
        "200",
        json!({ "type": "array", "items": schema("ExecutorToken") }),
    );
    table.route(operation, OPERATOR, list);
    let operation = op(
        "post",
        "/api/v1/executor-tokens/{id}/rotate",
        "executor-tokens",
        "A new token for an enrolled executor (operator); the one before works until the overlap ends (default an hour); shown once",
        Some(schema("ExecutorTokenRotation")),
        "200",
        schema("ExecutorTokenIssued"),
    )
    .body_optional();
    table.route(operation, OPERATOR, rotate);
    let operation = op(
        "delete",
        "/api/v1/executor-tokens/{id}",
        "executor-tokens",
        "Revoke an enrolled executor (operator): its token works no more and its registrations end now",
        None,
        "200",
        schema("ExecutorTokenRevoked"),
    );
    table.route(operation, OPERATOR, revoke);
}
