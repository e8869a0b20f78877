//! A test OTLP receiver: an HTTP server on loopback taking `POST
//! /v1/traces` and `/v1/metrics` as OTLP/HTTP with protobuf, decoded with
//! OpenTelemetry's published proto definitions, keeping every span and
//! every metric it was sent and the headers of each export.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message as _;

/// A span as received.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    /// The `service.name` of the process that sent it.
    pub service: String,
    pub name: String,
    /// Hex, as in a `traceparent`.
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    /// OTLP's span kind (2 server, 3 client, 4 producer, 5 consumer).
    pub kind: i32,
    /// Its attributes, each value as text.
    pub attributes: HashMap<String, String>,
}

/// Receives spans until dropped.
#[derive(Debug)]
pub struct OtlpReceiver {
    addr: SocketAddr,
    received: Arc<Received>,
    server: tokio::task::JoinHandle<()>,
}

/// A number data point of a metric as received (a sum's or a gauge's).
#[derive(Debug, Clone)]
pub struct ReceivedPoint {
    /// The `service.name` of the process that sent it.
    pub service: String,
    pub metric: String,
    /// Whether the metric is a monotonic sum (a Prometheus counter).
    pub monotonic: bool,
    pub attributes: HashMap<String, String>,
    pub value: f64,
}

#[derive(Debug, Default)]
struct Received {
    spans: Mutex<Vec<ReceivedSpan>>,
    points: Mutex<Vec<ReceivedPoint>>,
    /// Each export request's headers, in order.
    headers: Mutex<Vec<HeaderMap>>,
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl OtlpReceiver {
    pub async fn start() -> OtlpReceiver {
        let received = Arc::new(Received::default());
        let app = Router::new()
            .route("/v1/traces", post(receive))
            .route("/v1/metrics", post(receive_metrics))
            .with_state(received.clone());
        let (addr, server) = crate::serve_on("127.0.0.1:0", app).await;
        OtlpReceiver {
            addr,
            received,
            server,
        }
    }

    /// What `OTEL_EXPORTER_OTLP_ENDPOINT` is set to.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.received.spans.lock().expect("not poisoned").clone()
    }

    /// Every number data point received so far (sums and gauges).
    pub fn points(&self) -> Vec<ReceivedPoint> {
        self.received.points.lock().expect("not poisoned").clone()
    }

    /// The values of header `name` in the exports so far, in order.
    pub fn header_values(&self, name: &str) -> Vec<String> {
        let headers = self.received.headers.lock().expect("not poisoned");
        headers
            .iter()
            .filter_map(|headers| headers.get(name)?.to_str().ok().map(str::to_owned))
            .collect()
    }
}

fn text(value: Option<AnyValue>) -> String {
    match value {
        Some(AnyValue::StringValue(text)) => text,
        Some(AnyValue::IntValue(number)) => number.to_string(),
        Some(AnyValue::DoubleValue(number)) => number.to_string(),
        Some(AnyValue::BoolValue(flag)) => flag.to_string(),
        other => format!("{other:?}"),
    }
}

fn attributes(pairs: Vec<KeyValue>) -> HashMap<String, String> {
    pairs
        .into_iter()
        .map(|pair| (pair.key, text(pair.value.and_then(|value| value.value))))
        .collect()
}

/// The `service.name` of an export's resource.
fn service_name(resource: Option<opentelemetry_proto::tonic::resource::v1::Resource>) -> String {
    resource
        .map(|resource| attributes(resource.attributes))
        .and_then(|mut attributes| attributes.remove("service.name"))
        .unwrap_or_default()
}

async fn receive(
    State(received): State<Arc<Received>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    received.headers.lock().expect("not poisoned").push(headers);
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return StatusCode::BAD_REQUEST;
    };
    let mut spans = Vec::new();
    for resource_spans in request.resource_spans {
        let service = service_name(resource_spans.resource);
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                spans.push(ReceivedSpan {
                    service: service.clone(),
                    name: span.name,
                    trace_id: hex::encode(span.trace_id),
                    span_id: hex::encode(span.span_id),
                    parent_span_id: hex::encode(span.parent_span_id),
                    kind: span.kind,
                    attributes: attributes(span.attributes),
                });
            }
        }
    }
    received.spans.lock().expect("not poisoned").extend(spans);
    StatusCode::OK
}

async fn receive_metrics(
    State(received): State<Arc<Received>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
    use opentelemetry_proto::tonic::metrics::v1::{metric::Data, number_data_point::Value};
    received.headers.lock().expect("not poisoned").push(headers);
    let Ok(request) = ExportMetricsServiceRequest::decode(body) else {
        return StatusCode::BAD_REQUEST;
    };
    let mut points = Vec::new();
    for resource_metrics in request.resource_metrics {
        let service = service_name(resource_metrics.resource);
        for scope in resource_metrics.scope_metrics {
            for metric in scope.metrics {
                let (monotonic, data_points) = match metric.data {
                    Some(Data::Sum(sum)) => (sum.is_monotonic, sum.data_points),
                    Some(Data::Gauge(gauge)) => (false, gauge.data_points),
                    _ => continue,
                };
                for point in data_points {
                    let value = match point.value {
                        Some(Value::AsDouble(value)) => value,
                        Some(Value::AsInt(value)) => value as f64,
                        None => continue,
                    };
                    points.push(ReceivedPoint {
                        service: service.clone(),
                        metric: metric.name.clone(),
                        monotonic,
                        attributes: attributes(point.attributes),
                        value,
                    });
                }
            }
        }
    }
    received.points.lock().expect("not poisoned").extend(points);
    StatusCode::OK
}
