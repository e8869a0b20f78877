//! An HTTP server on loopback for outbound-HTTP tests: it records every
//! request and answers by path.
//!
//! - `GET /bytes/{n}`: `n` bytes of body;
//! - `GET /hooks/{key}`: `ok`, as a webhook that takes its key in its path;
//! - `POST /echo`: the request's body back;
//! - `GET /redirect?to=URL`: a 302 to `URL`;
//! - `GET /slow`: never answers (a test ends the request: a timeout, a
//!   kill).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use tokio::sync::watch;

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct SeenRequest {
    pub method: String,
    pub path: String,
    pub body_bytes: usize,
    pub headers: HashMap<String, String>,
}

#[derive(Debug)]
struct Seen {
    requests: Mutex<Vec<SeenRequest>>,
    count: watch::Sender<usize>,
}

/// A loopback HTTP server. Stops when dropped.
#[derive(Debug)]
pub struct TestOrigin {
    addr: SocketAddr,
    seen: Arc<Seen>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for TestOrigin {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl TestOrigin {
    /// Starts a server on 127.0.0.1, on a port of the system's choosing.
    pub async fn start() -> TestOrigin {
        let seen = Arc::new(Seen {
            requests: Mutex::new(Vec::new()),
            count: watch::Sender::new(0),
        });
        let app = Router::new()
            .route("/bytes/{n}", get(bytes))
            .route("/hooks/{key}", get(|| async { "ok" }))
            .route("/echo", post(echo))
            .route("/redirect", get(redirect))
            .route("/slow", get(slow))
            .layer(axum::middleware::from_fn_with_state(seen.clone(), record))
            .with_state(seen.clone());
        let (addr, server) = crate::serve_on("127.0.0.1:0", app).await;
        TestOrigin { addr, seen, server }
    }

    /// `http://127.0.0.1:PORT`, the origin to grant.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The URL of `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.origin())
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.seen.requests.lock().expect("lock").clone()
    }

    /// Waits until the server has seen `count` requests (their heads).
    pub async fn until_requests(&self, count: usize) {
        let mut seen = self.seen.count.subscribe();
        let _ = seen.wait_for(|seen| *seen >= count).await;
    }
}

async fn record(
    State(seen): State<Arc<Seen>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let headers = parts
        .headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                value.to_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    seen.requests.lock().expect("lock").push(SeenRequest {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        body_bytes: body.len(),
        headers,
    });
    seen.count.send_modify(|count| *count += 1);
    next.run(axum::extract::Request::from_parts(parts, body.into()))
        .await
}

async fn bytes(Path(n): Path<usize>) -> Vec<u8> {
    vec![b'x'; n]
}

async fn echo(body: Bytes) -> Bytes {
    body
}

async fn redirect(Query(query): Query<HashMap<String, String>>) -> impl IntoResponse {
    let to = query.get("to").cloned().unwrap_or_default();
    (StatusCode::FOUND, [(header::LOCATION, to)])
}

async fn slow() -> &'static str {
    std::future::pending().await
}
