//! The OpenAPI 3.1 document of the admin's HTTP API, served at
//! `/api/v1/openapi.json`: the operations from the route table (each
//! written beside its handlers, the same entry that routes it), the
//! schemas derived (`utoipa::ToSchema`) from the very types the handlers
//! read and answer. Tests check that it lists exactly the routes
//! the router serves, that every reference resolves and that it parses as
//! OpenAPI.

pub(super) mod operation;

use operation::schema;

use serde_json::{Value, json};
use utoipa::ToSchema;
use utoipa::openapi::{RefOr, schema::Schema};

/// Adds `T`'s schema and those it refers to.
fn collect<T: ToSchema>(all: &mut Vec<(String, RefOr<Schema>)>) {
    all.push((T::name().into_owned(), T::schema()));
    T::schemas(all);
}

/// Every schema of the document, derived from the types the handlers
/// read and answer.
fn schemas() -> Value {
    use crate::api::bodies::*;
    let mut all = Vec::new();
    // Requests.
    collect::<crate::jobs::JobSpec>(&mut all);
    collect::<cronbox_api::JobBatch>(&mut all);
    collect::<GroupSpec>(&mut all);
    collect::<GroupTenants>(&mut all);
    collect::<TriggerRequest>(&mut all);
    collect::<StateEdit>(&mut all);
    collect::<VersionChoice>(&mut all);
    collect::<TenantSpec>(&mut all);
    collect::<TokenSpec>(&mut all);
    collect::<cronbox_api::Login>(&mut all);
    collect::<cronbox_api::UserSpec>(&mut all);
    collect::<cronbox_api::PasswordChange>(&mut all);
    collect::<cronbox_api::UserTokenSpec>(&mut all);
    collect::<cronbox_api::QuotaSettings>(&mut all);
    collect::<cronbox_api::HttpCeiling>(&mut all);
    collect::<cronbox_api::HttpLimits>(&mut all);
    collect::<cronbox_api::SecretValue>(&mut all);
    collect::<cronbox_api::Secret>(&mut all);
    collect::<cronbox_api::SecretDeleted>(&mut all);
    // Stored rows, as answered.
    collect::<crate::store::JobRow>(&mut all);
    collect::<cronbox_api::JobListed>(&mut all);
    collect::<crate::store::RunRow>(&mut all);
    collect::<crate::store::ModuleVersion>(&mut all);
    // Other answers.
    collect::<Ready>(&mut all);
    collect::<Group>(&mut all);
    collect::<Executor>(&mut all);
    collect::<Triggered>(&mut all);
    collect::<Deleted>(&mut all);
    collect::<cronbox_api::JobsCreated>(&mut all);
    collect::<JobStateBody>(&mut all);
    collect::<JobKilled>(&mut all);
    collect::<RunKilled>(&mut all);
    collect::<Uploaded>(&mut all);
    collect::<RolledBack>(&mut all);
    collect::<TenantModule>(&mut all);
    collect::<RunPage>(&mut all);
    collect::<Report>(&mut all);
    collect::<Tenant>(&mut all);
    collect::<TenantCreated>(&mut all);
    collect::<TokenCreated>(&mut all);
    collect::<TokenRevoked>(&mut all);
    collect::<cronbox_api::SchedulePreview>(&mut all);
    collect::<cronbox_api::AlarmCheck>(&mut all);
    collect::<cronbox_api::PauseRequest>(&mut all);
    collect::<cronbox_api::BackfillRequest>(&mut all);
    collect::<cronbox_api::CalendarDates>(&mut all);
    collect::<cronbox_api::Calendar>(&mut all);
    collect::<cronbox_api::Workflow>(&mut all);
    collect::<cronbox_api::WorkflowSpec>(&mut all);
    collect::<cronbox_api::WorkflowRun>(&mut all);
    collect::<cronbox_api::WorkflowRunRequest>(&mut all);
    collect::<cronbox_api::ItemRun>(&mut all);
    collect::<cronbox_api::WorkflowBackfillRequest>(&mut all);
    collect::<cronbox_api::WorkflowBackfill>(&mut all);
    collect::<cronbox_api::Backfill>(&mut all);
    collect::<cronbox_api::Dashboard>(&mut all);
    collect::<cronbox_api::Session>(&mut all);
    collect::<cronbox_api::LoggedOut>(&mut all);
    collect::<cronbox_api::User>(&mut all);
    collect::<cronbox_api::UserChanged>(&mut all);
    collect::<cronbox_api::TokenInfo>(&mut all);
    collect::<cronbox_api::UserTokenCreated>(&mut all);
    collect::<cronbox_api::TenantQuotas>(&mut all);
    collect::<cronbox_api::AuditPage>(&mut all);
    collect::<cronbox_api::ExecutorTokenSpec>(&mut all);
    collect::<cronbox_api::ExecutorToken>(&mut all);
    collect::<cronbox_api::ExecutorTokenIssued>(&mut all);
    collect::<cronbox_api::ExecutorTokenRotation>(&mut all);
    collect::<cronbox_api::ExecutorTokenRevoked>(&mut all);
    collect::<cronbox_api::AuditEntry>(&mut all);
    collect::<cronbox_protocol::LogResponse>(&mut all);
    collect::<cronbox_protocol::ApiError>(&mut all);
    // The executors' side.
    collect::<cronbox_protocol::Registration>(&mut all);
    collect::<cronbox_protocol::CallbackBatch>(&mut all);
    let map: serde_json::Map<String, Value> = all
        .into_iter()
        .map(|(name, schema)| (name, serde_json::to_value(schema).unwrap_or_default()))
        .collect();
    Value::Object(map)
}

