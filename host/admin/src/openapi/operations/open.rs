//! The routes open to all (metrics, readiness, this document, logging in) and the executors' routes.

use super::*;

pub(super) fn operations() -> Vec<Operation> {
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
    ]
}
