//! Tenants and their tokens (operator only).

use super::*;
use bodies::{TenantSpec, TokenSpec};

/// Creates a tenant and its first token (operator only).
pub(super) async fn create_tenant(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    ApiJson(spec): ApiJson<TenantSpec>,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("creating a tenant")?;
    let (id, token) = service::tenants::create(
        state.scheduler.store(),
        &spec.name,
        state.scheduler.now_ms(),
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(bodies::TenantCreated {
            name: spec.name,
            token_id: id,
            token,
        }),
    ))
}

pub(super) async fn list_tenants(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("listing tenants")?;
    let tenants: Vec<bodies::Tenant> = state
        .scheduler
        .store()
        .tenants()
        .await?
        .into_iter()
        .map(|(name, tokens)| bodies::Tenant { name, tokens })
        .collect();
    Ok(Json(tenants))
}

pub(super) async fn known_tenant(state: &AdminState, name: &str) -> Result<(), Failure> {
    let known = state
        .scheduler
        .store()
        .tenants()
        .await?
        .iter()
        .any(|(tenant, _)| tenant == name);
    if known {
        Ok(())
    } else {
        Err(Failure::new(
            StatusCode::NOT_FOUND,
            ErrorCode::UnknownTenant,
            format!("no tenant {name:?}"),
        ))
    }
}

/// Adds a token to a tenant (operator only); the token is shown once.
pub(super) async fn create_token(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(tenant): Path<String>,
    body: Bytes,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("creating a token")?;
    known_tenant(&state, &tenant).await?;
    let spec: TokenSpec = optional_json(&body)?;
    let (id, token) = service::tenants::add_token(
        state.scheduler.store(),
        &tenant,
        &spec.label,
        state.scheduler.now_ms(),
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(bodies::TokenCreated {
            tenant,
            token_id: id,
            token,
        }),
    ))
}

pub(super) async fn revoke_token(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path((tenant, id)): Path<(String, i64)>,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("revoking a token")?;
    if !state.scheduler.store().revoke_token(&tenant, id).await? {
        return Err(Failure::new(
            StatusCode::NOT_FOUND,
            ErrorCode::UnknownToken,
            format!("tenant {tenant:?} has no token {id}"),
        ));
    }
    Ok(Json(bodies::TokenRevoked {
        tenant,
        revoked: id,
    }))
}
