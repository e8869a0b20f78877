//! The trace exporter: OTLP over HTTP with protobuf, in batches, through
//! cronbox's own HTTP client on a runtime of its own (one thread), so a slow
//! collector never holds up a run.

use std::collections::HashMap;
use std::time::Duration;

use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};

use crate::otlp_http::OtlpHttp;

/// Where traces go and how, from the flags named like the standard
/// variables (`--otel-endpoint` is `OTEL_EXPORTER_OTLP_ENDPOINT`, ...), or
/// the variables themselves. Anything left `None` is the SDK's default
/// (which reads the variables the specification names).
#[derive(Debug, Clone, Default)]
pub struct TraceSettings {
    /// The collector's base URL (spans go to `/v1/traces` under it).
    pub endpoint: Option<String>,
    /// The `service.name` of the process's spans.
    pub service_name: String,
    /// Headers sent with every export, `key=value,key2=value2`
    /// (values URL-encoded), as `OTEL_EXPORTER_OTLP_HEADERS`.
    pub headers: Option<String>,
    /// Which traces are kept (`OTEL_TRACES_SAMPLER`).
    pub sampler: Option<SamplerName>,
    /// The ratio of the `traceidratio` samplers (`OTEL_TRACES_SAMPLER_ARG`).
    pub sampler_ratio: Option<f64>,
    /// The batch exporter's settings (`OTEL_BSP_*`).
    pub batch: BatchSettings,
}

/// The batch exporter's settings; `None` is the SDK's default.
#[derive(Debug, Clone, Copy, Default)]
pub struct BatchSettings {
    /// Spans held for export at most; past it, new spans are dropped.
    pub max_queue_size: Option<usize>,
    /// Spans sent in one request at most.
    pub max_export_batch_size: Option<usize>,
    /// How long spans wait before a batch is sent.
    pub schedule_delay: Option<Duration>,
}

/// The samplers `OTEL_TRACES_SAMPLER` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplerName {
    AlwaysOn,
    AlwaysOff,
    TraceIdRatio,
    ParentBasedAlwaysOn,
    ParentBasedAlwaysOff,
    ParentBasedTraceIdRatio,
}

impl SamplerName {
    const NAMES: [(&str, SamplerName); 6] = [
        ("always_on", SamplerName::AlwaysOn),
        ("always_off", SamplerName::AlwaysOff),
        ("traceidratio", SamplerName::TraceIdRatio),
        ("parentbased_always_on", SamplerName::ParentBasedAlwaysOn),
        ("parentbased_always_off", SamplerName::ParentBasedAlwaysOff),
        (
            "parentbased_traceidratio",
            SamplerName::ParentBasedTraceIdRatio,
        ),
    ];

    fn sampler(self, ratio: f64) -> opentelemetry_sdk::trace::Sampler {
        use opentelemetry_sdk::trace::Sampler;
        let parent_based = |root: Sampler| Sampler::ParentBased(Box::new(root));
        match self {
            SamplerName::AlwaysOn => Sampler::AlwaysOn,
            SamplerName::AlwaysOff => Sampler::AlwaysOff,
            SamplerName::TraceIdRatio => Sampler::TraceIdRatioBased(ratio),
            SamplerName::ParentBasedAlwaysOn => parent_based(Sampler::AlwaysOn),
            SamplerName::ParentBasedAlwaysOff => parent_based(Sampler::AlwaysOff),
            SamplerName::ParentBasedTraceIdRatio => parent_based(Sampler::TraceIdRatioBased(ratio)),
        }
    }
}

/// A sampler name that is not one of the specification's.
#[derive(Debug, thiserror::Error)]
#[error(
    "unknown sampler {0:?}: expected one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio"
)]
pub struct UnknownSampler(String);

impl std::str::FromStr for SamplerName {
    type Err = UnknownSampler;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let wanted = text.trim().to_ascii_lowercase();
        Self::NAMES
            .iter()
            .find(|(name, _)| *name == wanted)
            .map(|(_, sampler)| *sampler)
            .ok_or_else(|| UnknownSampler(text.to_owned()))
    }
}

/// Why traces cannot be exported as asked.
#[derive(Debug, thiserror::Error)]
pub enum TraceSetupError {
    #[error("cannot start the exporter's runtime: {0}")]
    Runtime(std::io::Error),
    #[error("the sampler's ratio must be between 0 and 1, not {0}")]
    Ratio(f64),
    #[error("header {0:?} of the OTLP headers is not key=value")]
    Header(String),
    #[error("the OTLP exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
}

