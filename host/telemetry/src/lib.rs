//! Logs and traces of the process. Logs go to stderr as text or JSON
//! (`--log-format`), filtered by `CRONBOX_LOG`. Traces are off unless the
//! standard OpenTelemetry variables ask for them: with
//! `OTEL_EXPORTER_OTLP_ENDPOINT` or `--otel-endpoint` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)
//! set, every run's spans (`cronbox_protocol::trace_context::TARGET`) are
//! exported by OTLP over HTTP with protobuf; `OTEL_SERVICE_NAME`,
//! `OTEL_TRACES_SAMPLER(_ARG)`, `OTEL_RESOURCE_ATTRIBUTES` and
//! `OTEL_EXPORTER_OTLP_HEADERS` are read as the specification says.
//! `OTEL_SDK_DISABLED=true` turns them off again.
//!
//! Spans are exported in batches by a thread of the SDK, through a
//! runtime of their own (one thread), so that a slow collector never holds
//! up a run.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithHttpConfig as _;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// How logs are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// For people.
    Text,
    /// One JSON object a line (level, target, message, fields, the
    /// current span's fields), for a log pipeline.
    Json,
}

/// Keeps the exporter alive; [`Telemetry::finish`] sends what is left.
#[allow(missing_debug_implementations)] // holds the SDK's provider
pub struct Telemetry {
    traces: Option<(
        opentelemetry_sdk::trace::SdkTracerProvider,
        tokio::runtime::Runtime,
    )>,
}

impl Telemetry {
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

/// Where traces go, when anywhere: from the flags of the same names as
/// the standard variables (`--otel-endpoint` for
/// `OTEL_EXPORTER_OTLP_ENDPOINT`, `--otel-service-name`), or the variables.
#[derive(Debug, Clone, Default)]
pub struct TraceSettings {
    /// The collector's base URL (spans go to `/v1/traces` under it).
    pub endpoint: Option<String>,
    /// The `service.name` of the process's spans.
    pub service_name: String,
}

impl TraceSettings {
    /// Whether traces are asked for.
    fn asked(&self) -> bool {
        let set = |value: Option<&str>| value.is_some_and(|value| !value.trim().is_empty());
        let disabled = std::env::var("OTEL_SDK_DISABLED")
            .is_ok_and(|value| value.trim().eq_ignore_ascii_case("true"));
        let traces_endpoint = std::env::var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").ok();
        !disabled && (set(self.endpoint.as_deref()) || set(traces_endpoint.as_deref()))
    }
}

/// Installs the process's logging, and the trace exporter when `traces`
/// asks for it.
pub fn init(format: LogFormat, traces: &TraceSettings) -> Telemetry {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CRONBOX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = match format {
        LogFormat::Json => logs.json().boxed(),
        LogFormat::Text => logs.boxed(),
    }
    .with_filter(filter);
    let traces = if traces.asked() {
        match exporter(traces) {
            Ok(traces) => Some(traces),
            Err(error) => {
                eprintln!("warning: traces are not exported: {error}");
                None
            }
        }
    } else {
        None
    };
    let spans = traces.as_ref().map(|(provider, _)| {
        let only_runs = tracing_subscriber::filter::Targets::new().with_target(
            cronbox_protocol::trace_context::TARGET,
            tracing::Level::INFO,
        );
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("cronbox"))
            .with_filter(only_runs)
    });
    tracing_subscriber::registry().with(logs).with(spans).init();
    Telemetry { traces }
}

fn exporter(
    settings: &TraceSettings,
) -> Result<
    (
        opentelemetry_sdk::trace::SdkTracerProvider,
        tokio::runtime::Runtime,
    ),
    String,
> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("cronbox-otlp")
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the exporter's runtime: {error}"))?;
    let http = OtlpHttp {
        client: cronbox_tls::client(),
        runtime: runtime.handle().clone(),
    };
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(http);
    if let Some(endpoint) = settings
        .endpoint
        .as_deref()
        .filter(|url| !url.trim().is_empty())
    {
        // OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, when set, still wins.
        use opentelemetry_otlp::WithExportConfig as _;
        exporter = exporter.with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')));
    }
    let exporter = exporter.build().map_err(|error| error.to_string())?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(settings.service_name.clone())
        .build();
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_resource(resource)
        .with_batch_exporter(exporter)
        .build();
    Ok((provider, runtime))
}

/// The exporter's HTTP client: cronbox's own (rustls, the system's roots)
/// driven on the exporter's runtime, whichever thread asks.
#[derive(Debug)]
struct OtlpHttp {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for OtlpHttp {
    async fn send_bytes(
        &self,
        request: opentelemetry_http::Request<bytes::Bytes>,
    ) -> Result<opentelemetry_http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let client = self.client.clone();
        let sending = async move {
            let (parts, body) = request.into_parts();
            let response = client
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .timeout(std::time::Duration::from_secs(10))
                .body(body)
                .send()
                .await?;
            let mut answer = opentelemetry_http::Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                *headers = response.headers().clone();
            }
            let body = response.bytes().await?;
            Ok::<_, opentelemetry_http::HttpError>(answer.body(body)?)
        };
        self.runtime.spawn(sending).await?
    }
}