/// The document.
pub(crate) fn document() -> Value {
    let mut paths = serde_json::Map::new();
    for super::routes::Route { operation, access } in super::route_table() {
        let mut parameters: Vec<Value> = operation
            .path
            .split('/')
            .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| {
                let kind = if name == "id" {
                    operation::integer(i64::MIN, i64::MAX)
                } else {
                    json!({ "type": "string" })
                };
                json!({ "name": name, "in": "path", "required": true, "schema": kind })
            })
            .collect();
        parameters.extend(operation.query.parameters);
        let login = operation.method == "post" && operation.path == "/api/v1/session";
        let security = match operation.tag {
            "observability" => json!([]),
            _ if login => json!([]),
            "executors" => json!([{ "executorToken": [] }]),
            _ => json!([{ "apiToken": [] }, { "sessionCookie": [] }]),
        };
        let mut entry = json!({
            "tags": [operation.tag],
            "summary": operation.summary,
            "operationId": format!("{}{}", operation.method, operation.path.replace(['/', '{', '}', '-', '.'], "_")),
            "parameters": parameters,
            "security": security,
            // Who may call it, from the router's own table: `none`,
            // `executor`, `any` (any user caller, on itself), or the
            // least role (viewer, developer, admin, operator).
            "x-required-role": access.name(),
            "responses": {
                operation.status: if operation.response.is_null() {
                    json!({ "description": "Success, with no body" })
                } else {
                    json!({
                        "description": "Success",
                        "content": { operation.response_media: { "schema": operation.response } }
                    })
                },
                "default": {
                    "description": "An error: 400 a request not of the documented shape (the field named), 401 missing or wrong token or session, 403 a role the caller lacks (or a session's change without its CSRF token) or over a quota, 404 unknown or another tenant's, 405 a method the path does not serve, 409 conflict, 413 too large, 415 not JSON, 429 too many failed logins (Retry-After), 503 uploads or password checks busy (Retry-After), 422 of the documented shape but refused for what it says (a cron expression that does not parse, an unknown time zone, bytes that are not a job component: the field named)",
                    "content": { "application/json": { "schema": schema("ApiError") } }
                }
            }
        });
        let content = match (operation.body_content, operation.body) {
            (Some(content), _) => Some(content),
            (None, Some(body)) => Some(json!({ "application/json": { "schema": body } })),
            (None, None) => None,
        };
        if let Some(content) = content {
            entry["requestBody"] = json!({
                "required": !operation.body_optional,
                "content": content
            });
        }
        let item = paths
            .entry(operation.path.to_owned())
            .or_insert_with(|| json!({}));
        item[operation.method] = entry;
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "cronbox admin API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Jobs, modules, runs, tenants and reports of a cronbox admin. Errors are JSON bodies {code, message, field}."
        },
        "paths": paths,
        "components": {
            "schemas": schemas(),
            "securitySchemes": {
                "apiToken": { "type": "http", "scheme": "bearer", "description": "A user's or a tenant's token (with its role), or the operator token" },
                "sessionCookie": { "type": "apiKey", "in": "cookie", "name": "cronbox_session", "description": "A logged-in session (POST /api/v1/session); its state-changing requests carry the session's CSRF token in the X-CSRF-Token header" },
                "executorToken": { "type": "http", "scheme": "bearer", "description": "The token shared with executors" }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_lists_each_route_once_with_its_path_parameters() {
        let mut served: Vec<(String, String)> = crate::api::route_table()
            .into_iter()
            .map(|route| {
                (
                    route.operation.method.to_owned(),
                    route.operation.path.to_owned(),
                )
            })
            .collect();
        served.sort();
        let routes = served.len();
        served.dedup();
        assert_eq!(served.len(), routes, "a route is listed twice");
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
        for (path, item) in document["paths"].as_object().unwrap() {
            for operation in item.as_object().unwrap().values() {
                let named: Vec<&str> = operation["parameters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|parameter| parameter["in"] == "path")
                    .map(|parameter| parameter["name"].as_str().unwrap())
                    .collect();
                let segments = path.matches('{').count();
                assert_eq!(named.len(), segments, "{path}: {named:?}");
            }
        }
    }

    #[test]
    fn the_document_is_valid_openapi() {
        let text = serde_json::to_string(&document()).unwrap();
        let parsed: utoipa::openapi::OpenApi = serde_json::from_str(&text).unwrap();
        assert_eq!(
            serde_json::to_value(&parsed.openapi).unwrap(),
            json!("3.1.0")
        );
        // Every schema reference resolves.
        let schemas = parsed.components.unwrap().schemas;
        for reference in text.split("#/components/schemas/").skip(1) {
            let name = reference.split('"').next().unwrap();
            assert!(schemas.contains_key(name), "unresolved $ref {name}");
        }
    }

    #[test]
    fn the_schemas_come_from_the_types_answered() {
        let document = document();
        let schemas = &document["components"]["schemas"];
        // A field added to a row shows in the document without editing it.
        let job = &schemas["Job"]["properties"];
        for field in ["id", "children", "fresh_instance", "next_fire_at_ms"] {
            assert!(job.get(field).is_some(), "Job lacks {field}: {job}");
        }
        // Stored enums list their wire names.
        let statuses = &schemas["RunStatus"]["enum"];
        assert_eq!(
            statuses,
            &json!(["pending", "dispatched", "success", "failed", "cancelled"])
        );
        let kinds: Vec<&str> = cronbox_protocol::TriggerKind::ALL
            .iter()
            .map(|kind| kind.as_str())
            .collect();
        assert_eq!(schemas["TriggerKind"]["enum"], json!(kinds));
        // A query parameter's names come from the type its handler parses
        // (a list written beside it had missed `workflow`).
        for (path, item) in document["paths"].as_object().unwrap() {
            for operation in item.as_object().unwrap().values() {
                for parameter in operation["parameters"].as_array().unwrap() {
                    assert!(
                        parameter["schema"].get("enum").is_none(),
                        "{path}: {} lists its values by hand",
                        parameter["name"]
                    );
                }
            }
        }
        // Every error code a client may match on.
        let codes = schemas["ErrorCode"]["enum"].as_array().unwrap();
        assert_eq!(codes.len(), cronbox_protocol::ErrorCode::ALL.len());
    }

    /// What a query parameter's schema lists, as values inside it and
    /// values just outside it.
    fn inside_and_outside(schema: &Value) -> (Vec<String>, Vec<String>) {
        let texts = |values: &[&str]| values.iter().map(|v| v.to_string()).collect();
        match schema["type"].as_str() {
            Some("integer") => {
                let min = schema["minimum"]
                    .as_i64()
                    .expect("an integer states its bounds");
                let max = schema["maximum"]
                    .as_i64()
                    .expect("an integer states its bounds");
                let mut outside: Vec<String> = [min.checked_sub(1), max.checked_add(1)]
                    .into_iter()
                    .flatten()
                    .map(|value| value.to_string())
                    .collect();
                outside.extend(texts(&["1.5", "x", "9223372036854775808"]));
                (vec![min.to_string(), max.to_string()], outside)
            }
            Some("boolean") => (texts(&["true", "false"]), texts(&["yes", "1"])),
            Some("string") if schema.get("enum").is_some() => {
                let listed = schema["enum"].as_array().unwrap();
                let inside = listed.iter().map(|v| v.as_str().unwrap().to_owned());
                (inside.collect(), texts(&["not-a-listed-name"]))
            }
            Some("string") if schema["format"] == "date" => {
                (texts(&["2026-12-03"]), texts(&["today", "2026-12-3"]))
            }
            Some("string") if schema.get("maxLength").is_some() => {
                let most = schema["maxLength"].as_u64().unwrap() as usize;
                (vec!["a".repeat(most)], vec!["a".repeat(most + 1)])
            }
            Some("string") => (texts(&["any text", ""]), Vec::new()),
            _ => panic!("a query schema this test does not know: {schema}"),
        }
    }

    /// Each route's handler reads every value its document lists for a
    /// query parameter and refuses what the document does not: a name it
    /// does not state, an enum's other names, an integer past its bounds,
    /// a day or a boolean that is not one, text over its length.
    #[test]
    fn each_query_reads_what_its_document_lists_and_nothing_beyond() {
        let document = document();
        let schemas = &document["components"]["schemas"];
        let mut checked = 0;
        for route in crate::api::route_table() {
            let (method, path) = (route.operation.method, route.operation.path);
            let query = &route.operation.query;
            if query.parameters.is_empty() {
                continue;
            }
            assert!(
                (query.reads)("undocumented=1").is_err(),
                "{method} {path} reads a parameter its document does not state"
            );
            for parameter in &query.parameters {
                let name = parameter["name"].as_str().unwrap();
                let mut schema = &parameter["schema"];
                if let Some(reference) = schema["$ref"].as_str() {
                    schema = &schemas[reference.trim_start_matches("#/components/schemas/")];
                }
                let (inside, outside) = inside_and_outside(schema);
                let given = |value: &str| serde_urlencoded::to_string([(name, value)]).unwrap();
                for value in inside {
                    let read = (query.reads)(&given(&value));
                    assert!(
                        read.is_ok(),
                        "{method} {path}: {name}={value:?} is listed but refused"
                    );
                }
                for value in outside {
                    assert!(
                        (query.reads)(&given(&value)).is_err(),
                        "{method} {path}: {name}={value:?} is read, the document does not list it"
                    );
                }
                checked += 1;
            }
        }
        assert!(checked >= 40, "only {checked} query parameters checked");
    }
}
