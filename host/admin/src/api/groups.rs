//! Executor groups (AUTO or MANUAL), the tenants each is granted to, and
//! the registered executors.

use super::*;
use bodies::{GroupSpec, GroupTenants};

pub(super) async fn put_group(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(name): Path<String>,
    ApiJson(spec): ApiJson<GroupSpec>,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("configuring an executor group")?;
    let kind = service::groups::put(
        state.services.store(),
        &name,
        &spec.address_type,
        &spec.addresses,
        spec.legacy.as_ref(),
        state.services.limits().secrets.as_deref(),
    )
    .await?;
    let tenants = granted_tenants(&state, &name).await?;
    Ok(Json(bodies::Group {
        name,
        address_type: kind,
        addresses: spec.addresses,
        tenants,
        legacy: spec.legacy.map(|legacy| legacy.protocol),
    }))
}

async fn granted_tenants(state: &AdminState, group: &str) -> Result<Vec<String>, Failure> {
    Ok(service::groups::tenants_of(state.services.store(), group).await?)
}

/// Grants group `name` to the tenants listed, replacing the grants before
/// (operator only): their jobs may then be put in it. Jobs already in the
/// group keep running when a grant is taken back; their next change is
/// refused until they move to a group of their tenant.
pub(super) async fn put_group_tenants(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(name): Path<String>,
    ApiJson(grants): ApiJson<GroupTenants>,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("granting an executor group")?;
    let row = service::groups::grant(state.services.store(), &name, &grants.tenants).await?;
    Ok(Json(bodies::Group {
        name: row.name,
        address_type: row.address_type,
        addresses: row.addresses,
        tenants: row.tenants,
        legacy: row.legacy,
    }))
}

/// Registered executors and their last heartbeat (operator only: executor
/// addresses are the operator's infrastructure).
pub(super) async fn list_executors(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("listing executors")?;
    Ok(Json(service::groups::executors(&state.services).await?))
}

/// The executor groups: every one with its addresses and tenants for the
/// operator; for anyone else the groups its tenant may use, without them
/// (executor addresses are the operator's infrastructure).
pub(super) async fn list_groups(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
) -> Result<impl IntoResponse, Failure> {
    let groups: Vec<bodies::Group> = service::groups::list(state.services.store())
        .await?
        .into_iter()
        .filter_map(|row| {
            if caller.operator() {
                return Some(bodies::Group {
                    name: row.name,
                    address_type: row.address_type,
                    addresses: row.addresses,
                    tenants: row.tenants,
                    legacy: row.legacy,
                });
            }
            let usable = caller.tenant == DEFAULT_TENANT
                || row
                    .tenants
                    .iter()
                    .any(|tenant| tenant == "*" || *tenant == caller.tenant);
            usable.then_some(bodies::Group {
                name: row.name,
                address_type: row.address_type,
                addresses: Vec::new(),
                tenants: Vec::new(),
                legacy: row.legacy,
            })
        })
        .collect();
    Ok(Json(groups))
}

/// This file's routes: each one's document, the access it needs and its
/// handler.
pub(super) fn routes(table: &mut Routes) {
    let operation = op(
        "get",
        "/api/v1/groups",
        "groups",
        "Executor groups: all, with addresses and tenants, for the operator; the groups the caller's tenant may use, without them, for anyone else",
        None,
        "200",
        array_of(schema("Group")),
    );
    table.route(operation, VIEWER, list_groups);
    let operation = op(
        "get",
        "/api/v1/executors",
        "groups",
        "Registered executors with their group, last heartbeat and whether they count as alive (operator only)",
        None,
        "200",
        array_of(schema("Executor")),
    );
    table.route(operation, OPERATOR, list_executors);
    let operation = op(
        "put",
        "/api/v1/groups/{name}",
        "groups",
        "Create or replace an executor group (operator)",
        Some(schema("GroupSpec")),
        "200",
        schema("Group"),
    );
    table.route(operation, OPERATOR, put_group);
    let operation = op(
        "put",
        "/api/v1/groups/{name}/tenants",
        "groups",
        "Grant an executor group to tenants, replacing its grants; `*` is every tenant (operator)",
        Some(schema("GroupTenants")),
        "200",
        schema("Group"),
    );
    table.route(operation, OPERATOR, put_group_tenants);
}
