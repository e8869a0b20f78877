//! Query strings, read as the type their document is derived from: each
//! listing declares one struct (`#[derive(Deserialize, IntoParams)]`,
//! `#[serde(deny_unknown_fields)]`),
//! whose fields the handler reads ([`Params`]) and whose parameters the
//! route's OpenAPI operation states ([`parameters_of`]). A name, a type or
//! a bound is written once; [`Bounded`] carries an integer's bounds in its
//! type, so the check and the document cannot disagree.

use serde::de::{DeserializeOwned, Deserializer, Error as _};
use utoipa::IntoParams;
use utoipa::openapi::path::ParameterIn;

use super::*;

/// A query string read as `T`: only `T`'s parameter names, each value
/// read as its field's type (an integer within its bounds, a name among
/// its enum's); every refusal is a 400 `invalid_query` naming the
/// parameter.
pub(crate) struct Params<T>(pub(crate) T);

impl<S: Send + Sync, T: IntoParams + DeserializeOwned> axum::extract::FromRequestParts<S>
    for Params<T>
{
    type Rejection = Failure;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Failure> {
        read::<T>(parts.uri.query().unwrap_or("")).map(Params)
    }
}

/// A 400 `invalid_query` naming `field`.
pub(crate) fn invalid_query(field: &str, message: String) -> Failure {
    Failure::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidQuery, message).field(field)
}

/// Reads `query` as `T` (its struct `deny_unknown_fields`, which the
/// test of every route holds): one parse when it reads; otherwise the
/// refusal names the parameter at fault.
fn read<T: IntoParams + DeserializeOwned>(query: &str) -> Result<T, Failure> {
    serde_urlencoded::from_str(query).map_err(|whole| refusal::<T>(query, whole))
}

/// Why `query` does not read as `T`: a name `T` does not declare, a name
/// given twice, or the first value its field's type does not read.
fn refusal<T: IntoParams + DeserializeOwned>(
    query: &str,
    whole: serde::de::value::Error,
) -> Failure {
    let Ok(pairs) = serde_urlencoded::from_str::<Vec<(String, String)>>(query) else {
        return invalid_query("query", format!("the query does not parse: {whole}"));
    };
    let declared: Vec<String> = T::into_params(|| Some(ParameterIn::Query))
        .into_iter()
        .map(|parameter| parameter.name)
        .collect();
    for (at, (name, value)) in pairs.iter().enumerate() {
        if !declared.contains(name) {
            let known = declared.join(", ");
            return invalid_query(name, format!("unknown parameter {name:?}: use {known}"));
        }
        if pairs[..at].iter().any(|(earlier, _)| earlier == name) {
            return invalid_query(name, format!("{name} is given twice"));
        }
        // Read alone, so that the refusal names the parameter at fault.
        let alone = serde_urlencoded::to_string([(name, value)]).unwrap_or_default();
        if let Err(error) = serde_urlencoded::from_str::<T>(&alone) {
            return invalid_query(name, format!("{name}: {error}"));
        }
    }
    invalid_query("query", whole.to_string())
}

/// A route's query as its document states it, with the reader its handler
/// uses (so that a test can hold one to the other).
#[derive(Clone)]
pub(crate) struct QueryParameters {
    /// The parameters, as OpenAPI objects.
    pub(crate) parameters: Vec<Value>,
    /// Reads a query string as the handler does, keeping only the verdict
    /// (for the test that holds each route's reader to its document).
    #[cfg(test)]
    pub(crate) reads: fn(&str) -> Result<(), Failure>,
}

impl QueryParameters {
    /// A route that reads no query.
    pub(crate) fn none() -> QueryParameters {
        QueryParameters {
            parameters: Vec::new(),
            #[cfg(test)]
            reads: |_| Ok(()),
        }
    }
}

/// `T`'s parameters as the document states them. A query parameter is
/// absent or has a value, never null: an `Option` field's schema is its
/// value's.
pub(crate) fn parameters_of<T: IntoParams + DeserializeOwned>() -> QueryParameters {
    let parameters = T::into_params(|| Some(ParameterIn::Query))
        .into_iter()
        .map(|parameter| {
            let mut parameter = serde_json::to_value(parameter).expect("a parameter serialises");
            let schema = parameter["schema"].take();
            parameter["schema"] = without_null(schema);
            parameter
        })
        .collect();
    QueryParameters {
        parameters,
        #[cfg(test)]
        reads: |query| read::<T>(query).map(drop),
    }
}

/// `schema` without the `null` an `Option` adds (`oneOf` with a `null`,
/// or `null` in a list of types).
fn without_null(mut schema: Value) -> Value {
    let is_null = |schema: &Value| schema == &json!({ "type": "null" });
    if let Some(choices) = schema["oneOf"].as_array() {
        let mut rest: Vec<Value> = choices.iter().filter(|c| !is_null(c)).cloned().collect();
        if rest.len() == 1 {
            return rest.remove(0);
        }
    }
    if let Some(types) = schema["type"].as_array() {
        let rest: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        schema["type"] = match rest.as_slice() {
            [one] => one.clone(),
            _ => Value::Array(rest),
        };
    }
    schema
}

/// An integer from `MIN` to `MAX`: read from a query value (refused
/// outside the bounds) and stated in the document with those bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounded<const MIN: i64, const MAX: i64>(i64);

/// Any 64-bit integer (an id, a time in ms), stated with its bounds so
/// that a client generating values stays inside them.
pub(crate) type Integer = Bounded<{ i64::MIN }, { i64::MAX }>;

