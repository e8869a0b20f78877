//! The OpenAPI 3.0 document of the admin's HTTP API, served at
//! `/api/v1/openapi.json`. A test checks that it lists exactly the routes
//! the router serves and that it parses as OpenAPI.

use serde_json::{Value, json};

/// One operation: its tag, summary, path parameters, request body schema,
/// success status and response schema.
struct Operation {
    method: &'static str,
    path: &'static str,
    tag: &'static str,
    summary: &'static str,
    body: Option<Value>,
    status: &'static str,
    response: Value,
    query: &'static [(&'static str, &'static str, &'static str)],
}

fn schema(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn array_of(item: Value) -> Value {
    json!({ "type": "array", "items": item })
}

fn object() -> Value {
    json!({ "type": "object" })
}

fn operations() -> Vec<Operation> {
    let op = |method, path, tag, summary, body, status, response| Operation {
        method,
        path,
        tag,
        summary,
        body,
        status,
        response,
        query: &[],
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
        ),
        op(
            "get",
            "/readyz",
            "observability",
            "Readiness: 200 once the API serves and the database answers, 503 otherwise (no token)",
            None,
            "200",
            json!({ "type": "object", "properties": {
                "ready": { "type": "boolean" },
                "instance": { "type": "string", "description": "This admin instance's name, the lease owner of the runs it holds" }
            } }),
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
            object(),
        ),
        op(
            "post",
            "/api/v1/registry-remove",
            "executors",
            "Deregister an executor (executor token)",
            Some(schema("Registration")),
            "200",
            object(),
        ),
        op(
            "post",
            "/api/v1/callback",
            "executors",
            "Deliver run results, idempotent by run id (executor token)",
            Some(schema("CallbackBatch")),
            "200",
            object(),
        ),
        op(
            "get",
            "/api/v1/modules/{digest}/content",
            "executors",
            "A module's bytes by sha256 (executor token)",
            None,
            "200",
            json!({ "type": "string", "format": "binary" }),
        ),
        Operation {
            query: &[
                (
                    "name",
                    "string",
                    "Module name: the upload becomes its next version",
                ),
                (
                    "labels",
                    "string",
                    "Comma-separated labels for the new version",
                ),
            ],
            ..op(
                "post",
                "/api/v1/modules",
                "modules",
                "Upload a component (raw body or multipart field `module`), checked before it is stored",
                Some(json!({ "type": "string", "format": "binary" })),
                "201",
                schema("Upload"),
            )
        },
        op(
            "get",
            "/api/v1/modules",
            "modules",
            "The latest version of each named module",
            None,
            "200",
            array_of(schema("ModuleVersion")),
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
            object(),
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
            "/api/v1/tenants",
            "tenants",
            "Create a tenant and its first token (operator)",
            Some(
                json!({ "type": "object", "required": ["name"], "properties": { "name": { "type": "string" } } }),
            ),
            "201",
            schema("NewToken"),
        ),
        op(
            "get",
            "/api/v1/tenants",
            "tenants",
            "Tenants and their token counts (operator)",
            None,
            "200",
            array_of(object()),
        ),
        op(
            "post",
            "/api/v1/tenants/{name}/tokens",
            "tenants",
            "Add a token to a tenant (operator); shown once",
            Some(json!({ "type": "object", "properties": { "label": { "type": "string" } } })),
            "201",
            schema("NewToken"),
        ),
        op(
            "delete",
            "/api/v1/tenants/{name}/tokens/{id}",
            "tenants",
            "Revoke a token (operator)",
            None,
            "200",
            object(),
        ),
        op(
            "get",
            "/api/v1/groups",
            "groups",
            "Executor groups",
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
            array_of(json!({ "type": "object", "properties": {
                "group": { "type": "string" },
                "address": { "type": "string" },
                "last_beat_ms": { "type": "integer" },
                "alive": { "type": "boolean" }
            } })),
        ),
        op(
            "put",
            "/api/v1/groups/{name}",
            "groups",
            "Create or replace an executor group (operator)",
            Some(schema("Group")),
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
        Operation {
            query: &[
                ("group", "string", "Jobs of this executor group"),
                ("name", "string", "Jobs with exactly this name"),
                (
                    "enabled",
                    "boolean",
                    "Started (true) or stopped (false) jobs",
                ),
                (
                    "after",
                    "integer",
                    "Ids above this one: the last id of the previous page",
                ),
                ("limit", "integer", "Jobs per page (default and most 1000)"),
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
            object(),
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
            "/api/v1/jobs/{id}/kill",
            "jobs",
            "Kill every run of the job: running, queued and held runs on executors are stopped, runs waiting to be dispatched (retries included) end as cancelled",
            None,
            "200",
            json!({ "type": "object", "properties": {
                "job_id": { "type": "integer" },
                "cancelled": array_of(json!({ "type": "integer" })),
                "killed": array_of(json!({ "type": "integer" })),
                "unreachable": array_of(json!({ "type": "string" }))
            } }),
        ),
        op(
            "post",
            "/api/v1/jobs/{id}/trigger",
            "jobs",
            "Run now, with an optional parameter; kind `api` (default) or `manual` (a person, through the CLI or console); addresses (operator only, executors of the job's group only)",
            Some(json!({ "type": "object", "properties": {
                "param": { "type": "string" },
                "addresses": array_of(json!({ "type": "string" })),
                "kind": { "type": "string", "enum": ["api", "manual"] }
            } })),
            "202",
            json!({ "type": "object", "properties": { "run_id": { "type": "integer" } } }),
        ),
        Operation {
            query: &[(
                "count",
                "integer",
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
        op(
            "get",
            "/api/v1/jobs/{id}/runs",
            "runs",
            "Every run of a job, oldest first",
            None,
            "200",
            array_of(schema("Run")),
        ),
        op(
            "get",
            "/api/v1/jobs/{id}/state",
            "jobs",
            "A job's durable state",
            None,
            "200",
            schema("JobState"),
        ),
        op(
            "put",
            "/api/v1/jobs/{id}/state",
            "jobs",
            "Replace a job's durable state (operator)",
            Some(schema("JobState")),
            "200",
            schema("JobState"),
        ),
        Operation {
            query: &[
                ("job", "integer", "Runs of this job"),
                ("group", "string", "Runs of the jobs of this executor group"),
                (
                    "status",
                    "string",
                    "pending, dispatched, success, failed or cancelled",
                ),
                (
                    "from_ms",
                    "integer",
                    "Scheduled at or after (ms since the epoch)",
                ),
                ("to_ms", "integer", "Scheduled before (ms since the epoch)"),
                (
                    "before",
                    "integer",
                    "Runs with a smaller id: the previous page's next_before",
                ),
                ("limit", "integer", "Page size, 1 to 1000 (default 100)"),
            ],
            ..op(
                "get",
                "/api/v1/runs",
                "runs",
                "Runs by filter, newest first, paged",
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
            object(),
        ),
        Operation {
            query: &[
                ("offset", "integer", "First line (default 0)"),
                ("limit", "integer", "Lines (default 1000, at most 5000)"),
            ],
            ..op(
                "get",
                "/api/v1/runs/{id}/log",
                "runs",
                "A run's log by line offset, live while it runs",
                None,
                "200",
                schema("LogPage"),
            )
        },
        Operation {
            query: &[
                (
                    "from",
                    "string",
                    "First day, YYYY-MM-DD (default: a week before `to`)",
                ),
                ("to", "string", "Last day, YYYY-MM-DD (default: today, UTC)"),
            ],
            ..op(
                "get",
                "/api/v1/reports",
                "reports",
                "Run counts per day and their totals",
                None,
                "200",
                object(),
            )
        },
    ]
}

fn schemas() -> Value {
    let string = json!({ "type": "string" });
    let integer = json!({ "type": "integer", "format": "int64" });
    json!({
        "Error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {
                    "type": "string",
                    "enum": cronbox_protocol::ErrorCode::ALL.iter().map(|code| code.as_str()).collect::<Vec<_>>()
                },
                "message": string,
                "field": { "type": "string", "description": "The request field at fault, when one is" }
            }
        },
        "Registration": {
            "type": "object",
            "required": ["group", "address"],
            "properties": { "group": string, "address": string }
        },
        "CallbackBatch": {
            "type": "object",
            "required": ["results"],
            "properties": { "results": array_of(object()) }
        },
        "Upload": {
            "type": "object",
            "properties": {
                "digest": string, "size": integer, "name": string, "version": integer,
                "labels": array_of(string.clone()), "jobs_moved": integer
            }
        },
        "ModuleVersion": {
            "type": "object",
            "properties": {
                "tenant": string, "name": string, "version": integer, "digest": string,
                "labels": array_of(string.clone()), "note": string, "created_at_ms": integer
            }
        },
        "VersionChoice": {
            "type": "object",
            "required": ["version"],
            "properties": { "version": integer }
        },
        "NewToken": {
            "type": "object",
            "properties": { "name": string, "tenant": string, "token_id": integer, "token": string }
        },
        "Group": {
            "type": "object",
            "required": ["address_type"],
            "properties": {
                "name": string,
                "address_type": { "type": "string", "enum": ["AUTO", "MANUAL"] },
                "addresses": array_of(string.clone())
            }
        },
        "JobSpec": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": string,
                "group": string,
                "module_digest": { "type": "string", "description": "sha256 of an uploaded module" },
                "module": { "type": "string", "description": "NAME (follow the latest version) or NAME@VERSION (pin)" },
                "schedule_type": { "type": "string", "enum": ["CRON", "FIX_RATE", "FIX_DELAY", "ONE_SHOT", "NONE"] },
                "schedule_conf": string,
                "time_zone": string,
                "misfire": { "type": "string", "enum": ["DO_NOTHING", "FIRE_ONCE_NOW"] },
                "misfire_threshold_ms": integer,
                "route": { "type": "string", "enum": [
                    "FIRST", "LAST", "ROUND", "RANDOM", "CONSISTENT_HASH", "LEAST_FREQUENTLY_USED",
                    "LEAST_RECENTLY_USED", "FAILOVER", "BUSYOVER", "SHARDING_BROADCAST"
                ] },
                "block_strategy": { "type": "string", "enum": ["SERIAL_EXECUTION", "DISCARD_LATER", "COVER_EARLY", "CONCURRENT"] },
                "max_concurrency": integer,
                "timeout_ms": integer,
                "fuel": integer,
                "memory_bytes": integer,
                "retry_count": integer,
                "retry_interval_ms": integer,
                "children": array_of(integer.clone()),
                "param": string,
                "alarm_url": string,
                "fresh_instance": { "type": "boolean", "description": "a new instance (init, execute, destroy) for every run" }
            }
        },
        "Job": {
            "allOf": [schema("JobSpec"), {
                "type": "object",
                "properties": {
                    "id": integer, "tenant": string, "enabled": { "type": "boolean" },
                    "next_fire_at_ms": integer, "module_name": string, "module_version": integer
                }
            }]
        },
        "JobState": {
            "type": "object",
            "required": ["state"],
            "properties": {
                "job_id": integer,
                "state": { "type": "object", "additionalProperties": { "type": "string" } }
            }
        },
        "Run": {
            "type": "object",
            "properties": {
                "id": integer, "tenant": string, "job_id": integer,
                "kind": { "type": "string", "enum": ["schedule", "manual", "api", "retry", "parent", "misfire"] },
                "scheduled_at_ms": integer, "shard_index": integer, "shard_total": integer,
                "attempt": integer, "param": string,
                "status": { "type": "string", "enum": ["pending", "dispatched", "success", "failed", "cancelled"] },
                "executor": string, "module_digest": string, "outcome": string, "code": integer,
                "message": string, "created_at_ms": integer, "dispatched_at_ms": integer,
                "started_at_ms": integer, "finished_at_ms": integer,
                "alarm_status": { "type": "string", "enum": ["none", "due", "sending", "sent", "failed", "not_configured"] },
                "alarm_message": string
            }
        },
        "RunPage": {
            "type": "object",
            "properties": {
                "runs": array_of(schema("Run")),
                "next_before": { "type": "integer", "nullable": true }
            }
        },
        "LogPage": {
            "type": "object",
            "properties": {
                "run_id": integer, "lines": array_of(object()),
                "next_offset": integer, "finished": { "type": "boolean" }
            }
        }
    })
}

/// The document.
pub(crate) fn document() -> Value {
    let mut paths = serde_json::Map::new();
    for operation in operations() {
        let mut parameters: Vec<Value> = operation
            .path
            .split('/')
            .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| {
                let kind = if name == "id" { "integer" } else { "string" };
                json!({ "name": name, "in": "path", "required": true, "schema": { "type": kind } })
            })
            .collect();
        parameters.extend(operation.query.iter().map(|(name, kind, description)| {
            json!({ "name": name, "in": "query", "required": false,
                    "description": description, "schema": { "type": kind } })
        }));
        let security = match operation.tag {
            "observability" => json!([]),
            "executors" => json!([{ "executorToken": [] }]),
            _ => json!([{ "apiToken": [] }]),
        };
        let mut entry = json!({
            "tags": [operation.tag],
            "summary": operation.summary,
            "operationId": format!("{}{}", operation.method, operation.path.replace(['/', '{', '}', '-', '.'], "_")),
            "parameters": parameters,
            "security": security,
            "responses": {
                operation.status: {
                    "description": "Success",
                    "content": { "application/json": { "schema": operation.response } }
                },
                "default": {
                    "description": "An error: 400 invalid input (naming the field), 401 missing or wrong token, 403 operator only, 404 unknown or another tenant's, 409 conflict, 413 too large",
                    "content": { "application/json": { "schema": schema("Error") } }
                }
            }
        });
        if let Some(body) = operation.body {
            entry["requestBody"] = json!({
                "required": true,
                "content": { "application/json": { "schema": body } }
            });
        }
        let item = paths
            .entry(operation.path.to_owned())
            .or_insert_with(|| json!({}));
        item[operation.method] = entry;
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "cronbox admin API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Jobs, modules, runs, tenants and reports of a cronbox admin. Errors are JSON bodies {code, message, field}."
        },
        "paths": paths,
        "components": {
            "schemas": schemas(),
            "securitySchemes": {
                "apiToken": { "type": "http", "scheme": "bearer", "description": "A tenant token, or the operator token" },
                "executorToken": { "type": "http", "scheme": "bearer", "description": "The token shared with executors" }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_lists_exactly_the_routes_served() {
        let mut served: Vec<(String, String)> = crate::api::route_table()
            .into_iter()
            .map(|(method, path)| (method.to_owned(), path.to_owned()))
            .collect();
        served.sort();
        let document = document();
        let mut documented: Vec<(String, String)> = document["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .unwrap()
                    .keys()
                    .map(|method| (method.clone(), path.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        documented.sort();
        assert_eq!(documented, served);
    }

    #[test]
    fn the_document_is_valid_openapi() {
        let text = serde_json::to_string(&document()).unwrap();
        let parsed: openapiv3::OpenAPI = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed.openapi, "3.0.3");
        // Every schema reference resolves.
        let schemas = parsed.components.unwrap().schemas;
        for reference in text.split("#/components/schemas/").skip(1) {
            let name = reference.split('"').next().unwrap();
            assert!(schemas.contains_key(name), "unresolved $ref {name}");
        }
    }
}
