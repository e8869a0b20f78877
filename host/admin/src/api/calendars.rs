//! Calendars: named sets of dates a tenant's jobs do not fire on.

use super::*;

/// The caller's tenant's calendars (every tenant's for the operator).
pub(super) async fn list_calendars(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
) -> Result<impl IntoResponse, Failure> {
    let tenant = caller.only_tenant();
    Ok(Json(
        service::calendars::list(&state.services, tenant.as_deref()).await?,
    ))
}

/// Sets a calendar of the caller's tenant: the dates its jobs that name it
/// do not fire on (sorted, without repeats).
pub(super) async fn put_calendar(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(name): Path<String>,
    ApiJson(body): ApiJson<cronbox_api::CalendarDates>,
) -> Result<impl IntoResponse, Failure> {
    let calendar =
        service::calendars::put(&state.services, &caller.tenant, name, &body.dates).await?;
    Ok(Json(calendar))
}

/// Deletes a calendar of the caller's tenant (jobs naming it fire on its
/// dates from then on).
pub(super) async fn delete_calendar(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, Failure> {
    Ok(Json(
        service::calendars::delete(&state.services, &caller.tenant, &name).await?,
    ))
}

/// This file's routes: each one's document, the access it needs and its
/// handler.
pub(super) fn routes(table: &mut Routes) {
    let operation = op(
        "get",
        "/api/v1/calendars",
        "jobs",
        "The caller's tenant's shared calendars (every tenant's for the operator)",
        None,
        "200",
        array_of(schema("Calendar")),
    );
    table.route(operation, VIEWER, list_calendars);
    let operation = op(
        "put",
        "/api/v1/calendars/{name}",
        "jobs",
        "Set a shared calendar of the caller's tenant: dates its jobs that name it (schedule_rules.calendars) do not fire on",
        Some(schema("CalendarDates")),
        "200",
        schema("Calendar"),
    );
    table.route(operation, DEVELOPER, put_calendar);
    let operation = op(
        "delete",
        "/api/v1/calendars/{name}",
        "jobs",
        "Delete a shared calendar (jobs naming it fire on its dates from then on)",
        None,
        "200",
        schema("Calendar"),
    );
    table.route(operation, DEVELOPER, delete_calendar);
}
