//! Runs, their logs, reports and the dashboard.

use super::*;

pub(super) fn operations() -> Vec<Operation> {
    vec![
        op(
            "get",
            "/api/v1/dashboard",
            "runs",
            "Runs by hour (24 h) and by day (30 days), success rate, start lateness, executors online, runs in progress, the jobs failing most: the caller's tenant (every tenant's for the operator)",
            None,
            "200",
            schema("Dashboard"),
        ),
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
                (
                    "limit",
                    integer(1, 1000),
                    "Page size, 1 to 1000 (default 100)",
                ),
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
