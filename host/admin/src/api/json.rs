//! Reading requests: JSON bodies (strict shapes, 64-bit integers, no
//! U+0000 in text, the field at fault named); queries are `query`'s.

use super::*;

/// A JSON request body (`Content-Type: application/json`), read by
/// [`decode_json`]. No text in it may hold U+0000: what a caller sends is
/// stored, and PostgreSQL's text refuses that character (a 422 naming
/// where it is, on either engine, rather than a 500 from the database).
pub(crate) struct ApiJson<T>(pub(crate) T);

/// An executor's callback: read like [`ApiJson`], except that its text —
/// guests' messages and state, reported as they were — may hold U+0000
/// (the store writes messages with U+FFFD in its place and ends a run
/// whose state changes hold it `state_unstorable`).
pub(crate) struct CallbackJson<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned + Serialize> FromRequest<S> for ApiJson<T> {
    type Rejection = Failure;

    async fn from_request(request: Request, state: &S) -> Result<Self, Failure> {
        let value: Value = json_body(request, state).await?;
        refuse_text_with_nul(&value)?;
        decode_json(value).map(ApiJson)
    }
}

impl<S: Send + Sync, T: DeserializeOwned + Serialize> FromRequest<S> for CallbackJson<T> {
    type Rejection = Failure;

    async fn from_request(request: Request, state: &S) -> Result<Self, Failure> {
        let body: Box<RawValue> = json_body(request, state).await?;
        let text = body.get();
        // Executors write their callbacks as `T` is read: straight into
        // `T`, without a `Value` built and walked first (at 8,000 runs/s
        // that was ~5 % of the bench's samples). Only a body that does not
        // read so, or that may hold an integer past `i64` (19 digits or
        // more, which `T`'s `u64`s would take where the document refuses
        // it), goes through `decode_json`, which says what is wrong.
        if text.starts_with('{')
            && !has_long_number(text)
            && let Ok(decoded) = serde_json::from_str::<T>(text)
        {
            return Ok(CallbackJson(decoded));
        }
        let value = serde_json::from_str(text).map_err(|error| {
            Failure::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::MalformedJson,
                error.to_string(),
            )
        })?;
        decode_json(value).map(CallbackJson)
    }
}

/// Whether the JSON `text` holds a number of 19 digits in a row or more:
/// where an integer past `i64::MAX` (19 digits) may be. Digits inside
/// strings do not count: no field of a callback reads a number from a
/// string, and a receipt's or a digest's 64 hex digits hold 19 decimal
/// ones in a row about one time in 420 — with both in every result,
/// counting them sent one callback of 50 results in five the long way.
pub(crate) fn has_long_number(text: &str) -> bool {
    const LONGEST_SHORT_RUN: usize = 18;
    let mut run = 0;
    let mut in_string = false;
    let mut escaped = false;
    text.bytes().any(|byte| {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            return false;
        }
        in_string = byte == b'"';
        run = if byte.is_ascii_digit() { run + 1 } else { 0 };
        run > LONGEST_SHORT_RUN
    })
}

/// A request's body read as `B` (a `Value`, or the text of any JSON value),
/// refused with the reason it cannot be read.
pub(crate) async fn json_body<S: Send + Sync, B: DeserializeOwned>(
    request: Request,
    state: &S,
) -> Result<B, Failure> {
    Json::<B>::from_request(request, state)
        .await
        .map(|Json(value)| value)
        .map_err(Failure::from_json_rejection)
}

/// A request body as `T`. Every request body is one JSON object; every
/// integer in it that `T` reads is a signed 64-bit one (as the document
/// says), and may be written with a zero fraction (`5.0`), as JSON
/// Schema's `integer` allows. A body of the wrong shape is a 400
/// `invalid_request` whose `field` is the path to the part that is wrong.
pub(crate) fn decode_json<T: DeserializeOwned + Serialize>(mut value: Value) -> Result<T, Failure> {
    let shape_error = |path: &str, message: String| {
        let failure = Failure::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, message);
        if path.is_empty() || path == "." {
            failure
        } else {
            failure.field(path)
        }
    };
    if !value.is_object() {
        return Err(shape_error("", "the body must be a JSON object".to_owned()));
    }
    integral_floats_as_integers(&mut value);
    // Only a body holding such an integer somewhere is checked again.
    let has_wide_integer = integer_past_i64(&value, &mut String::new()).is_some();
    let decoded: T = serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        shape_error(&path, format!("{path}: {}", error.inner()))
    })?;
    // What was read, written back: the fields `T` ignores are gone.
    let mut path = String::new();
    if let Some(number) = has_wide_integer
        .then(|| serde_json::to_value(&decoded).ok())
        .flatten()
        .and_then(|read| integer_past_i64(&read, &mut path))
    {
        return Err(shape_error(
            &path,
            format!("{path}: {number} is past the largest integer {}", i64::MAX),
        ));
    }
    Ok(decoded)
}

