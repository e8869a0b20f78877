//! A webhook receiver on loopback for alarm tests: it records every JSON
//! body posted to it and answers with a chosen status (or redirects).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;

#[derive(Debug)]
struct Inbox {
    bodies: Mutex<Vec<serde_json::Value>>,
    status: AtomicU16,
    /// Answer 307 to here instead.
    redirect: Option<String>,
}

/// Records alarms posted to [`WebhookReceiver::url`]. Stops when dropped.
#[derive(Debug)]
pub struct WebhookReceiver {
    addr: SocketAddr,
    inbox: Arc<Inbox>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for WebhookReceiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl WebhookReceiver {
    /// Starts a receiver that answers `status` to every post.
    pub async fn start(status: u16) -> WebhookReceiver {
        Self::serve(status, None).await
    }

    /// Starts a receiver that answers every post with a 307 redirect to
    /// `target` (after recording it).
    pub async fn redirecting_to(target: &str) -> WebhookReceiver {
        Self::serve(307, Some(target.to_owned())).await
    }

    async fn serve(status: u16, redirect: Option<String>) -> WebhookReceiver {
        let inbox = Arc::new(Inbox {
            bodies: Mutex::new(Vec::new()),
            status: AtomicU16::new(status),
            redirect,
        });
        let app = Router::new()
            .route("/alarm", post(receive))
            .with_state(inbox.clone());
        let (addr, server) = crate::serve_on("127.0.0.1:0", app).await;
        WebhookReceiver {
            addr,
            inbox,
            server,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/alarm", self.addr)
    }

    /// Every body received, in order (repeats included).
    pub fn bodies(&self) -> Vec<serde_json::Value> {
        self.inbox.bodies.lock().expect("lock").clone()
    }
}

async fn receive(
    State(inbox): State<Arc<Inbox>>,
    body: axum::body::Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    inbox.bodies.lock().expect("lock").push(value);
    if let Some(target) = &inbox.redirect {
        return (
            StatusCode::TEMPORARY_REDIRECT,
            [(axum::http::header::LOCATION, target.clone())],
        )
            .into_response();
    }
    StatusCode::from_u16(inbox.status.load(Ordering::SeqCst))
        .unwrap_or(StatusCode::OK)
        .into_response()
}
