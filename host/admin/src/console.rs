//! The web console: a page and its scripts (ES modules: `app.js` the shell,
//! `core.js` the common parts, one module per page), style and icon, built into the
//! binary (`include_str!`, nothing fetched at run time) and served at `/`
//! and `/console/...` on the admin's own address. The page speaks only
//! the public JSON API (`/api/v1/...`), logged in through a session
//! cookie; it has no routes of its own beyond these files.
//!
//! Every answer carries a strict Content-Security-Policy (scripts, styles
//! and connections from this origin only, no inline script or style, no
//! framing), `X-Frame-Options: DENY` and `X-Content-Type-Options: nosniff`.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The policy every console answer carries.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; \
     frame-ancestors 'none'; base-uri 'none'";

/// The console's files: (name under `/console/`, content type, bytes).
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/app.js"),
    ),
    (
        "text.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/text.js"),
    ),
    (
        "core.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/core.js"),
    ),
    (
        "dashboard.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/dashboard.js"),
    ),
    (
        "jobs.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/jobs.js"),
    ),
    (
        "job-form.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/job-form.js"),
    ),
    (
        "runs.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/runs.js"),
    ),
    (
        "modules.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/modules.js"),
    ),
    (
        "executors.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/executors.js"),
    ),
    (
        "workflows.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/workflows.js"),
    ),
    (
        "admin.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/admin.js"),
    ),
    (
        "audit.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/audit.js"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("../console/app.css"),
    ),
    (
        "icon.svg",
        "image/svg+xml",
        include_str!("../console/icon.svg"),
    ),
];

const INDEX: &str = include_str!("../console/index.html");

/// The console's routes (no token: the page logs in itself).
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/",
            get(|| async { page("text/html; charset=utf-8", INDEX) }),
        )
        .route("/console/{file}", get(asset))
}

async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, content_type, body)) => page(content_type, body),
        None => (StatusCode::NOT_FOUND, "no such console file").into_response(),
    }
}

/// A console file with the page's security headers. Not cached across a
/// restart of another version (`no-cache` revalidates every time; the
/// files are small).
fn page(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, content_type),
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-cache"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}
