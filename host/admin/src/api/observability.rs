//! `/metrics`: the admin's Prometheus metrics (also sent by OTLP when the
//! operator asks, see `cronbox_telemetry`), as the engine's scrape reads
//! them (`scheduler/scrape.rs`).

use super::*;

/// Prometheus text format; no token (like the executor's).
pub(super) async fn metrics(State(state): State<Arc<AdminState>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.intake.metrics_text().await,
    )
}
