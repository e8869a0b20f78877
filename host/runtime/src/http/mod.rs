//! Outbound HTTP for jobs: the host side of `wasi:http/outgoing-handler`,
//! under the run's grants and limits.
//!
//! `wasmtime-wasi-http` implements the interfaces; every request a guest
//! sends reaches [`HttpGate::send_request`], which decides and sends it:
//!
//! 1. The URL's origin must match one of the run's grants, and the run must
//!    have requests left (its count and concurrency limits); otherwise the
//!    guest gets `HTTP-request-denied` (or `connection-limit-reached`), an
//!    error value and not a trap.
//! 2. The host name is resolved once and the address checked against the
//!    executor's [`NetPolicy`] (no loopback, private, link-local or
//!    metadata address unless the operator allows its network); the
//!    connection goes to that checked address, so DNS rebinding gains
//!    nothing. Redirects are not followed here: a guest that follows one
//!    sends a new request, checked again.
//! 3. Connect and first-byte timeouts are the job's, cut to the run's
//!    deadline; request and response bodies are metered against the run's
//!    byte limits (a body over the limit ends with `HTTP-*-body-size`).
//! 4. One host line per request goes to the run's log (method, origin,
//!    status, bytes, milliseconds; never headers or bodies), and the
//!    runtime's [`HttpStats`] count requests, bytes and denials.
//!
//! A request in flight lives in tasks owned by the store's resource table
//! and raced against the run's kill and deadline: a kill, timeout or cover
//! ends it at once.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cronbox_net_policy::{Denied, NetPolicy, OriginPattern, Scheme};
use cronbox_protocol::HttpLimits;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use crate::run::RunHandle;

mod connect;

use connect::{Failure, Target, send};

/// Outbound HTTP counted: across every run of a runtime, or for one run
/// (which adds to its runtime's counters too).
#[derive(Debug, Default)]
pub struct HttpStats {
    requests: AtomicU64,
    denied: AtomicU64,
    failed: AtomicU64,
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    /// The runtime's counters, for a run's.
    total: Option<Arc<HttpStats>>,
}

/// A reading of [`HttpStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HttpStatsSnapshot {
    /// Requests sent (whatever their response).
    pub requests: u64,
    /// Requests refused: no grant, a limit reached, a forbidden address.
    pub denied: u64,
    /// Requests sent that got no response (connection, TLS, timeout).
    pub failed: u64,
    /// Request body bytes sent.
    pub bytes_sent: u64,
    /// Response body bytes received.
    pub bytes_received: u64,
}

impl HttpStats {
    /// One run's counters, adding to `total` as well.
    pub(crate) fn within(total: Arc<HttpStats>) -> HttpStats {
        HttpStats {
            total: Some(total),
            ..HttpStats::default()
        }
    }

    /// Adds `n` to the counter `pick` chooses (and to the runtime's).
    fn add(&self, pick: fn(&HttpStats) -> &AtomicU64, n: u64) {
        pick(self).fetch_add(n, Ordering::Relaxed);
        if let Some(total) = &self.total {
            total.add(pick, n);
        }
    }

    /// The counters now.
    pub fn snapshot(&self) -> HttpStatsSnapshot {
        HttpStatsSnapshot {
            requests: self.requests.load(Ordering::Relaxed),
            denied: self.denied.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            bytes_sent: self.bytes_sent.load(Ordering::Relaxed),
            bytes_received: self.bytes_received.load(Ordering::Relaxed),
        }
    }
}

/// What one run may do over HTTP, and what it did so far.
pub(crate) struct HttpGate {
    grants: Arc<[OriginPattern]>,
    limits: HttpLimits,
    nets: Arc<NetPolicy>,
    deadline: Instant,
    handle: RunHandle,
    usage: Arc<RunUsage>,
    stats: Arc<HttpStats>,
}

/// One run's use of its limits.
#[derive(Debug, Default)]
struct RunUsage {
    requests: AtomicU32,
    in_flight: AtomicU32,
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    /// A request body went past the run's limit of bytes sent (hyper
    /// reports the cut body as its own error; this says what it was).
    sent_over: std::sync::atomic::AtomicBool,
}

