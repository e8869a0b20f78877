//! The operations of the document: method, path, tag, summary, request
//! and response schemas (by name, resolved against the derived schemas),
//! query parameters; one file per family of routes.

use serde_json::{Value, json};

mod jobs;
mod modules;
mod open;
mod people;
mod runs;

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
    pub(super) fn with_media(self, media: &'static str) -> Operation {
        Operation {
            response_media: media,
            ..self
        }
    }

    /// With these query parameters.
    pub(super) fn with_query(self, query: Vec<(&'static str, Value, &'static str)>) -> Operation {
        Operation { query, ..self }
    }

    /// The body may be left out.
    pub(super) fn body_optional(self) -> Operation {
        Operation {
            body_optional: true,
            ..self
        }
    }
}

pub(super) fn schema(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

pub(super) fn array_of(item: Value) -> Value {
    json!({ "type": "array", "items": item })
}

pub(super) fn object() -> Value {
    json!({ "type": "object" })
}

/// An integer from `min` to `max`, as the handler checks it.
pub(super) fn integer(min: i64, max: i64) -> Value {
    json!({ "type": "integer", "format": "int64", "minimum": min, "maximum": max })
}

pub(super) fn text() -> Value {
    json!({ "type": "string" })
}

/// A day as `YYYY-MM-DD`.
pub(super) fn day() -> Value {
    json!({ "type": "string", "format": "date", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$" })
}

/// An operation answering JSON, with no query parameters and a required
/// body (when it has one).
pub(super) fn op(
    method: &'static str,
    path: &'static str,
    tag: &'static str,
    summary: &'static str,
    body: Option<Value>,
    status: &'static str,
    response: Value,
) -> Operation {
    Operation {
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
    }
}

pub(in crate::openapi) fn operations() -> Vec<Operation> {
    [
        open::operations(),
        modules::operations(),
        people::operations(),
        jobs::operations(),
        runs::operations(),
    ]
    .into_iter()
    .flatten()
    .collect()
}
