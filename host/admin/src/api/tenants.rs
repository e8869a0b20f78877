//! Tenants and their tokens (operator only).

use super::*;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TenantSpec {
    name: String,
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TokenSpec {
    #[serde(default)]
    label: String,
}

/// A new random API token: shown once, stored as its sha256.
pub(super) fn new_token() -> String {
    format!("cbx_{}", hex::encode(rand::random::<[u8; 24]>()))
}

/// Creates a tenant and its first token (operator only).
pub(super) async fn create_tenant(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    ApiJson(spec): ApiJson<TenantSpec>,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("creating a tenant")?;
    let valid = !spec.name.is_empty()
        && spec.name.len() <= 63
        && spec
            .name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !valid {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidTenant,
            format!(
                "tenant name {:?} must be 1 to 63 lowercase letters, digits or '-'",
                spec.name
            ),
        )
        .field("name"));
    }
    let store = state.scheduler.store();
    if !store
        .create_tenant(&spec.name, state.scheduler.now_ms())
        .await?
    {
        return Err(Failure::new(
            StatusCode::CONFLICT,
            ErrorCode::TenantExists,
            format!("tenant {:?} already exists", spec.name),
        ));
    }
    let token = new_token();
    let id = store
        .add_token(
            &spec.name,
            "first",
            &token_hash(&token),
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
    let token = new_token();
    let id = state
        .scheduler
        .store()
        .add_token(
            &tenant,
            &spec.label,
            &token_hash(&token),
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
