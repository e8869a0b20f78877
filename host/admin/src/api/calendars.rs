//! Calendars: named sets of dates a tenant's jobs do not fire on.

use super::*;

/// The caller's tenant's calendars (every tenant's for the operator).
pub(super) async fn list_calendars(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
) -> Result<impl IntoResponse, Failure> {
    let tenant = caller.only_tenant();
    Ok(Json(
        state
            .scheduler
            .store()
            .calendars(tenant.as_deref())
            .await
            .map_err(store_failure)?,
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
    let refuse = |field: &str, message: String| {
        Failure::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidJob,
            message,
        )
        .field(field)
    };
    let valid_name = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if !valid_name {
        return Err(refuse(
            "name",
            format!("calendar name {name:?} must be 1 to 64 of A-Z a-z 0-9 - _ ."),
        ));
    }
    let dates =
        crate::schedule::parse_dates(&body.dates).map_err(|message| refuse("dates", message))?;
    let calendar = cronbox_api::Calendar {
        tenant: caller.tenant.clone(),
        name,
        dates: crate::schedule::date_texts(&dates),
        updated_at_ms: state.scheduler.now_ms(),
    };
    let store = state.scheduler.store();
    store.put_calendar(&calendar).await.map_err(store_failure)?;
    state
        .scheduler
        .refresh_calendars()
        .await
        .map_err(store_failure)?;
    state.scheduler.wake();
    Ok(Json(calendar))
}

/// Deletes a calendar of the caller's tenant (jobs naming it fire on its
/// dates from then on).
pub(super) async fn delete_calendar(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.scheduler.store();
    let unknown = || {
        Failure::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("no calendar {name:?}"),
        )
    };
    let calendar = store
        .calendars(Some(&caller.tenant))
        .await
        .map_err(store_failure)?
        .into_iter()
        .find(|calendar| calendar.name == name)
        .ok_or_else(unknown)?;
    if !store
        .delete_calendar(&caller.tenant, &name)
        .await
        .map_err(store_failure)?
    {
        return Err(unknown());
    }
    state
        .scheduler
        .refresh_calendars()
        .await
        .map_err(store_failure)?;
    Ok(Json(calendar))
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
