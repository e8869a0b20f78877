//! Runs: listed by filter and page, read, killed, their logs; daily
//! reports.

use cronbox_protocol::TriggerKind;
use utoipa::IntoParams;

use super::*;

/// Run `id` if the caller may see it (as this admin knows it now: see
/// `Firing::as_known`); 404 otherwise.
pub(super) async fn visible_run(
    state: &AdminState,
    caller: &Caller,
    id: RunId,
) -> Result<RunRow, Failure> {
    let run = caller.scope().run(state.services.store(), id).await?;
    // Dispatched before its mark is written: shown as it is.
    Ok(state.services.firing().as_known(run))
}

/// A run as a person sees it: a run executing now with its start time
/// (asked of its executor; see `Firing::with_start`).
pub(super) async fn get_run(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<RunId>,
) -> Result<impl IntoResponse, Failure> {
    let run = visible_run(&state, &caller, id).await?;
    let run = state.services.firing().with_start(run).await;
    let mut run = service::runs::named(state.services.store(), run).await?;
    state.services.link_trace(&mut run);
    Ok(Json(run))
}

pub(super) async fn kill_run(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<RunId>,
) -> Result<impl IntoResponse, Failure> {
    let run = visible_run(&state, &caller, id).await?;
    if run.status != crate::store::RunStatus::Dispatched {
        return Err(Failure::new(
            StatusCode::CONFLICT,
            ErrorCode::NotRunning,
            format!("run {id} is {}, not running", run.status),
        ));
    }
    let killed = state
        .services
        .firing()
        .kill_run(&run)
        .await
        .map_err(executor_unreachable)?;
    Ok(Json(bodies::RunKilled { run_id: id, killed }))
}

/// The answer when the executor holding a run could not be asked.
fn executor_unreachable(error: String) -> Failure {
    Failure::new(
        StatusCode::BAD_GATEWAY,
        ErrorCode::ExecutorUnreachable,
        error,
    )
}

/// Most log lines one page may hold.
pub(crate) const MAX_LOG_PAGE: i64 = 5000;

/// The page of a run's log to read.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub(super) struct LogQuery {
    /// First line (default 0)
    #[param(inline)]
    offset: Option<Bounded<0, { i64::MAX }>>,
    /// Lines (default 1000, at most 5000)
    #[param(inline)]
    limit: Option<Bounded<1, { MAX_LOG_PAGE }>>,
}

/// A run's log by line offset: forwarded to its executor while it runs,
/// read from the store once it ended (a legacy run's always from its
/// xxl-job executor).
pub(super) async fn run_log(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<RunId>,
    Params(query): Params<LogQuery>,
) -> Result<impl IntoResponse, Failure> {
    let offset = query.offset.map_or(0, Bounded::get) as usize;
    let limit = query.limit.map_or(1000, Bounded::get) as usize;
    let run = visible_run(&state, &caller, id).await?;
    // A legacy run's log stays on its xxl-job executor: read from there,
    // running or ended.
    let legacy = run.is_legacy() && run.executor.is_some();
    if run.status == crate::store::RunStatus::Dispatched || legacy {
        let mut page = state
            .services
            .firing()
            .live_log(&run, offset, limit)
            .await
            .map_err(executor_unreachable)?;
        // The executor knows a run has finished a moment before its result
        // reaches the admin: the log is finished once the run has ended
        // here, so that a follower then reads its outcome.
        page.finished &= legacy && run.status != crate::store::RunStatus::Dispatched;
        return Ok(Json(page));
    }
    let stored = service::runs::stored_log(state.services.store(), id).await?;
    let ended = run.status != crate::store::RunStatus::Pending;
    Ok(Json(crate::store::logs::stored_page(
        id, &stored, offset, limit, ended,
    )))
}

/// Most runs in one page of `GET /api/v1/runs`.
pub(super) const MAX_RUNS_PAGE: i64 = 1000;

/// Most runs one page of `GET /api/v1/runs` reads for its status, kind,
/// group and time filters, newest first among the tenant's (or the job's):
/// a filter that matches nothing answers in a bounded read, not a scan of
/// every run kept (minutes at a day of runs at 1,000 a second, with a
/// read transaction open all along).
pub(super) const RUNS_EXAMINED_PER_PAGE: i64 = 50_000;

