//! The OpenTelemetry settings: the flags and file keys named after the
//! standard variables, and the variables the specification names where
//! no flag is given.

use std::collections::HashMap;
use std::time::Duration;

/// Where traces and metrics go and how, from the flags named like the
/// standard variables (`--otel-endpoint` is `OTEL_EXPORTER_OTLP_ENDPOINT`,
/// ...), or the variables themselves. Anything left `None` is the SDK's
/// default (which reads the variables the specification names).
#[derive(Debug, Clone)]
pub struct OtelSettings {
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
    /// Whether metrics are sent too (`OTEL_METRICS_EXPORTER` other than
    /// `none`).
    pub metrics: bool,
    /// How often metrics are sent (`OTEL_METRIC_EXPORT_INTERVAL`, 60 s).
    pub metric_export_interval: Option<Duration>,
}

impl Default for OtelSettings {
    fn default() -> Self {
        OtelSettings {
            endpoint: None,
            service_name: String::new(),
            headers: None,
            sampler: None,
            sampler_ratio: None,
            batch: BatchSettings::default(),
            metrics: true,
            metric_export_interval: None,
        }
    }
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

/// Why traces or metrics cannot be exported as asked.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cannot start the exporter's runtime: {0}")]
    Runtime(std::io::Error),
    #[error("the sampler's ratio must be between 0 and 1, not {0}")]
    Ratio(f64),
    #[error("header {0:?} of the OTLP headers is not key=value")]
    Header(String),
    #[error("header {0:?} of the OTLP headers is not a valid HTTP header")]
    InvalidHeader(String),
    #[error("the OTLP exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
}

impl OtelSettings {
    /// Whether traces are asked for: an endpoint, and the SDK not disabled.
    pub(crate) fn traces_asked(&self) -> bool {
        !disabled() && (self.has_endpoint() || set(&env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")))
    }

    /// Where metrics go, when they are asked for: to the metrics endpoint,
    /// else under the endpoint, unless metrics or the SDK are turned off.
    pub(crate) fn metrics_url(&self) -> Option<String> {
        if disabled() || !self.metrics {
            return None;
        }
        let own = env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
        if set(&own) {
            return own;
        }
        let base = self
            .endpoint
            .as_deref()
            .filter(|url| !url.trim().is_empty())?;
        Some(format!("{}/v1/metrics", base.trim_end_matches('/')))
    }

    fn has_endpoint(&self) -> bool {
        set(&self.endpoint)
    }

    /// The headers of every export, values as written (URL-encoded).
    pub(crate) fn headers(&self) -> Result<HashMap<String, String>, SetupError> {
        let Some(text) = self.headers.as_deref() else {
            return Ok(HashMap::new());
        };
        text.split(',')
            .filter(|pair| !pair.trim().is_empty())
            .map(|pair| match pair.split_once('=') {
                Some((key, value)) if !key.trim().is_empty() => {
                    Ok((key.trim().to_owned(), value.trim().to_owned()))
                }
                _ => Err(SetupError::Header(
                    pair.split('=').next().unwrap_or_default().trim().to_owned(),
                )),
            })
            .collect()
    }

    pub(crate) fn sampler(&self) -> Result<Option<opentelemetry_sdk::trace::Sampler>, SetupError> {
        let ratio = self.sampler_ratio.unwrap_or(1.0);
        if !(0.0..=1.0).contains(&ratio) {
            return Err(SetupError::Ratio(ratio));
        }
        Ok(self.sampler.map(|name| name.sampler(ratio)))
    }

    pub(crate) fn batch_config(&self) -> opentelemetry_sdk::trace::BatchConfig {
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

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn set(value: &Option<String>) -> bool {
    value
        .as_deref()
        .is_some_and(|value| !value.trim().is_empty())
}

/// `OTEL_SDK_DISABLED=true`.
fn disabled() -> bool {
    env("OTEL_SDK_DISABLED").is_some_and(|value| value.trim().eq_ignore_ascii_case("true"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samplers_headers_ratios_and_the_metrics_url_are_read_or_refused_by_name() {
        assert_eq!(
            "ParentBased_TraceIdRatio".parse::<SamplerName>().unwrap(),
            SamplerName::ParentBasedTraceIdRatio
        );
        let unknown = "sometimes".parse::<SamplerName>().unwrap_err();
        assert!(unknown.to_string().contains("\"sometimes\""), "{unknown}");

        let settings = OtelSettings {
            headers: Some("api-key=s%20cret, tenant=a,".to_owned()),
            sampler: Some(SamplerName::TraceIdRatio),
            sampler_ratio: Some(0.25),
            ..OtelSettings::default()
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

        let bad_header = OtelSettings {
            headers: Some("novalue".to_owned()),
            ..OtelSettings::default()
        };
        assert!(matches!(bad_header.headers(), Err(SetupError::Header(key)) if key == "novalue"));
        let metrics = OtelSettings {
            endpoint: Some("http://127.0.0.1:4318/".to_owned()),
            ..OtelSettings::default()
        };
        assert_eq!(
            metrics.metrics_url().as_deref(),
            Some("http://127.0.0.1:4318/v1/metrics")
        );
        let no_metrics = OtelSettings {
            metrics: false,
            ..metrics
        };
        assert_eq!(no_metrics.metrics_url(), None);
        let bad_ratio = OtelSettings {
            sampler_ratio: Some(1.5),
            ..OtelSettings::default()
        };
        assert!(matches!(bad_ratio.sampler(), Err(SetupError::Ratio(_))));
    }
}