impl TraceSettings {
    /// Whether traces are asked for: an endpoint, and the SDK not disabled.
    pub(crate) fn asked(&self) -> bool {
        let set = |value: Option<&str>| value.is_some_and(|value| !value.trim().is_empty());
        let disabled = std::env::var("OTEL_SDK_DISABLED")
            .is_ok_and(|value| value.trim().eq_ignore_ascii_case("true"));
        let traces_endpoint = std::env::var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").ok();
        !disabled && (set(self.endpoint.as_deref()) || set(traces_endpoint.as_deref()))
    }

    fn headers(&self) -> Result<HashMap<String, String>, TraceSetupError> {
        let Some(text) = self.headers.as_deref() else {
            return Ok(HashMap::new());
        };
        text.split(',')
            .filter(|pair| !pair.trim().is_empty())
            .map(|pair| match pair.split_once('=') {
                Some((key, value)) if !key.trim().is_empty() => {
                    Ok((key.trim().to_owned(), value.trim().to_owned()))
                }
                _ => Err(TraceSetupError::Header(
                    pair.split('=').next().unwrap_or_default().trim().to_owned(),
                )),
            })
            .collect()
    }

    fn sampler(&self) -> Result<Option<opentelemetry_sdk::trace::Sampler>, TraceSetupError> {
        let ratio = self.sampler_ratio.unwrap_or(1.0);
        if !(0.0..=1.0).contains(&ratio) {
            return Err(TraceSetupError::Ratio(ratio));
        }
        Ok(self.sampler.map(|name| name.sampler(ratio)))
    }

    fn batch_config(&self) -> opentelemetry_sdk::trace::BatchConfig {
        // The builder's defaults are the OTEL_BSP_* variables, else the
        // specification's defaults.
        let mut config = opentelemetry_sdk::trace::BatchConfigBuilder::default();
        if let Some(size) = self.batch.max_queue_size {
            config = config.with_max_queue_size(size);
        }
        if let Some(size) = self.batch.max_export_batch_size {
            config = config.with_max_export_batch_size(size);
        }
        if let Some(delay) = self.batch.schedule_delay {
            config = config.with_scheduled_delay(delay);
        }
        config.build()
    }
}

/// The provider exporting the process's spans, and the runtime its HTTP
/// requests run on.
pub(crate) fn exporter(
    settings: &TraceSettings,
) -> Result<
    (
        opentelemetry_sdk::trace::SdkTracerProvider,
        tokio::runtime::Runtime,
    ),
    TraceSetupError,
> {
    let sampler = settings.sampler()?;
    let headers = settings.headers()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("cronbox-otlp")
        .enable_all()
        .build()
        .map_err(TraceSetupError::Runtime)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samplers_headers_and_ratios_are_read_or_refused_by_name() {
        assert_eq!(
            "ParentBased_TraceIdRatio".parse::<SamplerName>().unwrap(),
            SamplerName::ParentBasedTraceIdRatio
        );
        let unknown = "sometimes".parse::<SamplerName>().unwrap_err();
        assert!(unknown.to_string().contains("\"sometimes\""), "{unknown}");

        let settings = TraceSettings {
            headers: Some("api-key=s%20cret, tenant=a,".to_owned()),
            sampler: Some(SamplerName::TraceIdRatio),
            sampler_ratio: Some(0.25),
            ..TraceSettings::default()
        };
        let headers = settings.headers().unwrap();
        assert_eq!(headers["api-key"], "s%20cret"); // decoded by the exporter
        assert_eq!(headers["tenant"], "a");
        assert_eq!(
            format!("{:?}", settings.sampler().unwrap().unwrap()),
            format!(
                "{:?}",
                opentelemetry_sdk::trace::Sampler::TraceIdRatioBased(0.25)
            )
        );

        let bad_header = TraceSettings {
            headers: Some("novalue".to_owned()),
            ..TraceSettings::default()
        };
        assert!(
            matches!(bad_header.headers(), Err(TraceSetupError::Header(key)) if key == "novalue")
        );
        let bad_ratio = TraceSettings {
            sampler_ratio: Some(1.5),
            ..TraceSettings::default()
        };
        assert!(matches!(
            bad_ratio.sampler(),
            Err(TraceSetupError::Ratio(_))
        ));
    }
}
