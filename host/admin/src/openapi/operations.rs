//! The operations of the document: method, path, tag, summary, request
//! and response schemas (by name, resolved against the derived schemas),
//! query parameters.

use serde_json::{Value, json};

/// One operation: its tag, summary, path parameters, request body schema,
/// success status and response schema.
pub(super) struct Operation {
    pub(super) method: &'static str,
    pub(super) path: &'static str,
    pub(super) tag: &'static str,
    pub(super) summary: &'static str,
    pub(super) body: Option<Value>,
    pub(super) status: &'static str,
    /// The success response's schema; `Null` for a response with no body.
    pub(super) response: Value,
    /// The media type of the success response.
    pub(super) response_media: &'static str,
    /// Whether the body may be left out.
    pub(super) body_optional: bool,
    /// The body's media types and schemas, when not JSON (`body` unused).
    pub(super) body_content: Option<Value>,
    /// Query parameters: name, schema, description.
    pub(super) query: Vec<(&'static str, Value, &'static str)>,
}

impl Operation {
    /// The success response in `media` instead of JSON.
    fn with_media(self, media: &'static str) -> Operation {
        Operation {
            response_media: media,
            ..self
        }
    }

    /// With these query parameters.
    fn with_query(self, query: Vec<(&'static str, Value, &'static str)>) -> Operation {
        Operation { query, ..self }
    }

    /// The body may be left out.
    fn body_optional(self) -> Operation {
        Operation {
            body_optional: true,
            ..self
        }
    }
}