impl HttpGate {
    pub(crate) fn new(
        grants: Arc<[OriginPattern]>,
        limits: HttpLimits,
        nets: Arc<NetPolicy>,
        deadline: Instant,
        handle: RunHandle,
        stats: Arc<HttpStats>,
    ) -> HttpGate {
        HttpGate {
            grants,
            limits,
            nets,
            deadline,
            handle,
            usage: Arc::default(),
            stats,
        }
    }

    /// A gate that grants nothing (between runs, during `destroy`).
    pub(crate) fn closed(handle: RunHandle, stats: Arc<HttpStats>) -> HttpGate {
        HttpGate::new(
            Arc::new([]),
            HttpLimits::default(),
            Arc::new(NetPolicy::public_only()),
            Instant::now(),
            handle,
            stats,
        )
    }

    /// The runtime's counters this gate adds to.
    pub(crate) fn stats(&self) -> Arc<HttpStats> {
        self.stats.clone()
    }

    /// Refuses a request before anything is sent: logged and counted.
    fn deny(&self, mut record: RequestRecord, error: Error, why: String) -> SendFuture {
        self.stats.add(|stats| &stats.denied, 1);
        record.denied = Some(why);
        drop(record);
        Box::new(async move { Err(error) })
    }
}

type SendFuture = Box<
    dyn Future<
            Output = wasmtime_wasi_http::Result<(
                http::Response<WasiBody>,
                Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
            )>,
        > + Send,
>;

/// Most bytes of a request body the host buffers per write: with the
/// resource table's bound, what a guest holding many unsent requests can
/// make the host keep stays small (4096 × 16 KiB).
const OUTGOING_CHUNK_BYTES: usize = 16 << 10;

