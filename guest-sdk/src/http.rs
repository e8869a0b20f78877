//! A small blocking HTTP client over `wasi:http/outgoing-handler`.
//!
//! ```rust,no_run
//! # fn main() -> cronbox_guest::Result<()> {
//! use cronbox_guest::http::Request;
//!
//! let response = Request::get("https://api.example.com/status").send()?;
//! let text = response.text()?;
//! let response = Request::post("https://hooks.example.com/notify")
//!     .header("content-type", "application/json")
//!     .body(r#"{"text": "done"}"#)
//!     .send()?;
//! # Ok(()) }
//! ```
//!
//! A job reaches only the origins its definition grants (`http_allow`), and
//! never a private or loopback address unless the operator allowed that
//! network; anything else fails with [`HttpError`] (the run's log says
//! why). Each request counts against the run's limits (requests, requests
//! at once, bytes each way). Redirects are not followed unless asked
//! ([`Request::follow_redirects`]); each hop is checked like a new request.

use std::fmt;

use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, Scheme,
};
use wasip2::io::streams::StreamError;

/// A request being built.
#[derive(Debug, Clone)]
pub struct Request {
    method: String,
    url: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    redirects: u32,
}

/// A response, its body read whole.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers, names lower-case, in order.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body.
    pub body: Vec<u8>,
}

/// Why a request got no response.
#[derive(Debug, Clone)]
pub enum HttpError {
    /// The URL is not `http(s)://host[:port][/path]`.
    BadUrl(String),
    /// A header name or value the host refuses (such as `host`).
    BadHeader(String),
    /// The host refused or failed the request: the `wasi:http` error code.
    Failed(ErrorCode),
    /// More redirects than allowed.
    TooManyRedirects(u32),
    /// The response body stopped with an error (the host's message: a
    /// body over the run's limit, a connection cut).
    Body(String),
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::BadUrl(url) => write!(f, "{url:?} is not an http(s) URL"),
            HttpError::BadHeader(name) => write!(f, "the header {name:?} may not be set"),
            HttpError::TooManyRedirects(max) => write!(f, "more than {max} redirects"),
            HttpError::Body(message) => write!(f, "reading the response failed: {message}"),
            HttpError::Failed(code) => match code {
                ErrorCode::HttpRequestDenied => f.write_str(
                    "the request was denied: no HTTP grant of this job covers its origin, or \
                     the run's request limit is reached (the run's log says which)",
                ),
                ErrorCode::DestinationIpProhibited => f.write_str(
                    "the request was denied: its host resolves to an address the operator \
                     does not allow (loopback, private, link-local)",
                ),
                ErrorCode::ConnectionLimitReached => {
                    f.write_str("the run's limit of requests at once is reached")
                }
                ErrorCode::HttpResponseBodySize(limit) => match limit {
                    Some(limit) => write!(
                        f,
                        "the response is over the run's limit of {limit} bytes received"
                    ),
                    None => f.write_str("the response body is too large"),
                },
                ErrorCode::HttpRequestBodySize(limit) => match limit {
                    Some(limit) => write!(
                        f,
                        "the request is over the run's limit of {limit} bytes sent"
                    ),
                    None => f.write_str("the request body is too large"),
                },
                ErrorCode::ConnectionTimeout => f.write_str("connecting timed out"),
                ErrorCode::ConnectionReadTimeout => f.write_str("the response timed out"),
                ErrorCode::ConnectionRefused => f.write_str("the connection was refused"),
                ErrorCode::DnsError(payload) => write!(
                    f,
                    "the host name cannot be resolved{}",
                    payload
                        .rcode
                        .as_deref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                ),
                other => write!(f, "the request failed: {other:?}"),
            },
        }
    }
}

impl std::error::Error for HttpError {}

impl Request {
    /// A request with `method` (`GET`, `POST`, ...) to `url`.
    pub fn new(method: &str, url: &str) -> Request {
        Request {
            method: method.to_ascii_uppercase(),
            url: url.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
            redirects: 0,
        }
    }

    /// A GET of `url`.
    pub fn get(url: &str) -> Request {
        Request::new("GET", url)
    }