/// The filters and page of `GET /api/v1/runs`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub(super) struct RunsQuery {
    /// Runs of this job
    #[param(inline)]
    job: Option<Integer>,
    /// Runs of the jobs of this executor group
    group: Option<String>,
    /// Runs in this status
    status: Option<RunStatus>,
    /// Runs of this trigger kind
    kind: Option<TriggerKind>,
    /// Scheduled at or after (ms since the epoch)
    #[param(inline)]
    from_ms: Option<Integer>,
    /// Scheduled before (ms since the epoch)
    #[param(inline)]
    to_ms: Option<Integer>,
    /// Runs with a smaller id: the previous page's next_before
    #[param(inline)]
    before: Option<Integer>,
    /// Page size, 1 to 1000 (default 100)
    #[param(inline)]
    limit: Option<Bounded<1, { MAX_RUNS_PAGE }>>,
}

/// Runs, newest first, filtered by `job`, `status`, `from_ms`, `to_ms`
/// (scheduled time), paged with `limit` and the `before` cursor that each
/// page returns as `next_before`.
pub(super) async fn list_runs(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Params(query): Params<RunsQuery>,
) -> Result<impl IntoResponse, Failure> {
    let filter = RunFilter {
        tenant: caller.only_tenant(),
        job_id: query.job.map(|id| JobId(id.get())),
        group: query.group,
        status: query.status,
        kind: query.kind,
        from_ms: query.from_ms.map(Bounded::get),
        to_ms: query.to_ms.map(Bounded::get),
        before_id: query.before.map(|id| RunId(id.get())),
        limit: query.limit.map_or(100, Bounded::get),
        examine: Some(RUNS_EXAMINED_PER_PAGE),
    };
    Ok(Json(
        service::runs::page(state.services.store(), &filter).await?,
    ))
}

/// The days of a report.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub(super) struct ReportQuery {
    /// First day, YYYY-MM-DD (default: a week before `to`)
    #[param(inline)]
    from: Option<Day>,
    /// Last day, YYYY-MM-DD (default: today, UTC)
    #[param(inline)]
    to: Option<Day>,
}

/// Run counts per day (refreshed by housekeeping every minute) and their
/// totals.
pub(super) async fn reports(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Params(query): Params<ReportQuery>,
) -> Result<impl IntoResponse, Failure> {
    let to = query
        .to
        .map_or_else(|| state.services.now().date_naive(), |day| day.0);
    let from = query
        .from
        .map_or_else(|| to - chrono::Duration::days(6), |day| day.0);
    Ok(Json(
        service::runs::daily_report(state.services.store(), &caller.tenant, from, to).await?,
    ))
}

/// The caller's tenant at a glance (every tenant's for the operator): the
/// console's dashboard.
pub(super) async fn dashboard(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
) -> Result<Json<cronbox_api::Dashboard>, Failure> {
    let tenant = caller.only_tenant();
    Ok(Json(
        service::runs::dashboard(&state.services, tenant.as_deref()).await?,
    ))
}

/// This file's routes: each one's document, the access it needs and its
/// handler.
pub(super) fn routes(table: &mut Routes) {
    let operation = Operation {
        query: parameters_of::<RunsQuery>(),
        ..op(
            "get",
            "/api/v1/runs",
            "runs",
            "Runs by filter, newest first, paged; a page reads at most the 50,000 newest runs (of the tenant, or of the job) for its other filters, so it may hold fewer than limit, even none, with next_before to go on from",
            None,
            "200",
            schema("RunPage"),
        )
    };
    table.route(operation, VIEWER, list_runs);
    let operation = op(
        "get",
        "/api/v1/runs/{id}",
        "runs",
        "A run",
        None,
        "200",
        schema("Run"),
    );
    table.route(operation, VIEWER, get_run);
    let operation = op(
        "post",
        "/api/v1/runs/{id}/kill",
        "runs",
        "Kill a running run (forwarded to its executor)",
        None,
        "200",
        schema("RunKilled"),
    );
    table.route(operation, DEVELOPER, kill_run);
    let operation = Operation {
        query: parameters_of::<LogQuery>(),
        ..op(
            "get",
            "/api/v1/runs/{id}/log",
            "runs",
            "A run's log by line offset, live while it runs",
            None,
            "200",
            schema("LogResponse"),
        )
    };
    table.route(operation, VIEWER, run_log);
    let operation = Operation {
        query: parameters_of::<ReportQuery>(),
        ..op(
            "get",
            "/api/v1/reports",
            "reports",
            "Run counts per day and their totals",
            None,
            "200",
            schema("Report"),
        )
    };
    table.route(operation, VIEWER, reports);
    let operation = op(
        "get",
        "/api/v1/dashboard",
        "runs",
        "Runs by hour (24 h) and by day (30 days), success rate, start lateness, executors online, runs in progress, the jobs failing most: the caller's tenant (every tenant's for the operator)",
        None,
        "200",
        schema("Dashboard"),
    );
    table.route(operation, VIEWER, dashboard);
}
