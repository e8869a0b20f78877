//! Metrics over OTLP, for an operator whose stack collects by push: the
//! same metrics `/metrics` serves, read from the process's own OpenMetrics
//! text, sent every `OTEL_METRIC_EXPORT_INTERVAL` (60 s by default) as
//! OTLP/HTTP protobuf to `ENDPOINT/v1/metrics` (or
//! `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`). Counters become monotonic sums,
//! gauges gauges, histograms histograms, all cumulative from the process's
//! start and named as their Prometheus family (`cronbox_admin_tenant_runs`,
//! whose samples Prometheus calls `..._total`).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message as _;

use crate::settings::{OtelSettings, SetupError};

/// Why metrics could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum MetricsExportError {
    #[error("cannot send metrics to {url}: {source}")]
    Send {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("the collector at {url} answered {status}")]
    Refused {
        url: String,
        status: reqwest::StatusCode,
    },
}

/// Sends a process's metrics to an OTLP collector; cheap to clone.
#[derive(Debug, Clone)]
pub struct MetricsExporter {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    client: reqwest::Client,
    url: String,
    headers: reqwest::header::HeaderMap,
    interval: Duration,
    service_name: String,
    /// When the cumulative series started: the exporter's creation.
    started_unix_nano: u64,
}

impl MetricsExporter {
    pub(crate) fn new(
        url: String,
        headers: reqwest::header::HeaderMap,
        interval: Duration,
        service_name: String,
    ) -> Self {
        MetricsExporter {
            inner: Arc::new(Inner {
                client: cronbox_tls::client(),
                url,
                headers,
                interval,
                service_name,
                started_unix_nano: unix_nano(SystemTime::now()),
            }),
        }
    }

    /// How often the process's metrics are to be sent.
    pub fn interval(&self) -> Duration {
        self.inner.interval
    }

    /// Sends the metrics of `openmetrics` (the text `/metrics` serves).
    pub async fn export(&self, openmetrics: &str) -> Result<(), MetricsExportError> {
        let inner = &self.inner;
        let request = to_otlp(
            openmetrics,
            &inner.service_name,
            inner.started_unix_nano,
            unix_nano(SystemTime::now()),
        );
        let failed = |source| MetricsExportError::Send {
            url: inner.url.clone(),
            source,
        };
        let response = inner
            .client
            .post(&inner.url)
            .headers(inner.headers.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf")
            .timeout(Duration::from_secs(10))
            .body(request.encode_to_vec())
            .send()
            .await
            .map_err(failed)?;
        if !response.status().is_success() {
            return Err(MetricsExportError::Refused {
                url: inner.url.clone(),
                status: response.status(),
            });
        }
        Ok(())
    }

    /// Sends what `read` returns (the process's OpenMetrics text) every
    /// interval until `stop` completes; a failed export is logged and the
    /// next one tried at its time.
    pub async fn push_until<F, Read>(self, mut read: F, stop: impl Future<Output = ()>)
    where
        F: FnMut() -> Read,
        Read: Future<Output = String>,
    {
        let pushing = async {
            let mut ticks = tokio::time::interval(self.interval());
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                let text = read().await;
                if let Err(error) = self.export(&text).await {
                    tracing::warn!(%error, "metrics not exported");
                }
            }
        };
        tokio::select! {
            () = pushing => {}
            () = stop => {}
        }
    }
}

fn unix_nano(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64)
}

/// The exporter `settings` ask for, if any.
pub(crate) fn exporter(settings: &OtelSettings) -> Result<Option<MetricsExporter>, SetupError> {
    let Some(url) = settings.metrics_url() else {
        return Ok(None);
    };
    let mut headers = reqwest::header::HeaderMap::new();
    for (key, value) in settings.headers()? {
        let value = percent_encoding::percent_decode_str(&value).decode_utf8_lossy();
        let name = reqwest::header::HeaderName::from_bytes(key.as_bytes())
            .map_err(|_| SetupError::InvalidHeader(key.clone()))?;
        let value = reqwest::header::HeaderValue::from_str(&value)
            .map_err(|_| SetupError::InvalidHeader(key.clone()))?;
        headers.insert(name, value);
    }
    let interval = settings
        .metric_export_interval
        .filter(|interval| !interval.is_zero())
        .unwrap_or(DEFAULT_INTERVAL);
    Ok(Some(MetricsExporter::new(
        url,
        headers,
        interval,
        settings.service_name.clone(),
    )))
}

/// `OTEL_METRIC_EXPORT_INTERVAL`'s default.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

/// A metric family of the OpenMetrics text.
#[derive(Debug, Default)]
struct Family {
    name: String,
    help: String,
    kind: String,
    samples: Vec<Sample>,
}

/// One sample line: its name's suffix after the family's (`_total`,
/// `_bucket`, ...), labels and value.
#[derive(Debug)]
struct Sample {
    suffix: String,
    labels: Vec<(String, String)>,
    value: f64,
}