    /// A POST to `url`.
    pub fn post(url: &str) -> Request {
        Request::new("POST", url)
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: impl AsRef<[u8]>) -> Request {
        self.headers
            .push((name.to_ascii_lowercase(), value.as_ref().to_vec()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = body.into();
        self
    }

    /// Follows up to `max` redirects (301, 302, 303, 307, 308), each hop
    /// a new request checked against the job's grants.
    pub fn follow_redirects(mut self, max: u32) -> Request {
        self.redirects = max;
        self
    }

    /// Sends the request and reads the whole response.
    pub fn send(self) -> Result<Response, HttpError> {
        let mut request = self;
        let mut hops = 0;
        loop {
            let response = request.send_once()?;
            let location = response
                .header("location")
                .map(|location| String::from_utf8_lossy(location).into_owned());
            let redirect = matches!(response.status, 301 | 302 | 303 | 307 | 308);
            match location {
                Some(location) if redirect && request.redirects > 0 => {
                    if hops == request.redirects {
                        return Err(HttpError::TooManyRedirects(request.redirects));
                    }
                    hops += 1;
                    request.url = resolve(&request.url, &location);
                    if response.status == 303 {
                        request.method = "GET".to_owned();
                        request.body.clear();
                    }
                }
                _ => return Ok(response),
            }
        }
    }

    fn send_once(&self) -> Result<Response, HttpError> {
        let (scheme, authority, path) = split_url(&self.url)?;
        let headers = Fields::new();
        for (name, value) in &self.headers {
            headers
                .append(name, value)
                .map_err(|_| HttpError::BadHeader(name.clone()))?;
        }
        let outgoing = OutgoingRequest::new(headers);
        let method = match self.method.as_str() {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "OPTIONS" => Method::Options,
            "PATCH" => Method::Patch,
            other => Method::Other(other.to_owned()),
        };
        let bad_url = || HttpError::BadUrl(self.url.clone());
        outgoing.set_method(&method).map_err(|()| bad_url())?;
        outgoing.set_scheme(Some(&scheme)).map_err(|()| bad_url())?;
        outgoing
            .set_authority(Some(authority))
            .map_err(|()| bad_url())?;
        outgoing
            .set_path_with_query(Some(path))
            .map_err(|()| bad_url())?;
        let body = outgoing.body().map_err(|()| bad_url())?;
        let pending = outgoing_handler::handle(outgoing, None).map_err(HttpError::Failed)?;
        {
            let stream = body.write().map_err(|()| bad_url())?;
            for chunk in self.body.chunks(4096) {
                if stream.blocking_write_and_flush(chunk).is_err() {
                    // The host ended the body (over the limit, or the
                    // request failed): the response says why.
                    break;
                }
            }
        }
        let _ = OutgoingBody::finish(body, None);
        let incoming = loop {
            match pending.get() {
                Some(Ok(result)) => break result.map_err(HttpError::Failed)?,
                Some(Err(())) => return Err(HttpError::Failed(ErrorCode::InternalError(None))),
                None => pending.subscribe().block(),
            }
        };
        let status = incoming.status();
        let headers = incoming.headers().entries().into_iter().collect::<Vec<_>>();
        let body = incoming
            .consume()
            .map_err(|()| HttpError::Failed(ErrorCode::InternalError(None)))?;
        let mut bytes = Vec::new();
        {
            let stream = body
                .stream()
                .map_err(|()| HttpError::Failed(ErrorCode::InternalError(None)))?;
            loop {
                match stream.blocking_read(64 << 10) {
                    Ok(chunk) => bytes.extend_from_slice(&chunk),
                    Err(StreamError::Closed) => break,
                    Err(StreamError::LastOperationFailed(error)) => {
                        return Err(match wasip2::http::types::http_error_code(&error) {
                            Some(code) => HttpError::Failed(code),
                            None => HttpError::Body(error.to_debug_string()),
                        });
                    }
                }
            }
        }
        let _ = IncomingBody::finish(body);
        Ok(Response {
            status,
            headers,
            body: bytes,
        })
    }
}

impl Response {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_slice())
    }

    /// The body as UTF-8 text.
    pub fn text(&self) -> Result<String, std::string::FromUtf8Error> {
        String::from_utf8(self.body.clone())
    }
}

/// `scheme://authority/path?query` into its parts (path `/` when none).
fn split_url(url: &str) -> Result<(Scheme, &str, &str), HttpError> {
    let bad = || HttpError::BadUrl(url.to_owned());
    let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        _ => return Err(bad()),
    };
    let rest = rest.split('#').next().unwrap_or(rest);
    let (authority, path) = match rest.find(['/', '?']) {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    if authority.is_empty() || authority.contains('@') {
        return Err(bad());
    }
    let path = if path.starts_with('?') { "/" } else { path };
    Ok((scheme, authority, path))
}

/// A redirect's `location` against the URL it came from.
fn resolve(base: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_owned();
    }
    let Some((scheme, rest)) = base.split_once("://") else {
        return location.to_owned();
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    if location.starts_with('/') {
        format!("{scheme}://{authority}{location}")
    } else {
        let dir = rest[authority.len()..]
            .rsplit_once('/')
            .map(|(dir, _)| dir)
            .unwrap_or("");
        format!("{scheme}://{authority}{dir}/{location}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_scheme_authority_and_path() {
        let (scheme, authority, path) = split_url("https://api.example.com:8443/v1?q=1#f").unwrap();
        assert!(matches!(scheme, Scheme::Https));
        assert_eq!((authority, path), ("api.example.com:8443", "/v1?q=1"));
        assert_eq!(split_url("http://h").unwrap().2, "/");
        assert!(split_url("ftp://h/").is_err());
        assert!(split_url("https://user@h/").is_err());
        assert!(split_url("no-scheme").is_err());
    }

    #[test]
    fn redirects_resolve_against_their_base() {
        assert_eq!(resolve("http://a/b/c", "/d"), "http://a/d");
        assert_eq!(resolve("http://a/b/c", "d"), "http://a/b/d");
        assert_eq!(resolve("http://a/b", "https://z/"), "https://z/");
    }
}
