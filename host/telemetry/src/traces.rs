//! The trace exporter: OTLP over HTTP with protobuf, in batches, through
//! cronbox's own HTTP client on a runtime of its own (one thread), so a slow
//! collector never holds up a run.

use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};

use crate::otlp_http::OtlpHttp;
use crate::settings::{OtelSettings, SetupError};

/// The provider exporting the process's spans, and the runtime its HTTP
/// requests run on.
pub(crate) fn exporter(
    settings: &OtelSettings,
) -> Result<
    (
        opentelemetry_sdk::trace::SdkTracerProvider,
        tokio::runtime::Runtime,
    ),
    SetupError,
> {
    let sampler = settings.sampler()?;
    let headers = settings.headers()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("cronbox-otlp")
        .enable_all()
        .build()
        .map_err(SetupError::Runtime)?;
    let http = OtlpHttp::new(runtime.handle().clone());
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(http)
        .with_headers(headers);
    if let Some(endpoint) = settings
        .endpoint
        .as_deref()
        .filter(|url| !url.trim().is_empty())
    {
        // OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, when set, still wins.
        exporter = exporter.with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')));
    }
    let processor = opentelemetry_sdk::trace::BatchSpanProcessor::builder(exporter.build()?)
        .with_batch_config(settings.batch_config())
        .build();
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(settings.service_name.clone())
        .build();
    let mut provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_resource(resource)
        .with_span_processor(processor);
    if let Some(sampler) = sampler {
        provider = provider.with_sampler(sampler);
    }
    Ok((provider.build(), runtime))
}