/// The families of an OpenMetrics (or Prometheus) text exposition; lines
/// it cannot read are skipped.
fn parse(text: &str) -> Vec<Family> {
    let mut families: Vec<Family> = Vec::new();
    for line in text.lines() {
        if let Some(comment) = line.strip_prefix("# ") {
            let mut words = comment.splitn(3, ' ');
            let (Some(what), Some(name)) = (words.next(), words.next()) else {
                continue;
            };
            let rest = words.next().unwrap_or_default();
            if families.last().is_none_or(|family| family.name != name) {
                families.push(Family {
                    name: name.to_owned(),
                    ..Family::default()
                });
            }
            let family = families.last_mut().expect("just pushed");
            match what {
                "HELP" => family.help = unescape(rest),
                "TYPE" => family.kind = rest.to_owned(),
                _ => {}
            }
            continue;
        }
        let Some(family) = families.last_mut() else {
            continue;
        };
        if let Some(sample) = sample(line, &family.name) {
            family.samples.push(sample);
        }
    }
    families
}

fn sample(line: &str, family: &str) -> Option<Sample> {
    let name_end = line.find(['{', ' '])?;
    let suffix = line[..name_end].strip_prefix(family)?.to_owned();
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(inside) = rest.strip_prefix('{') {
        let (parsed, after) = label_set(inside)?;
        labels = parsed;
        rest = after;
    }
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some(Sample {
        suffix,
        labels,
        value,
    })
}

/// `key="value",...}` → the pairs and what follows the `}`.
fn label_set(mut text: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        text = text.trim_start_matches(',');
        if let Some(after) = text.strip_prefix('}') {
            return Some((labels, after));
        }
        let (key, rest) = text.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next()? {
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                (at, '"') => break at,
                (_, other) => value.push(other),
            }
        };
        labels.push((key.to_owned(), value));
        text = &rest[end + 1..];
    }
}

fn unescape(text: &str) -> String {
    text.replace("\\n", "\n").replace("\\\\", "\\")
}

fn attributes(labels: &[(String, String)]) -> Vec<KeyValue> {
    labels
        .iter()
        .map(|(key, value)| text_attribute(key, value))
        .collect()
}

fn text_attribute(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_owned())),
        }),
        ..KeyValue::default()
    }
}

/// The OTLP request carrying the metrics of `openmetrics`.
fn to_otlp(
    openmetrics: &str,
    service_name: &str,
    start: u64,
    now: u64,
) -> ExportMetricsServiceRequest {
    let number = |sample: &Sample| NumberDataPoint {
        attributes: attributes(&sample.labels),
        start_time_unix_nano: start,
        time_unix_nano: now,
        value: Some(number_data_point::Value::AsDouble(sample.value)),
        ..NumberDataPoint::default()
    };
    let cumulative = AggregationTemporality::Cumulative as i32;
    let metrics = parse(openmetrics)
        .into_iter()
        .filter_map(|family| {
            let data = match family.kind.as_str() {
                "counter" => metric::Data::Sum(Sum {
                    data_points: family
                        .samples
                        .iter()
                        .filter(|sample| sample.suffix == "_total")
                        .map(number)
                        .collect(),
                    aggregation_temporality: cumulative,
                    is_monotonic: true,
                }),
                "gauge" | "unknown" | "" => metric::Data::Gauge(Gauge {
                    data_points: family
                        .samples
                        .iter()
                        .filter(|sample| sample.suffix.is_empty())
                        .map(number)
                        .collect(),
                }),
                "histogram" => metric::Data::Histogram(Histogram {
                    data_points: histogram_points(&family.samples, start, now),
                    aggregation_temporality: cumulative,
                }),
                _ => return None,
            };
            Some(Metric {
                name: family.name,
                description: family.help,
                data: Some(data),
                ..Metric::default()
            })
        })
        .collect();
    let service = text_attribute("service.name", service_name);
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: vec![service],
                ..Resource::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                metrics,
                ..ScopeMetrics::default()
            }],
            ..ResourceMetrics::default()
        }],
    }
}

