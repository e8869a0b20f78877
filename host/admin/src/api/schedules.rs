//! Schedule previews: a job's next fires, and a schedule's before it is
//! saved.

use super::*;

/// Most fire times one `next-fires` request may ask for.
pub(crate) const MAX_NEXT_FIRES: i64 = 100;

/// How many fire times a preview shows (default 5).
type FireCount = Bounded<1, { MAX_NEXT_FIRES }>;

/// How many of a job's next fires to show.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub(super) struct NextFiresQuery {
    /// How many fire times (default 5, at most 100)
    #[param(inline)]
    count: Option<FireCount>,
}

pub(super) async fn next_fires(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<JobId>,
    Params(query): Params<NextFiresQuery>,
) -> Result<impl IntoResponse, Failure> {
    let count = query.count.map_or(5, Bounded::get) as usize;
    let job = visible_job(&state, &caller, id).await?;
    let schedule = schedule_of(&job).map_err(|error| {
        Failure::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidJob,
            error.to_string(),
        )
    })?;
    // A paused job fires from the end of its pause, or not at all.
    let from = match &job.pause {
        Some(pause) => pause
            .until_ms
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(|until| until.max(state.services.now())),
        None => Some(state.services.now()),
    };
    let fires: Vec<String> = from
        .map(|from| {
            state
                .services
                .firing()
                .rules_of(&job)
                .preview(&schedule, from, count)
        })
        .unwrap_or_default()
        .into_iter()
        .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .collect();
    Ok(Json(fires))
}

/// The items of a comma-separated query parameter, trimmed, empty ones
/// dropped.
fn comma_list(text: Option<String>) -> Vec<String> {
    text.map(|text| {
        text.split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(str::to_owned)
            .collect()
    })
    .unwrap_or_default()
}

/// A schedule not yet saved, as a job definition writes it.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub(super) struct PreviewQuery {
    /// CRON (default), FIX_RATE, FIX_DELAY, ONE_SHOT or NONE (another is refused, 422)
    schedule_type: Option<String>,
    /// The expression, interval or instant
    #[param(inline)]
    schedule_conf: Option<Limited<{ crate::jobs::MAX_SCHEDULE_CONF_BYTES }>>,
    /// An IANA time zone (default UTC)
    #[param(inline)]
    time_zone: Option<Limited<{ crate::jobs::MAX_TIME_ZONE_BYTES }>>,
    /// No fire before this instant
    #[param(inline)]
    starts_at_ms: Option<Integer>,
    /// No fire after this instant
    #[param(inline)]
    ends_at_ms: Option<Integer>,
    /// Local dates (YYYY-MM-DD, comma separated) without a fire
    exclude_dates: Option<String>,
    /// Names of the tenant's shared calendars (comma separated) whose dates are skipped
    calendars: Option<String>,
    /// Each fire shown up to this many ms late, as its run would be written
    #[param(inline)]
    jitter_ms: Option<Bounded<0, { crate::schedule::MAX_JITTER_MS }>>,
    /// How many fire times (default 5, at most 100)
    #[param(inline)]
    count: Option<FireCount>,
}

/// The next fires of a schedule not yet saved (`schedule_type`,
/// `schedule_conf`, `time_zone` as a job definition writes them; `count`
/// of them): what a job form shows as its author types. Refused as a job
/// with that schedule would be, naming the field.
pub(super) async fn schedule_preview(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Params(query): Params<PreviewQuery>,
) -> Result<impl IntoResponse, Failure> {
    let count = query.count.map_or(5, Bounded::get) as usize;
    let schedule_type = query.schedule_type.unwrap_or_else(|| "CRON".to_owned());
    let conf = query.schedule_conf.map(|text| text.0).unwrap_or_default();
    let time_zone = query
        .time_zone
        .map_or_else(|| "UTC".to_owned(), |text| text.0);
    let (_, schedule) = crate::jobs::checked_schedule(&schedule_type, &conf, &time_zone)
        .map_err(failure::invalid_definition)?;
    let zone: chrono_tz::Tz = time_zone
        .parse()
        .map_err(|_| invalid_query("time_zone", format!("unknown time zone {time_zone:?}")))?;
    let written = cronbox_api::ScheduleRules {
        starts_at_ms: query.starts_at_ms.map(Bounded::get),
        ends_at_ms: query.ends_at_ms.map(Bounded::get),
        exclude_dates: comma_list(query.exclude_dates),
        jitter_ms: query.jitter_ms.map_or(0, Bounded::get),
        // Overlap decides at dispatch, not when a fire is.
        overlap: cronbox_api::OverlapPolicy::Allow,
        calendars: comma_list(query.calendars),
    };
    // A job not yet saved has no id: its jitter is shown as job 0's.
    let rules = crate::schedule::Rules::parse(&written, zone, 0).map_err(|refused| {
        Failure::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidJob,
            refused.message,
        )
        .field(refused.field)
    })?;
    let rules = state
        .services
        .firing()
        .with_calendars(rules, &caller.tenant, &written.calendars);
    let fires = rules.preview(&schedule, state.services.now(), count);
    Ok(Json(cronbox_api::SchedulePreview {
        fires: fires
            .iter()
            .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .collect(),
        local: fires
            .iter()
            .map(|at| {
                at.with_timezone(&zone)
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, false)
            })
            .collect(),
        time_zone: zone.name().to_owned(),
    }))
}

/// A webhook to check, as a job's `alarm_url` writes it.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub(super) struct AlarmCheckQuery {
    /// The webhook's URL
    #[param(inline)]
    url: Limited<{ crate::jobs::MAX_ALARM_URL_BYTES }>,
}

/// Whether the admin would send a job's alarms to `url` (its allowed
/// networks, `--alarm-allow-nets`): refused as a job's `alarm_url` would
/// be, before any job has it (`cronbox import xxl-job`'s dry run asks).
pub(super) async fn alarm_check(
    State(state): State<Arc<AdminState>>,
    Params(query): Params<AlarmCheckQuery>,
) -> Result<impl IntoResponse, Failure> {
    let url = query.url.0;
    let host = crate::jobs::check_alarm_url(&url, &state.services.limits().alarm_nets)
        .map_err(failure::invalid_definition)?;
    let checked_when_called = host == crate::jobs::AlarmHost::Name;
    Ok(Json(cronbox_api::AlarmCheck {
        url,
        checked_when_called,
    }))
}

/// This file's routes: each one's document, the access it needs and its
/// handler.
pub(super) fn routes(table: &mut Routes) {
    let operation = Operation {
        query: parameters_of::<NextFiresQuery>(),
        ..op(
            "get",
            "/api/v1/jobs/{id}/next-fires",
            "jobs",
            "The next fire times (RFC 3339)",
            None,
            "200",
            array_of(json!({ "type": "string", "format": "date-time" })),
        )
    };
    table.route(operation, VIEWER, next_fires);
    let operation = op(
            "get",
            "/api/v1/schedule-preview",
            "jobs",
            "The next fires of a schedule before a job has it, in UTC and in its time zone (refused as a job's schedule would be, naming the field)",
            None,
            "200",
            schema("SchedulePreview"),
        )
        .with_query(parameters_of::<PreviewQuery>());
    table.route(operation, VIEWER, schedule_preview);
    let operation = op(
        "get",
        "/api/v1/alarm-check",
        "jobs",
        "Whether the admin would send a job's alarms to this webhook (its allowed networks); refused as a job's alarm_url would be",
        None,
        "200",
        schema("AlarmCheck"),
    )
    .with_query(parameters_of::<AlarmCheckQuery>());
    table.route(operation, VIEWER, alarm_check);
}
