//! Backfills: a job's schedule run over a past range, at a bounded rate;
//! started, listed, read and cancelled.

use super::*;

/// Starts a backfill of a job: its schedule's instants in a past range,
/// run as runs of kind `backfill` at a bounded rate.
pub(super) async fn backfill_job(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<JobId>,
    ApiJson(request): ApiJson<cronbox_api::BackfillRequest>,
) -> Result<impl IntoResponse, Failure> {
    let job = visible_job(&state, &caller, id).await?;
    let backfill =
        service::backfills::start(&state.services, &job, &request, &caller.who()).await?;
    Ok((StatusCode::CREATED, Json(backfill)))
}

/// Which backfills `GET /api/v1/backfills` lists.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub(super) struct BackfillsQuery {
    /// Only this job's
    #[param(inline)]
    job: Option<Integer>,
}

/// The caller's backfills, newest first (of one job with `job`).
pub(super) async fn list_backfills(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Params(query): Params<BackfillsQuery>,
) -> Result<impl IntoResponse, Failure> {
    let tenant = caller.only_tenant();
    Ok(Json(
        service::backfills::list(
            state.services.store(),
            tenant.as_deref(),
            query.job.map(|id| JobId(id.get())),
        )
        .await?,
    ))
}

async fn visible_backfill(
    state: &AdminState,
    caller: &Caller,
    id: i64,
) -> Result<cronbox_api::Backfill, Failure> {
    Ok(caller.scope().backfill(state.services.store(), id).await?)
}

pub(super) async fn get_backfill(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    Ok(Json(visible_backfill(&state, &caller, id).await?))
}

/// Cancels a backfill: no more of its runs are written (those written go
/// on).
pub(super) async fn cancel_backfill(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    visible_backfill(&state, &caller, id).await?;
    service::backfills::cancel(state.services.store(), id).await?;
    Ok(Json(visible_backfill(&state, &caller, id).await?))
}

/// This file's routes: each one's document, the access it needs and its
/// handler.
pub(super) fn routes(table: &mut Routes) {
    let operation = op(
        "post",
        "/api/v1/jobs/{id}/backfill",
        "jobs",
        "Run the job's schedule over a past range (from_ms, to_ms], as runs of kind backfill, per_second a second (each instant of a job once)",
        Some(schema("BackfillRequest")),
        "201",
        schema("Backfill"),
    );
    table.route(operation, DEVELOPER, backfill_job);
    let operation = op(
        "get",
        "/api/v1/backfills",
        "jobs",
        "The caller's backfills, newest first, at most 100",
        None,
        "200",
        array_of(schema("Backfill")),
    )
    .with_query(parameters_of::<BackfillsQuery>());
    table.route(operation, VIEWER, list_backfills);
    let operation = op(
        "get",
        "/api/v1/backfills/{id}",
        "jobs",
        "A backfill and how far it has gone",
        None,
        "200",
        schema("Backfill"),
    );
    table.route(operation, VIEWER, get_backfill);
    let operation = op(
        "delete",
        "/api/v1/backfills/{id}",
        "jobs",
        "Cancel a backfill: no more of its runs are written",
        None,
        "200",
        schema("Backfill"),
    );
    table.route(operation, DEVELOPER, cancel_backfill);
}
