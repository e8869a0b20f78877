//! Logs, traces and metrics export of the process. Logs go to stderr as
//! text or JSON (`--log-format`), filtered by `CRONBOX_LOG`. Traces are off
//! unless the standard OpenTelemetry settings ask for them: with
//! `OTEL_EXPORTER_OTLP_ENDPOINT` or `--otel-endpoint` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, every run's spans
//! (`cronbox_protocol::trace_context::TARGET`) are exported by OTLP over
//! HTTP with protobuf; the sampler, headers and batch settings come from
//! [`OtelSettings`] (flags and file keys) or the standard variables
//! (`OTEL_TRACES_SAMPLER(_ARG)`, `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_BSP_*`,
//! `OTEL_RESOURCE_ATTRIBUTES`). `OTEL_SDK_DISABLED=true` turns them off.
//!
//! With an endpoint, the process's metrics are also sent by OTLP
//! (`metrics`), unless `OTEL_METRICS_EXPORTER=none`; the admin and the
//! executor send them with [`MetricsExporter`], which
//! [`Telemetry::metrics_exporter`] hands out.
//!
//! - `settings`: the settings, from flags, file keys and variables.
//! - `logs`: the text and JSON log lines (JSON ones carry trace ids).
//! - `traces`: the batch span exporter.
//! - `metrics`: metrics over OTLP, converted from OpenMetrics text.
//! - `otlp_http`: the span exporter's HTTP client.

mod logs;
mod metrics;
mod otlp_http;
mod settings;
mod traces;

use opentelemetry::trace::TracerProvider as _;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

pub use logs::LogFormat;
pub use metrics::{MetricsExportError, MetricsExporter};
pub use settings::{BatchSettings, OtelSettings, SamplerName, SetupError, UnknownSampler};

/// Keeps the exporter alive; [`Telemetry::finish`] sends what is left.
#[allow(missing_debug_implementations)] // holds the SDK's provider
pub struct Telemetry {
    traces: Option<(
        opentelemetry_sdk::trace::SdkTracerProvider,
        tokio::runtime::Runtime,
    )>,
    metrics: Option<MetricsExporter>,
}

impl Telemetry {
    /// Where the process's metrics are to be sent, when anywhere.
    pub fn metrics_exporter(&self) -> Option<MetricsExporter> {
        self.metrics.clone()
    }

    /// Sends the spans not yet sent (waiting at most the exporter's
    /// timeout).
    pub fn finish(self) {
        if let Some((provider, _runtime)) = self.traces
            && let Err(error) = provider.shutdown()
        {
            eprintln!("warning: traces not all exported: {error}");
        }
    }
}

/// Installs the process's logging, and the trace exporter when `settings`
/// ask for it; makes the metrics exporter they ask for.
pub fn init(format: LogFormat, settings: &OtelSettings) -> Telemetry {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CRONBOX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let logs = logs::layer(format, std::io::stderr, filter);
    let traces = if settings.traces_asked() {
        match traces::exporter(settings) {
            Ok(traces) => Some(traces),
            Err(error) => {
                eprintln!("warning: traces are not exported: {error}");
                None
            }
        }
    } else {
        None
    };
    let spans = traces
        .as_ref()
        .map(|(provider, _)| run_spans(provider.tracer("cronbox")));
    tracing_subscriber::registry().with(logs).with(spans).init();
    let metrics = match metrics::exporter(settings) {
        Ok(metrics) => metrics,
        Err(error) => {
            eprintln!("warning: metrics are not exported: {error}");
            None
        }
    };
    Telemetry { traces, metrics }
}

/// The subscriber of a process whose traces are off, logging at
/// `CRONBOX_LOG`'s default (warnings): what a test proving that spans cost
/// nothing when off installs.
pub fn without_traces(format: LogFormat) -> impl tracing::Subscriber + Send + Sync {
    tracing_subscriber::registry().with(logs::layer(
        format,
        std::io::stderr,
        tracing_subscriber::EnvFilter::new("warn"),
    ))
}

/// The OpenTelemetry layer, seeing only the spans of runs.
fn run_spans<S>(tracer: opentelemetry_sdk::trace::Tracer) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let only_runs = tracing_subscriber::filter::Targets::new().with_target(
        cronbox_protocol::trace_context::TARGET,
        tracing::Level::INFO,
    );
    // Without the source location, thread and busy/idle attributes the
    // layer adds by default: they are not what a run's spans are read for,
    // and timing each poll of an instrumented future costs on every enter.
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_filter(only_runs)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_json_line_written_in_a_traced_run_carries_its_trace_and_span_ids() {
        let written = Lines::default();
        let sink = written.clone();
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let subscriber = tracing_subscriber::registry()
            .with(logs::layer(
                LogFormat::Json,
                move || sink.clone(),
                tracing_subscriber::EnvFilter::new("warn"),
            ))
            .with(run_spans(provider.tracer("test")));
        let traceparent = tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(outside = 1, "before the run");
            let span =
                tracing::info_span!(target: cronbox_protocol::trace_context::TARGET, "cronbox.run");
            let traceparent = cronbox_protocol::trace_context::traceparent(&span).unwrap();
            span.in_scope(|| tracing::warn!(attempt = 2, "inside the run"));
            traceparent
        });
        let text = String::from_utf8(written.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|error| panic!("{line}: {error}"))
            })
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0]["fields"]["message"], "before the run");
        assert!(lines[0].get("trace_id").is_none(), "{text}");
        assert_eq!(lines[1]["fields"]["message"], "inside the run");
        assert_eq!(lines[1]["fields"]["attempt"], 2);
        assert_eq!(lines[1]["level"], "WARN");
        let ids: Vec<&str> = traceparent.split('-').collect();
        assert_eq!(lines[1]["trace_id"], ids[1], "{text}");
        assert_eq!(lines[1]["span_id"], ids[2], "{text}");
    }
}
