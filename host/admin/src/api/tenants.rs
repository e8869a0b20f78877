//! Tenants and their tokens (operator only).

use super::*;
use bodies::{TenantSpec, TokenSpec};

/// Creates a tenant and its first token (operator only).
pub(super) async fn create_tenant(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    ApiJson(spec): ApiJson<TenantSpec>,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("creating a tenant")?;
    let (id, token) =
        service::tenants::create(state.services.store(), &spec.name, state.services.now_ms())
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
    caller: Caller,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("listing tenants")?;
    let tenants: Vec<bodies::Tenant> = service::tenants::list(state.services.store())
        .await?
        .into_iter()
        .map(|(name, tokens)| bodies::Tenant { name, tokens })
        .collect();
    Ok(Json(tenants))
}

/// A tenant the caller may read the settings of: the operator any, a
/// tenant itself (any other is unknown to it, as any object it may not
/// see).
fn visible_tenant(caller: &Caller, tenant: &str) -> Result<(), Failure> {
    if !caller.sees(tenant) {
        return Err(ServiceError::UnknownTenant(tenant.to_owned()).into());
    }
    Ok(())
}

/// A tenant's quotas with its use (the operator, or the tenant itself).
pub(super) async fn get_quotas(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(tenant): Path<String>,
) -> Result<impl IntoResponse, Failure> {
    visible_tenant(&caller, &tenant)?;
    Ok(Json(
        service::tenants::quotas(&state.services, &tenant).await?,
    ))
}

/// Replaces a tenant's quotas (operator only): them with its use.
pub(super) async fn put_quotas(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(tenant): Path<String>,
    ApiJson(settings): ApiJson<cronbox_api::QuotaSettings>,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("setting a tenant's quotas")?;
    Ok(Json(
        service::tenants::set_quotas(&state.services, &tenant, &settings).await?,
    ))
}

/// A tenant's HTTP ceiling: the origins its jobs may be granted (the
/// operator, or the tenant itself).
pub(super) async fn get_http_ceiling(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(tenant): Path<String>,
) -> Result<impl IntoResponse, Failure> {
    visible_tenant(&caller, &tenant)?;
    let origins = service::tenants::http_ceiling(state.services.store(), &tenant).await?;
    Ok(Json(cronbox_api::HttpCeiling { origins }))
}

/// Replaces a tenant's HTTP ceiling (operator only). Jobs saved earlier
/// keep their grants, but a run is sent only the grants within the
/// ceiling of its dispatch.
pub(super) async fn put_http_ceiling(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(tenant): Path<String>,
    ApiJson(ceiling): ApiJson<cronbox_api::HttpCeiling>,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("setting a tenant's HTTP ceiling")?;
    let origins =
        service::tenants::set_http_ceiling(state.services.store(), &tenant, &ceiling.origins)
            .await?;
    Ok(Json(cronbox_api::HttpCeiling { origins }))
}

/// Adds a token to a tenant (operator only), acting as the tenant's
/// admin; the token is shown once.
pub(super) async fn create_token(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(tenant): Path<String>,
    body: Bytes,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("creating a token")?;
    service::tenants::known(state.services.store(), &tenant).await?;
    let spec: TokenSpec = optional_json(&body)?;
    let admin = crate::store::Principal {
        tenant: tenant.clone(),
        role: Role::Admin,
        user: None,
    };
    let (id, token) = service::tenants::add_token(
        state.services.store(),
        &admin,
        &spec.label,
        state.services.now_ms(),
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
    caller: Caller,
    Path((tenant, id)): Path<(String, i64)>,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("revoking a token")?;
    service::tenants::revoke_token(state.services.store(), &tenant, id).await?;
    Ok(Json(bodies::TokenRevoked {
        tenant,
        revoked: id,
    }))
}

/// This file's routes: each one's document, the access it needs and its
/// handler.
pub(super) fn routes(table: &mut Routes) {
    let operation = op(
        "post",
        "/api/v1/tenants",
        "tenants",
        "Create a tenant and its first token (operator)",
        Some(schema("TenantSpec")),
        "201",
        schema("TenantCreated"),
    );
    table.route(operation, OPERATOR, create_tenant);
    let operation = op(
        "get",
        "/api/v1/tenants",
        "tenants",
        "Tenants and their token counts (operator)",
        None,
        "200",
        array_of(schema("Tenant")),
    );
    table.route(operation, OPERATOR, list_tenants);
    let operation = op(
        "post",
        "/api/v1/tenants/{name}/tokens",
        "tenants",
        "Add a token to a tenant (operator); shown once",
        Some(schema("TokenSpec")),
        "201",
        schema("TokenCreated"),
    )
    .body_optional();
    table.route(operation, OPERATOR, create_token);
    let operation = op(
        "delete",
        "/api/v1/tenants/{name}/tokens/{id}",
        "tenants",
        "Revoke a token (operator)",
        None,
        "200",
        schema("TokenRevoked"),
    );
    table.route(operation, OPERATOR, revoke_token);
    let operation = op(
        "get",
        "/api/v1/tenants/{name}/quotas",
        "tenants",
        "A tenant's quotas: each limit, whether the tenant has its own, and its use (the operator, or the tenant itself)",
        None,
        "200",
        schema("TenantQuotas"),
    );
    table.route(operation, VIEWER, get_quotas);
    let operation = op(
        "put",
        "/api/v1/tenants/{name}/quotas",
        "tenants",
        "Replace a tenant's own quotas (operator): those named replace the defaults, the others follow them",
        Some(schema("QuotaSettings")),
        "200",
        schema("TenantQuotas"),
    );
    table.route(operation, OPERATOR, put_quotas);
    let operation = op(
        "get",
        "/api/v1/tenants/{name}/http-ceiling",
        "tenants",
        "The origins a tenant's jobs may be granted (the operator, or the tenant itself)",
        None,
        "200",
        schema("HttpCeiling"),
    );
    table.route(operation, VIEWER, get_http_ceiling);
    let operation = op(
        "put",
        "/api/v1/tenants/{name}/http-ceiling",
        "tenants",
        "Replace a tenant's HTTP ceiling (operator): each job's http_allow must lie within it",
        Some(schema("HttpCeiling")),
        "200",
        schema("HttpCeiling"),
    );
    table.route(operation, OPERATOR, put_http_ceiling);
}