impl WasiHttpHooks for HttpGate {
    fn p2_outgoing_body_chunk_size(&mut self) -> usize {
        OUTGOING_CHUNK_BYTES
    }

    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _response_errors: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> SendFuture {
        let uri = request.uri();
        let scheme = match uri.scheme_str() {
            Some("https") => Scheme::Https,
            _ => Scheme::Http,
        };
        let host = uri.host().unwrap_or_default().to_owned();
        let port = uri.port_u16().unwrap_or(scheme.default_port());
        let origin = format!(
            "{}://{}:{port}",
            if scheme == Scheme::Https {
                "https"
            } else {
                "http"
            },
            uri.host().unwrap_or_default()
        );
        let record = RequestRecord {
            method: request.method().to_string(),
            origin,
            started: Instant::now(),
            status: None,
            sent: Arc::default(),
            received: 0,
            error: None,
            denied: None,
            log: self.handle.clone(),
        };
        if !self
            .grants
            .iter()
            .any(|grant| grant.matches(scheme, &host, port))
        {
            let why = if self.grants.is_empty() {
                "the job has no HTTP grant".to_owned()
            } else {
                "no grant of the job covers this origin".to_owned()
            };
            return self.deny(record, Error::HttpRequestDenied, why);
        }
        if self.usage.requests.fetch_add(1, Ordering::SeqCst) >= self.limits.max_requests {
            let why = format!(
                "the run's limit of {} requests is reached",
                self.limits.max_requests
            );
            return self.deny(record, Error::HttpRequestDenied, why);
        }
        if self.usage.in_flight.fetch_add(1, Ordering::SeqCst) >= self.limits.max_concurrent {
            self.usage.in_flight.fetch_sub(1, Ordering::SeqCst);
            let why = format!(
                "the run's limit of {} requests at once is reached",
                self.limits.max_concurrent
            );
            return self.deny(record, Error::ConnectionLimitReached, why);
        }
        let in_flight = InFlight(self.usage.clone());

        // Timeouts: the job's, the guest's own if shorter, never past the
        // run's deadline.
        let left = self.deadline.saturating_duration_since(Instant::now());
        let shorter = |limit_ms: u64, asked: Option<Duration>| {
            let limit = Duration::from_millis(limit_ms).min(left);
            asked.map_or(limit, |asked| asked.min(limit))
        };
        let connect_timeout = shorter(
            self.limits.connect_timeout_ms,
            options.and_then(|o| o.connect_timeout),
        );
        let first_byte_timeout = shorter(
            self.limits.first_byte_timeout_ms,
            options.and_then(|o| o.first_byte_timeout),
        );
        let (mut parts, body) = request.into_parts();
        // Its address in the span, the run's secrets masked as its log
        // masks them (a webhook URL may carry one in its path; the query
        // is left out).
        let url = crate::log::mask(
            &format!("{}{}", record.origin, parts.uri.path()),
            &self.handle.log().masks(),
        );
        // A client span under the run's, whose context the called service
        // receives as `traceparent` (nothing when traces are off).
        let span = tracing::info_span!(
            target: cronbox_protocol::trace_context::TARGET,
            "HTTP request",
            otel.name = %parts.method,
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            http.request.method = %parts.method,
            url.full = %url,
            server.address = %host,
            server.port = port,
            http.response.status_code = tracing::field::Empty,
        );
        if let Some(traceparent) = cronbox_protocol::trace_context::traceparent(&span)
            && let Ok(value) = http::HeaderValue::from_str(&traceparent)
        {
            parts.headers.insert("traceparent", value);
        }
        // The request line carries the path only (no proxy in between).
        parts.uri = match parts.uri.path_and_query() {
            Some(path) => http::Uri::from(path.clone()),
            None => http::Uri::from_static("/"),
        };
        let sent = Metered {
            inner: body,
            usage: self.usage.clone(),
            stats: self.stats.clone(),
            direction: Direction::Sent {
                request: record.sent.clone(),
            },
            limit: self.limits.max_bytes_sent,
            in_flight: None,
            record: None,
        };
        let target = Target {
            scheme,
            host,
            port,
            connect_timeout,
            first_byte_timeout,
        };
        let nets = self.nets.clone();
        let stats = self.stats.clone();
        let usage = self.usage.clone();
        let limit_received = self.limits.max_bytes_received;
        let limit_sent = self.limits.max_bytes_sent;
        let handle = self.handle.clone();
        let deadline = self.deadline;
        let request = http::Request::from_parts(parts, sent);
        let traced = span.clone();
        Box::new(tracing::Instrument::instrument(
            async move {
                let mut record = record;
                let sending = send(request, &target, &nets);
                let result = tokio::select! {
                    biased;
                    _ = handle.cancelled() => Err(Failure::Stopped),
                    _ = tokio::time::sleep_until(deadline.into()) => Err(Failure::Stopped),
                    result = sending => result,
                };
                let status = result
                    .as_ref()
                    .ok()
                    .map(|(response, _)| response.status().as_u16());
                if !traced.is_disabled() {
                    match status {
                        Some(status) => traced.record("http.response.status_code", status),
                        None => traced.record("otel.status_code", "error"),
                    };
                }
                match result {
                    Ok((response, connection)) => {
                        stats.add(|stats| &stats.requests, 1);
                        record.status = Some(response.status().as_u16());
                        let response = response.map(|incoming| {
                            Metered {
                                inner: incoming.map_err(Error::from).boxed_unsync(),
                                usage,
                                stats,
                                direction: Direction::Received,
                                limit: limit_received,
                                in_flight: Some(in_flight),
                                record: Some(record),
                            }
                            .boxed_unsync()
                        });
                        let connection = async move { connection.await.map_err(Error::from) };
                        Ok((
                            response,
                            Box::new(connection) as Box<dyn Future<Output = _> + Send>,
                        ))
                    }
                    Err(Failure::Denied(denied)) => {
                        stats.add(|stats| &stats.denied, 1);
                        // A refused address names the flag that allows it.
                        record.denied = Some(match denied {
                            Denied::Special { .. } => format!(
                                "{denied} (an operator allows a network with the executor's \
                                 --http-allow-nets)"
                            ),
                            _ => denied.to_string(),
                        });
                        drop(in_flight);
                        Err(match denied {
                            Denied::Special { .. } => Error::DestinationIpProhibited,
                            Denied::NoAddress { .. } => Error::DestinationNotFound,
                            Denied::Unresolved { reason, .. } => Error::DnsError {
                                rcode: Some(reason),
                                info_code: None,
                            },
                        })
                    }
                    Err(Failure::Error(_)) if usage.sent_over.load(Ordering::SeqCst) => {
                        stats.add(|stats| &stats.requests, 1);
                        stats.add(|stats| &stats.failed, 1);
                        record.error = Some(format!(
                            "cut: the run's limit of {limit_sent} bytes sent is reached"
                        ));
                        drop(in_flight);
                        Err(Error::HttpRequestBodySize(Some(limit_sent)))
                    }
                    Err(Failure::Error(error)) => {
                        stats.add(|stats| &stats.requests, 1);
                        stats.add(|stats| &stats.failed, 1);
                        record.error = Some(format!("failed: {error}"));
                        drop(in_flight);
                        Err(error)
                    }
                    Err(Failure::Stopped) => {
                        stats.add(|stats| &stats.failed, 1);
                        record.error = Some("cancelled: the run ended".to_owned());
                        drop(in_flight);
                        Err(Error::ConnectionTerminated)
                    }
                }
            },
            span,
        ))
    }
}

