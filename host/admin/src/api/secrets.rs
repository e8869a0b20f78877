//! Tenants' secrets: write-only values, listed by name and dates. The
//! caller acts on its own tenant's secrets (the operator on `default`'s);
//! the operator lists every tenant's names.

use super::*;

/// Sets a secret's value, new or replaced; answers its name and dates
/// (equal when it is new), never its value.
pub(super) async fn put_secret(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(name): Path<String>,
    ApiJson(body): ApiJson<cronbox_api::SecretValue>,
) -> Result<impl IntoResponse, Failure> {
    caller.require(Role::Admin, "setting a secret")?;
    let store = state.services.store();
    service::secrets::set(
        store,
        state.services.limits().secrets.as_deref(),
        &caller.tenant,
        &name,
        &body.value,
        state.services.now_ms(),
    )
    .await?;
    let secret = service::secrets::list(store, Some(&caller.tenant))
        .await?
        .into_iter()
        .find(|secret| secret.name == name)
        .ok_or_else(|| Failure::from(ServiceError::UnknownSecret(name)))?;
    Ok(Json(secret))
}

/// The caller's secrets (every tenant's for the operator): names, dates
/// and the jobs referencing each.
pub(super) async fn list_secrets(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
) -> Result<impl IntoResponse, Failure> {
    let tenant = caller.only_tenant();
    Ok(Json(
        service::secrets::list(state.services.store(), tenant.as_deref()).await?,
    ))
}

/// Whether a secret goes while jobs reference it.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub(super) struct DeleteSecretQuery {
    /// Delete even while jobs reference it (their runs then read nothing under its name)
    force: Option<bool>,
}

/// Deletes a secret; refused (409) while jobs reference it, unless
/// `force=true`.
pub(super) async fn delete_secret(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(name): Path<String>,
    Params(query): Params<DeleteSecretQuery>,
) -> Result<impl IntoResponse, Failure> {
    caller.require(Role::Admin, "deleting a secret")?;
    let force = query.force.unwrap_or(false);
    let still_referenced_by =
        service::secrets::delete(state.services.store(), &caller.tenant, &name, force).await?;
    Ok(Json(cronbox_api::SecretDeleted {
        name,
        still_referenced_by,
    }))
}

/// This file's routes: each one's document, the access it needs and its
/// handler.
pub(super) fn routes(table: &mut Routes) {
    let operation = op(
        "get",
        "/api/v1/secrets",
        "secrets",
        "The caller's secrets (every tenant's for the operator): names, dates and the jobs referencing each; never values (admin)",
        None,
        "200",
        array_of(schema("Secret")),
    );
    table.route(operation, ADMIN, list_secrets);
    let operation = op(
        "put",
        "/api/v1/secrets/{name}",
        "secrets",
        "Set a secret of the caller's tenant, new or replaced (write-only: no route answers its value)",
        Some(schema("SecretValue")),
        "200",
        schema("Secret"),
    );
    table.route(operation, ADMIN, put_secret);
    let operation = Operation {
        query: parameters_of::<DeleteSecretQuery>(),
        ..op(
            "delete",
            "/api/v1/secrets/{name}",
            "secrets",
            "Delete a secret (409 while jobs reference it, unless force=true)",
            None,
            "200",
            schema("SecretDeleted"),
        )
    };
    table.route(operation, ADMIN, delete_secret);
}