pub(super) fn schema(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn array_of(item: Value) -> Value {
    json!({ "type": "array", "items": item })
}

fn object() -> Value {
    json!({ "type": "object" })
}

/// An integer from `min` to `max`, as the handler checks it.
pub(super) fn integer(min: i64, max: i64) -> Value {
    json!({ "type": "integer", "format": "int64", "minimum": min, "maximum": max })
}

fn text() -> Value {
    json!({ "type": "string" })
}

/// A day as `YYYY-MM-DD`.
fn day() -> Value {
    json!({ "type": "string", "format": "date", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$" })
}

pub(super) fn operations() -> Vec<Operation> {
    let op = |method, path, tag, summary, body, status, response| Operation {
        method,
        path,
        tag,
        summary,
        body,
        status,
        response,
        response_media: "application/json",
        body_optional: false,
        body_content: None,
        query: Vec::new(),
    };
    vec![
        op(
            "get",
            "/metrics",
            "observability",
            "Prometheus metrics (no token)",
            None,
            "200",
            json!({ "type": "string" }),
        )
        .with_media("application/openmetrics-text"),
        op(
            "get",
            "/readyz",
            "observability",
            "Readiness: 200 once the API serves and the database answers, 503 otherwise (no token)",
            None,
            "200",
            schema("Ready"),
        ),
        op(
            "get",
            "/api/v1/openapi.json",
            "observability",
            "This document (no token)",
            None,
            "200",
            object(),
        ),
        op(
            "post",
            "/api/v1/registry",
            "executors",
            "Register or beat an executor (executor token)",
            Some(schema("Registration")),
            "200",
            Value::Null,
        ),
        op(
            "post",
            "/api/v1/registry-remove",
            "executors",
            "Deregister an executor (executor token)",
            Some(schema("Registration")),
            "200",
            Value::Null,
        ),
        op(
            "post",
            "/api/v1/callback",
            "executors",
            "Deliver run results, idempotent by run id (executor token)",
            Some(schema("CallbackBatch")),
            "200",
            Value::Null,
        ),
        op(
            "get",
            "/api/v1/modules/{digest}/content",
            "executors",
            "A module's bytes by sha256 (executor token)",
            None,
            "200",
            json!({ "type": "string", "format": "binary" }),
        )
        .with_media("application/octet-stream"),
        Operation {
            query: vec![
                (
                    "name",
                    text(),
                    "Module name: the upload becomes its next version",
                ),
                (
                    "labels",
                    text(),
                    "Comma-separated labels for the new version",
                ),
            ],
            body_content: Some(json!({
                "application/octet-stream": { "schema": { "type": "string", "format": "binary" } },
                "multipart/form-data": { "schema": {
                    "type": "object",
                    "required": ["module"],
                    "additionalProperties": false,
                    "properties": {
                        "module": { "type": "string", "format": "binary" },
                        "name": { "type": "string" },
                        "labels": { "type": "string" }
                    }
                } }
            })),
            ..op(
                "post",
                "/api/v1/modules",
                "modules",
                "Upload a component (raw body or multipart field `module`), checked before it is stored",
                None,
                "201",
                schema("Uploaded"),
            )
        },
        op(
            "get",
            "/api/v1/modules",
            "modules",
            "The latest version of each named module",
            None,
            "200",
            array_of(schema("TenantModule")),
        ),
        op(
            "get",
            "/api/v1/modules/{name}/versions",
            "modules",
            "A module's versions, newest first",
            None,
            "200",
            array_of(schema("ModuleVersion")),
        ),
        op(
            "post",
            "/api/v1/modules/{name}/rollback",
            "modules",
            "Make an earlier version current again (as a new version)",
            Some(schema("VersionChoice")),
            "201",
            schema("RolledBack"),
        ),
        op(
            "put",
            "/api/v1/modules/{name}/labels/{label}",
            "modules",
            "Put a label on one version",
            Some(schema("VersionChoice")),
            "200",
            array_of(schema("ModuleVersion")),
        ),
        op(
            "post",
            "/api/v1/session",
            "users",
            "Log in (no token): answers the session and its CSRF token, and sets the session cookie",
            Some(schema("Login")),
            "200",
            schema("Session"),
        ),
        op(
            "get",
            "/api/v1/session",
            "users",
            "Who the caller is: user, tenant, role (and a session's CSRF token)",
            None,
            "200",
            schema("Session"),
        ),
        op(
            "delete",
            "/api/v1/session",
            "users",
            "Log out: ends the session on the server and clears its cookie",
            None,
            "200",
            schema("LoggedOut"),
        ),
        op(
            "get",
            "/api/v1/users",
            "users",
            "Users of the caller's tenant (admin; every tenant's for the operator)",
            None,
            "200",
            array_of(schema("User")),
        )
        .with_query(vec![("tenant", text(), "Only this tenant's users (operator)")]),
        op(
            "post",
            "/api/v1/users",
            "users",
            "Create a user (admin, up to its own role; another tenant's: operator)",
            Some(schema("UserSpec")),
            "201",
            schema("User"),
        ),
        op(
            "delete",
            "/api/v1/users/{name}",
            "users",
            "Remove a user with its sessions and tokens (admin)",
            None,
            "200",
            schema("UserChanged"),
        ),
        op(
            "put",
            "/api/v1/users/{name}/password",
            "users",
            "Set a password: one's own from a login session with `current_password` (never with a token), or another user's as its admin; the user's sessions end",
            Some(schema("PasswordChange")),
            "200",
            schema("UserChanged"),
        ),
        op(
            "get",
            "/api/v1/tokens",
            "users",
            "The caller's tokens (an admin: every token of its tenant); never their values",
            None,
            "200",
            array_of(schema("TokenInfo")),
        ),
        op(
            "post",
            "/api/v1/tokens",
            "users",
            "Make a token for the calling user, with its role or a lower one; shown once",
            Some(schema("UserTokenSpec")),
            "201",
            schema("UserTokenCreated"),
        )
        .body_optional(),
        op(
            "delete",
            "/api/v1/tokens/{id}",
            "users",
            "Revoke one of the caller's tokens (an admin: any of its tenant's)",
            None,
            "200",
            schema("TokenRevoked"),
        ),
        op(
            "post",
            "/api/v1/tenants",
            "tenants",
            "Create a tenant and its first token (operator)",
            Some(schema("TenantSpec")),
            "201",
            schema("TenantCreated"),
        ),
        op(
            "get",
            "/api/v1/tenants",
            "tenants",
            "Tenants and their token counts (operator)",
            None,
            "200",
            array_of(schema("Tenant")),
        ),
        op(
            "post",
            "/api/v1/tenants/{name}/tokens",
            "tenants",
            "Add a token to a tenant (operator); shown once",
            Some(schema("TokenSpec")),
            "201",
            schema("TokenCreated"),
        )
        .body_optional(),
        op(
            "delete",
            "/api/v1/tenants/{name}/tokens/{id}",
            "tenants",
            "Revoke a token (operator)",
            None,
            "200",
            schema("TokenRevoked"),
        ),
        op(
            "get",
            "/api/v1/tenants/{name}/quotas",
            "tenants",
            "A tenant's quotas: each limit, whether the tenant has its own, and its use (the operator, or the tenant itself)",
            None,
            "200",
            schema("TenantQuotas"),
        ),
        op(
            "put",
            "/api/v1/tenants/{name}/quotas",
            "tenants",
            "Replace a tenant's own quotas (operator): those named replace the defaults, the others follow them",
            Some(schema("QuotaSettings")),
            "200",
            schema("TenantQuotas"),
        ),
        op(
            "get",
            "/api/v1/secrets",
            "secrets",
            "The caller's secrets (every tenant's for the operator): names, dates and the jobs referencing each; never values (admin)",
            None,
            "200",
            array_of(schema("Secret")),
        ),
        op(
            "put",
            "/api/v1/secrets/{name}",
            "secrets",
            "Set a secret of the caller's tenant, new or replaced (write-only: no route answers its value)",
            Some(schema("SecretValue")),
            "200",
            schema("Secret"),
        ),
        Operation {
            query: vec![(
                "force",
                json!({ "type": "boolean" }),
                "Delete even while jobs reference it (their runs then read nothing under its name)",
            )],
            ..op(
                "delete",
                "/api/v1/secrets/{name}",
                "secrets",
                "Delete a secret (409 while jobs reference it, unless force=true)",
                None,
                "200",
                schema("SecretDeleted"),
            )
        },
        op(
            "get",
            "/api/v1/tenants/{name}/http-ceiling",
            "tenants",
            "The origins a tenant's jobs may be granted (the operator, or the tenant itself)",
            None,
            "200",
            schema("HttpCeiling"),
        ),
        op(
            "put",
            "/api/v1/tenants/{name}/http-ceiling",
            "tenants",
            "Replace a tenant's HTTP ceiling (operator): each job's http_allow must lie within it",
            Some(schema("HttpCeiling")),
            "200",
            schema("HttpCeiling"),
        ),
        op(
            "get",
            "/api/v1/groups",
            "groups",
            "Executor groups: all, with addresses and tenants, for the operator; the groups the caller's tenant may use, without them, for anyone else",
            None,
            "200",
            array_of(schema("Group")),
        ),
        op(
            "get",
            "/api/v1/executors",
            "groups",
            "Registered executors with their group, last heartbeat and whether they count as alive (operator only)",
            None,
            "200",
            array_of(schema("Executor")),
        ),
        op(
            "put",
            "/api/v1/groups/{name}",
            "groups",
            "Create or replace an executor group (operator)",
            Some(schema("GroupSpec")),
            "200",
            schema("Group"),
        ),
        op(
            "put",
            "/api/v1/groups/{name}/tenants",
            "groups",
            "Grant an executor group to tenants, replacing its grants; `*` is every tenant (operator)",
            Some(schema("GroupTenants")),
            "200",
            schema("Group"),
        ),
        op(
            "post",
            "/api/v1/jobs",
            "jobs",
            "Create a job (stopped)",
            Some(schema("JobSpec")),
            "201",
            schema("Job"),
        ),
        op(
            "post",
            "/api/v1/jobs/batch",
            "jobs",
            "Create up to 1,000 jobs at once, all or none (an import); a refusal names the job's place, as field jobs[N].FIELD",
            Some(schema("JobBatch")),
            "201",
            schema("JobsCreated"),
        ),
        Operation {
            query: vec![
                ("group", text(), "Jobs of this executor group"),
                ("name", text(), "Jobs with exactly this name"),
                ("search", text(), "Jobs whose name contains this text, in any letter case"),
                ("module", text(), "Jobs following or pinned to this named module"),
                (
                    "schedule_type",
                    schema("ScheduleType"),
                    "Jobs of this schedule type",
                ),
                (
                    "enabled",
                    json!({ "type": "boolean" }),
                    "Started (true) or stopped (false) jobs",
                ),
                (
                    "after",
                    integer(i64::MIN, i64::MAX),
                    "Ids above this one: the last id of the previous page",
                ),
                (
                    "limit",
                    integer(1, 1000),
                    "Jobs per page (default and most 1000)",
                ),
            ],
            ..op(
                "get",
                "/api/v1/jobs",
                "jobs",
                "A page of the caller's jobs in id order, filtered",
                None,
                "200",
                array_of(schema("Job")),
            )
        },
        op(
            "get",
            "/api/v1/jobs/{id}",
            "jobs",
            "A job",
            None,
            "200",
            schema("Job"),
        ),
        op(
            "put",
            "/api/v1/jobs/{id}",
            "jobs",
            "Replace a job's definition",
            Some(schema("JobSpec")),
            "200",
            schema("Job"),
        ),
        op(
            "delete",
            "/api/v1/jobs/{id}",
            "jobs",
            "Delete a job (its runs stay); refused while it is another job's child",
            None,
            "200",
            schema("Deleted"),
        ),
        op(
            "post",
            "/api/v1/jobs/{id}/start",
            "jobs",
            "Start firing on schedule",
            None,
            "200",
            schema("Job"),
        ),
        op(
            "post",
            "/api/v1/jobs/{id}/stop",
            "jobs",
            "Stop firing; runs waiting to be dispatched (fires written ahead, retries) end as cancelled",
            None,
            "200",
            schema("Job"),
        ),
        op(
            "post",
            "/api/v1/jobs/{id}/backfill",
            "jobs",
            "Run the job's schedule over a past range (from_ms, to_ms], as runs of kind backfill, per_second a second (each instant of a job once)",
            Some(schema("BackfillRequest")),
            "201",
            schema("Backfill"),
        ),
        op(
            "get",
            "/api/v1/calendars",
            "jobs",
            "The caller's tenant's shared calendars (every tenant's for the operator)",
            None,
            "200",
            array_of(schema("Calendar")),
        ),
        op(
            "put",
            "/api/v1/calendars/{name}",
            "jobs",
            "Set a shared calendar of the caller's tenant: dates its jobs that name it (schedule_rules.calendars) do not fire on",
            Some(schema("CalendarDates")),
            "200",
            schema("Calendar"),
        ),
        op(
            "delete",
            "/api/v1/calendars/{name}",
            "jobs",
            "Delete a shared calendar (jobs naming it fire on its dates from then on)",
            None,
            "200",
            schema("Calendar"),
        ),
        op(
            "get",
            "/api/v1/backfills",
            "jobs",
            "The caller's backfills, newest first, at most 100",
            None,
            "200",
            array_of(schema("Backfill")),
        )
        .with_query(vec![(
            "job",
            integer(i64::MIN, i64::MAX),
            "Only this job's",
        )]),
        op(
            "get",
            "/api/v1/backfills/{id}",
            "jobs",
            "A backfill and how far it has gone",
            None,
            "200",
            schema("Backfill"),
        ),
        op(
            "delete",
            "/api/v1/backfills/{id}",
            "jobs",
            "Cancel a backfill: no more of its runs are written",
            None,
            "200",
            schema("Backfill"),
        ),
        op(
            "post",
            "/api/v1/jobs/{id}/pause",
            "jobs",
            "Pause with a note: as a stop, recording who, why and until when; with until_ms it resumes by itself at its first fire after it",
            Some(schema("PauseRequest")),
            "200",
            schema("Job"),
        )
        .body_optional(),
        op(
            "post",
            "/api/v1/jobs/{id}/kill",
            "jobs",
            "Kill every run of the job: running, queued and held runs on executors are stopped, runs waiting to be dispatched (retries included) end as cancelled",
            None,
            "200",
            schema("JobKilled"),
        ),
        op(
            "post",
            "/api/v1/jobs/{id}/trigger",
            "jobs",
            "Run now, with an optional parameter; kind `api` (default) or `manual` (a person, through the CLI or console); addresses (operator only, executors of the job's group only)",
            Some(schema("TriggerRequest")),
            "202",
            schema("Triggered"),
        )
        .body_optional(),
        op(
            "get",
            "/api/v1/dashboard",
            "runs",
            "Runs by hour (24 h) and by day (30 days), success rate, start lateness, executors online, runs in progress, the jobs failing most: the caller's tenant (every tenant's for the operator)",
            None,
            "200",
            schema("Dashboard"),
        ),
        op(
            "get",
            "/api/v1/schedule-preview",
            "jobs",
            "The next fires of a schedule before a job has it, in UTC and in its time zone (refused as a job's schedule would be, naming the field)",
            None,
            "200",
            schema("SchedulePreview"),
        )
        .with_query(vec![
            (
                "schedule_type",
                text(),
                "CRON (default), FIX_RATE, FIX_DELAY, ONE_SHOT or NONE (another is refused, 422)",
            ),
            (
                "schedule_conf",
                json!({ "type": "string", "maxLength": crate::jobs::MAX_SCHEDULE_CONF_BYTES }),
                "The expression, interval or instant",
            ),
            (
                "time_zone",
                json!({ "type": "string", "maxLength": crate::jobs::MAX_TIME_ZONE_BYTES }),
                "An IANA time zone (default UTC)",
            ),
            (
                "starts_at_ms",
                integer(i64::MIN, i64::MAX),
                "No fire before this instant",
            ),
            (
                "ends_at_ms",
                integer(i64::MIN, i64::MAX),
                "No fire after this instant",
            ),
            (
                "exclude_dates",
                text(),
                "Local dates (YYYY-MM-DD, comma separated) without a fire",
            ),
            (
                "calendars",
                text(),
                "Names of the tenant's shared calendars (comma separated) whose dates are skipped",
            ),
            (
                "jitter_ms",
                integer(0, crate::schedule::MAX_JITTER_MS),
                "Each fire shown up to this many ms late, as its run would be written",
            ),
            (
                "count",
                integer(1, crate::api::MAX_NEXT_FIRES),
                "How many fire times (default 5, at most 100)",
            ),
        ]),
        Operation {
            query: vec![(
                "count",
                integer(1, crate::api::MAX_NEXT_FIRES),
                "How many fire times (default 5, at most 100)",
            )],
            ..op(
                "get",
                "/api/v1/jobs/{id}/next-fires",
                "jobs",
                "The next fire times (RFC 3339)",
                None,
                "200",
                array_of(json!({ "type": "string", "format": "date-time" })),
            )
        },
        Operation {
            query: vec![
                (
                    "after",
                    integer(i64::MIN, i64::MAX),
                    "Runs with a larger id: the last id of the previous page",
                ),
                (
                    "limit",
                    integer(1, 1000),
                    "Runs per page (default and most 1000)",
                ),
            ],
            ..op(
                "get",
                "/api/v1/jobs/{id}/runs",
                "runs",
                "A page of a job's runs, oldest first",
                None,
                "200",
                array_of(schema("Run")),
            )
        },
        op(
            "get",
            "/api/v1/jobs/{id}/state",
            "jobs",
            "A job's durable state",
            None,
            "200",
            schema("JobStateBody"),
        ),
        op(
            "put",
            "/api/v1/jobs/{id}/state",
            "jobs",
            "Replace a job's durable state (operator)",
            Some(schema("StateEdit")),
            "200",
            schema("JobStateBody"),
        ),
        Operation {
            query: vec![
                ("job", integer(i64::MIN, i64::MAX), "Runs of this job"),
                ("group", text(), "Runs of the jobs of this executor group"),
                ("status", schema("RunStatus"), "Runs in this status"),
                (
                    "kind",
                    json!({ "type": "string",
                            "enum": ["schedule", "manual", "api", "retry", "parent", "misfire", "backfill"] }),
                    "Runs of this trigger kind",
                ),
                (
                    "from_ms",
                    integer(i64::MIN, i64::MAX),
                    "Scheduled at or after (ms since the epoch)",
                ),
                (
                    "to_ms",
                    integer(i64::MIN, i64::MAX),
                    "Scheduled before (ms since the epoch)",
                ),
                (
                    "before",
                    integer(i64::MIN, i64::MAX),
                    "Runs with a smaller id: the previous page's next_before",
                ),
                ("limit", integer(1, 1000), "Page size, 1 to 1000 (default 100)"),
            ],
            ..op(
                "get",
                "/api/v1/runs",
                "runs",
                "Runs by filter, newest first, paged; a page reads at most the 50,000 newest runs (of the tenant, or of the job) for its other filters, so it may hold fewer than limit, even none, with next_before to go on from",
                None,
                "200",
                schema("RunPage"),
            )
        },
        op(
            "get",
            "/api/v1/runs/{id}",
            "runs",
            "A run",
            None,
            "200",
            schema("Run"),
        ),
        op(
            "post",
            "/api/v1/runs/{id}/kill",
            "runs",
            "Kill a running run (forwarded to its executor)",
            None,
            "200",
            schema("RunKilled"),
        ),
        Operation {
            query: vec![
                ("offset", integer(0, i64::MAX), "First line (default 0)"),
                (
                    "limit",
                    integer(1, crate::api::MAX_LOG_PAGE),
                    "Lines (default 1000, at most 5000)",
                ),
            ],
            ..op(
                "get",
                "/api/v1/runs/{id}/log",
                "runs",
                "A run's log by line offset, live while it runs",
                None,
                "200",
                schema("LogResponse"),
            )
        },
        Operation {
            query: vec![
                (
                    "from",
                    day(),
                    "First day, YYYY-MM-DD (default: a week before `to`)",
                ),
                ("to", day(), "Last day, YYYY-MM-DD (default: today, UTC)"),
            ],
            ..op(
                "get",
                "/api/v1/reports",
                "reports",
                "Run counts per day and their totals",
                None,
                "200",
                schema("Report"),
            )
        },
    ]
}