/// Rewrites every number with a zero fraction that fits an `i64` (`5.0`)
/// as that integer.
pub(crate) fn integral_floats_as_integers(value: &mut Value) {
    match value {
        Value::Number(number) => {
            if let Some(float) = number.as_f64().filter(|_| number.is_f64())
                && float.fract() == 0.0
                && float >= i64::MIN as f64
                && float < i64::MAX as f64
            {
                *value = Value::from(float as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_floats_as_integers),
        Value::Object(fields) => fields.values_mut().for_each(integral_floats_as_integers),
        _ => {}
    }
}

/// The first integer past `i64::MAX`, with `path` left at it
/// (`results[0].run_id`).
pub(crate) fn integer_past_i64(value: &Value, path: &mut String) -> Option<serde_json::Number> {
    first_in_json(value, path, &|value| match value {
        Value::Number(number) if number.is_u64() && number.as_i64().is_none() => {
            Some(number.clone())
        }
        _ => None,
    })
}

/// A 422 naming where the body's first text holding U+0000 is.
pub(crate) fn refuse_text_with_nul(body: &Value) -> Result<(), Failure> {
    let mut path = String::new();
    let Some(what) = text_with_nul(body, &mut path) else {
        return Ok(());
    };
    let place = if path.is_empty() { "the body" } else { &path };
    let failure = Failure::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        ErrorCode::InvalidRequest,
        format!("{place}: {what} holds U+0000 (NUL), which no text may hold"),
    );
    Err(if path.is_empty() {
        failure
    } else {
        failure.field(&path)
    })
}

/// Where the first text holding U+0000 is: `path` is left at the value
/// (`config.key`), or at the object whose key holds it; the answer says
/// which ("the value" or "a key").
pub(crate) fn text_with_nul(value: &Value, path: &mut String) -> Option<&'static str> {
    first_in_json(value, path, &|value| match value {
        Value::String(text) if text.contains('\0') => Some("the value"),
        Value::Object(fields) if fields.keys().any(|key| key.contains('\0')) => Some("a key"),
        _ => None,
    })
}

/// The first value (depth first, the value itself before what it holds)
/// that `found` answers for, with `path` left at it.
pub(crate) fn first_in_json<T>(
    value: &Value,
    path: &mut String,
    found: &dyn Fn(&Value) -> Option<T>,
) -> Option<T> {
    if let Some(answer) = found(value) {
        return Some(answer);
    }
    // Each step appends to `path`; a step that finds nothing takes its
    // part off again.
    let length = path.len();
    let within = |path: &mut String, item: &Value| {
        let answer = first_in_json(item, path, found);
        if answer.is_none() {
            path.truncate(length);
        }
        answer
    };
    match value {
        Value::Array(items) => items.iter().enumerate().find_map(|(index, item)| {
            path.push_str(&format!("[{index}]"));
            within(path, item)
        }),
        Value::Object(fields) => fields.iter().find_map(|(name, field)| {
            if length > 0 {
                path.push('.');
            }
            path.push_str(name);
            within(path, field)
        }),
        _ => None,
    }
}

/// A JSON body that may be left out (then `T::default()`), read like
/// [`ApiJson`] otherwise.
pub(crate) fn optional_json<T: DeserializeOwned + Serialize + Default>(
    body: &[u8],
) -> Result<T, Failure> {
    if body.is_empty() {
        return Ok(T::default());
    }
    let value = serde_json::from_slice(body).map_err(|error| {
        Failure::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::MalformedJson,
            error.to_string(),
        )
    })?;
    refuse_text_with_nul(&value)?;
    decode_json(value)
}

#[cfg(test)]
mod tests {
    use super::has_long_number;

    #[test]
    fn long_numbers_are_found_outside_strings_only() {
        let nineteen = "1234567890123456789";
        assert!(has_long_number(&format!(r#"{{"run_id":{nineteen}}}"#)));
        assert!(has_long_number(&format!(r#"{{"a":[1,-{nineteen}]}}"#)));
        assert!(!has_long_number(r#"{"run_id":123456789012345678}"#));
        assert!(!has_long_number(&format!(r#"{{"receipt":"{nineteen}"}}"#)));
        // An escaped quote does not end a string; an escaped backslash
        // before a quote does.
        assert!(!has_long_number(&format!(r#"{{"a":"\"{nineteen}"}}"#)));
        assert!(has_long_number(&format!(r#"{{"a":"\\","b":{nineteen}}}"#)));
        assert!(!has_long_number(&format!(r#"{{"{nineteen}":1}}"#)));
    }
}
