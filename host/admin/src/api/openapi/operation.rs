//! What the document says of one route ([`Operation`]): method, path,
//! tag, summary, request and response schemas (by name, resolved against
//! the derived schemas), query parameters. Each route is written once, in
//! its resource's `routes()` beside its handlers, with its `Operation`:
//! the router and the document are built from that one table.

use serde_json::{Value, json};

use crate::api::query::QueryParameters;

/// One operation: its tag, summary, path parameters, request body schema,
/// success status and response schema.
pub(crate) struct Operation {
    pub(crate) method: &'static str,
    pub(crate) path: &'static str,
    pub(crate) tag: &'static str,
    pub(crate) summary: &'static str,
    pub(crate) body: Option<Value>,
    pub(crate) status: &'static str,
    /// The success response's schema; `Null` for a response with no body.
    pub(crate) response: Value,
    /// The media type of the success response.
    pub(crate) response_media: &'static str,
    /// Whether the body may be left out.
    pub(crate) body_optional: bool,
    /// The body's media types and schemas, when not JSON (`body` unused).
    pub(crate) body_content: Option<Value>,
    /// Query parameters, as `parameters_of` derives them from the type
    /// the handler reads.
    pub(crate) query: QueryParameters,
}

impl Operation {
    /// The success response in `media` instead of JSON.
    pub(crate) fn with_media(self, media: &'static str) -> Operation {
        Operation {
            response_media: media,
            ..self
        }
    }

    /// With these query parameters.
    pub(crate) fn with_query(self, query: QueryParameters) -> Operation {
        Operation { query, ..self }
    }

    /// The body may be left out.
    pub(crate) fn body_optional(self) -> Operation {
        Operation {
            body_optional: true,
            ..self
        }
    }
}

pub(crate) fn schema(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

pub(crate) fn array_of(item: Value) -> Value {
    json!({ "type": "array", "items": item })
}

pub(crate) fn object() -> Value {
    json!({ "type": "object" })
}

/// An integer from `min` to `max`, as the handler checks it.
pub(crate) fn integer(min: i64, max: i64) -> Value {
    json!({ "type": "integer", "format": "int64", "minimum": min, "maximum": max })
}

/// An operation answering JSON, with no query parameters and a required
/// body (when it has one).
pub(crate) fn op(
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
        query: QueryParameters::none(),
    }
}