impl<const MIN: i64, const MAX: i64> Bounded<MIN, MAX> {
    pub(crate) fn get(self) -> i64 {
        self.0
    }
}

impl<'de, const MIN: i64, const MAX: i64> Deserialize<'de> for Bounded<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let value: i64 = text
            .parse()
            .map_err(|_| D::Error::custom(format!("must be an integer, got {text:?}")))?;
        if !(MIN..=MAX).contains(&value) {
            return Err(D::Error::custom(format!(
                "must be between {MIN} and {MAX}, got {value}"
            )));
        }
        Ok(Bounded(value))
    }
}

impl<const MIN: i64, const MAX: i64> utoipa::PartialSchema for Bounded<MIN, MAX> {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
            .minimum(Some(MIN as isize))
            .maximum(Some(MAX as isize))
            .into()
    }
}

impl<const MIN: i64, const MAX: i64> utoipa::ToSchema for Bounded<MIN, MAX> {}

/// Text of at most `MAX` characters, stated with its `maxLength`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limited<const MAX: usize>(pub(crate) String);

impl<'de, const MAX: usize> Deserialize<'de> for Limited<MAX> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let length = text.chars().count();
        if length > MAX {
            return Err(D::Error::custom(format!(
                "{length} characters; at most {MAX}"
            )));
        }
        Ok(Limited(text))
    }
}

impl<const MAX: usize> utoipa::PartialSchema for Limited<MAX> {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .max_length(Some(MAX))
            .into()
    }
}

impl<const MAX: usize> utoipa::ToSchema for Limited<MAX> {}

/// A name typed by a person, read in any letter case (`cron`, `Cron`);
/// its field states `T`'s schema (`#[param(value_type = Option<T>)]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AnyCase<T>(pub(crate) T);

impl<'de, T> Deserialize<'de> for AnyCase<T>
where
    T: std::str::FromStr + utoipa::PartialSchema,
    T::Err: std::fmt::Display,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        cronbox_api::parse_ignoring_case(&text)
            .map(AnyCase)
            .map_err(|error| {
                let schema = serde_json::to_value(T::schema()).unwrap_or_default();
                let names: Vec<&str> = schema["enum"]
                    .as_array()
                    .map(|names| names.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                D::Error::custom(format!("{error}: use {}", names.join(", ")))
            })
    }
}

/// A day as `YYYY-MM-DD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Day(pub(crate) chrono::NaiveDate);

impl<'de> Deserialize<'de> for Day {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        // Written back as it was read: `2026-12-3` is not the document's
        // pattern although chrono would read it.
        chrono::NaiveDate::parse_from_str(&text, "%Y-%m-%d")
            .ok()
            .filter(|day| day.format("%Y-%m-%d").to_string() == text)
            .map(Day)
            .ok_or_else(|| D::Error::custom(format!("must be a day as YYYY-MM-DD, got {text:?}")))
    }
}

impl utoipa::PartialSchema for Day {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Date)))
            .pattern(Some("^[0-9]{4}-[0-9]{2}-[0-9]{2}$"))
            .into()
    }
}

impl utoipa::ToSchema for Day {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listing's parameters, as a handler declares them.
    #[derive(Debug, Deserialize, IntoParams)]
    #[serde(deny_unknown_fields)]
    struct Listing {
        /// Runs in this status.
        status: Option<RunStatus>,
        /// Page size.
        #[param(inline)]
        limit: Option<Bounded<1, 10>>,
    }

    fn refusal(query: &str) -> (Option<String>, String) {
        let (_, body) = read::<Listing>(query).unwrap_err().into_parts();
        (body.field, body.message)
    }

    #[test]
    fn a_query_reads_as_its_type_and_refusals_name_the_parameter() {
        let listing = read::<Listing>("status=failed&limit=10").unwrap();
        assert_eq!(listing.status, Some(RunStatus::Failed));
        assert_eq!(listing.limit.map(Bounded::get), Some(10));
        let (field, message) = refusal("limit=11");
        assert_eq!(field.as_deref(), Some("limit"));
        assert!(message.contains("between 1 and 10, got 11"), "{message}");
        let (field, message) = refusal("limit=x");
        assert_eq!(field.as_deref(), Some("limit"));
        assert!(message.contains("must be an integer"), "{message}");
        let (field, message) = refusal("status=lost&limit=1");
        assert_eq!(field.as_deref(), Some("status"));
        assert!(message.contains("failed"), "names the values: {message}");
        let (field, message) = refusal("kind=cron");
        assert_eq!(field.as_deref(), Some("kind"));
        assert!(message.contains("use status, limit"), "{message}");
        assert_eq!(refusal("limit=1&limit=2").0.as_deref(), Some("limit"));
    }

    #[test]
    fn the_document_states_what_the_type_reads() {
        let parameters = parameters_of::<Listing>().parameters;
        assert_eq!(parameters[0]["name"], "status");
        assert_eq!(parameters[0]["required"], false);
        assert_eq!(
            parameters[0]["schema"]["$ref"],
            "#/components/schemas/RunStatus"
        );
        assert_eq!(parameters[1]["description"], "Page size.");
        assert_eq!(parameters[1]["schema"]["type"], "integer", "not null");
        assert_eq!(parameters[1]["schema"]["minimum"], 1);
        assert_eq!(parameters[1]["schema"]["maximum"], 10);
    }
}