/// Which way a metered body flows.
enum Direction {
    Sent { request: Arc<AtomicU64> },
    Received,
}

/// A body counted against the run's byte limit for its direction; the
/// response's body also holds the request's in-flight slot and its log
/// record, released and written when the body ends or is dropped.
struct Metered {
    inner: WasiBody,
    usage: Arc<RunUsage>,
    stats: Arc<HttpStats>,
    direction: Direction,
    limit: u64,
    in_flight: Option<InFlight>,
    record: Option<RequestRecord>,
}

impl Body for Metered {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            Poll::Ready(None) => {
                // The end: release the slot and write the log line now.
                self.in_flight = None;
                self.record = None;
                return Poll::Ready(None);
            }
            other => return other,
        };
        let Some(data) = frame.data_ref() else {
            return Poll::Ready(Some(Ok(frame)));
        };
        let bytes = data.len() as u64;
        let (run_total, over) = match &self.direction {
            Direction::Sent { request } => {
                request.fetch_add(bytes, Ordering::Relaxed);
                self.stats.add(|stats| &stats.bytes_sent, bytes);
                let total = self.usage.bytes_sent.fetch_add(bytes, Ordering::SeqCst) + bytes;
                if total > self.limit {
                    self.usage.sent_over.store(true, Ordering::SeqCst);
                }
                (total, Error::HttpRequestBodySize(Some(self.limit)))
            }
            Direction::Received => {
                self.stats.add(|stats| &stats.bytes_received, bytes);
                if let Some(record) = &mut self.record {
                    record.received += bytes;
                }
                let total = self.usage.bytes_received.fetch_add(bytes, Ordering::SeqCst) + bytes;
                (total, Error::HttpResponseBodySize(Some(self.limit)))
            }
        };
        if run_total > self.limit {
            let what = match self.direction {
                Direction::Sent { .. } => "sent",
                Direction::Received => "received",
            };
            let limit = self.limit;
            if let Some(record) = &mut self.record {
                record.error = Some(format!(
                    "cut: the run's limit of {limit} bytes {what} is reached"
                ));
            }
            self.in_flight = None;
            self.record = None;
            return Poll::Ready(Some(Err(over)));
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Holds one of the run's concurrent-request slots.
struct InFlight(Arc<RunUsage>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What the run's log says about one request, written once when the
/// request ends (its response body read, dropped or cut, or no response).
struct RequestRecord {
    method: String,
    origin: String,
    started: Instant,
    status: Option<u16>,
    sent: Arc<AtomicU64>,
    received: u64,
    error: Option<String>,
    /// Why it was refused before anything was sent.
    denied: Option<String>,
    log: RunHandle,
}

impl Drop for RequestRecord {
    fn drop(&mut self) {
        let mut line = format!("http {} {}", self.method, self.origin);
        if let Some(why) = &self.denied {
            line.push_str(&format!(" denied: {why}"));
            self.log.log().host(line);
            return;
        }
        if let Some(status) = self.status {
            line.push_str(&format!(" {status}"));
        }
        line.push_str(&format!(
            ", {} B sent, {} B received, {} ms",
            self.sent.load(Ordering::Relaxed),
            self.received,
            self.started.elapsed().as_millis()
        ));
        if let Some(error) = &self.error {
            line.push_str(&format!(" ({error})"));
        }
        self.log.log().host(line);
    }
}