/// A histogram family's samples as one data point per label set: the
/// cumulative `_bucket{le}` counts made per bucket, with `_sum` and
/// `_count`.
fn histogram_points(samples: &[Sample], start: u64, now: u64) -> Vec<HistogramDataPoint> {
    let mut points: Vec<Point> = Vec::new();
    for sample in samples {
        let mut labels = sample.labels.clone();
        let le = labels
            .iter()
            .position(|(key, _)| key == "le")
            .map(|at| labels.remove(at).1);
        let index = match points.iter().position(|point| point.labels == labels) {
            Some(index) => index,
            None => {
                points.push(Point {
                    labels,
                    ..Point::default()
                });
                points.len() - 1
            }
        };
        let point = &mut points[index];
        match (sample.suffix.as_str(), le) {
            ("_bucket", Some(le)) => {
                if let Ok(bound) = le.parse::<f64>() {
                    point.cumulative.push((bound, sample.value));
                }
            }
            ("_sum", _) => point.sum = sample.value,
            ("_count", _) => point.count = sample.value,
            _ => {}
        }
    }
    points
        .into_iter()
        .map(|mut point| {
            point.cumulative.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut below = 0.0;
            let bucket_counts = point
                .cumulative
                .iter()
                .map(|(_, cumulative)| {
                    let in_bucket = (cumulative - below).max(0.0);
                    below = *cumulative;
                    in_bucket as u64
                })
                .collect();
            HistogramDataPoint {
                attributes: attributes(&point.labels),
                start_time_unix_nano: start,
                time_unix_nano: now,
                count: point.count as u64,
                sum: Some(point.sum),
                bucket_counts,
                explicit_bounds: point
                    .cumulative
                    .iter()
                    .map(|(bound, _)| *bound)
                    .filter(|bound| bound.is_finite())
                    .collect(),
                ..HistogramDataPoint::default()
            }
        })
        .collect()
}

/// A histogram's samples of one label set, as read.
#[derive(Debug, Default)]
struct Point {
    labels: Vec<(String, String)>,
    /// (upper bound, observations at or below it).
    cumulative: Vec<(f64, f64)>,
    sum: f64,
    count: f64,
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::EncodeLabelSet;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family as Labelled;
    use prometheus_client::metrics::gauge::Gauge as PromGauge;
    use prometheus_client::metrics::histogram::Histogram as PromHistogram;

    use super::*;

    #[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
    struct Tenant {
        tenant: String,
    }

    #[test]
    fn a_registrys_counters_gauges_and_histograms_become_otlp_metrics() {
        let mut registry = prometheus_client::registry::Registry::with_prefix("cronbox_test");
        let runs = Labelled::<Tenant, Counter>::default();
        registry.register("runs", "Runs ended, by tenant", runs.clone());
        let alive = PromGauge::<i64>::default();
        registry.register("alive", "Executors alive", alive.clone());
        let lateness =
            Labelled::<Tenant, PromHistogram, fn() -> PromHistogram>::new_with_constructor(|| {
                PromHistogram::new([0.01, 0.1])
            });
        registry.register("lateness_seconds", "Lateness", lateness.clone());
        let odd = Tenant {
            tenant: "a\"b\\c".to_owned(),
        };
        runs.get_or_create(&odd).inc_by(3);
        alive.set(2);
        for seconds in [0.005, 0.05, 0.07, 5.0] {
            lateness.get_or_create(&odd).observe(seconds);
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();

        let request = to_otlp(&text, "cronbox-test", 1, 2);
        let resource = &request.resource_metrics[0];
        let metrics = &resource.scope_metrics[0].metrics;
        let named = |name: &str| {
            metrics
                .iter()
                .find(|metric| metric.name == name)
                .unwrap_or_else(|| panic!("no {name} in {metrics:#?}"))
        };
        let tenant_is_odd = |attributes: &[KeyValue]| {
            attributes.len() == 1
                && attributes[0].key == "tenant"
                && attributes[0].value
                    == Some(AnyValue {
                        value: Some(any_value::Value::StringValue("a\"b\\c".to_owned())),
                    })
        };
        let runs = named("cronbox_test_runs");
        assert_eq!(runs.description, "Runs ended, by tenant.");
        let Some(metric::Data::Sum(sum)) = &runs.data else {
            panic!("{runs:?}")
        };
        assert!(sum.is_monotonic);
        assert_eq!(sum.data_points.len(), 1);
        assert!(tenant_is_odd(&sum.data_points[0].attributes));
        assert_eq!(
            sum.data_points[0].value,
            Some(number_data_point::Value::AsDouble(3.0))
        );
        assert_eq!(
            (
                sum.data_points[0].start_time_unix_nano,
                sum.data_points[0].time_unix_nano
            ),
            (1, 2)
        );
        let Some(metric::Data::Gauge(gauge)) = &named("cronbox_test_alive").data else {
            panic!()
        };
        assert_eq!(
            gauge.data_points[0].value,
            Some(number_data_point::Value::AsDouble(2.0))
        );
        let Some(metric::Data::Histogram(histogram)) = &named("cronbox_test_lateness_seconds").data
        else {
            panic!()
        };
        let point = &histogram.data_points[0];
        assert!(tenant_is_odd(&point.attributes));
        assert_eq!(point.explicit_bounds, vec![0.01, 0.1]);
        assert_eq!(point.bucket_counts, vec![1, 2, 1]);
        assert_eq!(point.count, 4);
        assert!((point.sum.unwrap() - 5.125).abs() < 1e-9);
        assert_eq!(
            resource.resource.as_ref().unwrap().attributes[0].key,
            "service.name"
        );
    }
}
