//! W3C trace context (`traceparent`) across cronbox's hops: the admin's
//! fire span is sent with its run command, the executor's run span
//! continues it, and a guest's HTTP request carries the executor's current
//! span to the service it calls.
//!
//! Spans are `tracing` spans; with no OpenTelemetry layer installed (the
//! default) they are disabled, and these functions return at once without
//! allocating.

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The target of every span cronbox exports: an OpenTelemetry layer
/// filtered to it sees runs, not cronbox's internal logging.
pub const TARGET: &str = "cronbox::trace";

/// `span`'s context as a `traceparent` value (`00-TRACE-SPAN-FLAGS`), or
/// `None` when it is not traced.
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    if span.is_disabled() {
        return None;
    }
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            span_context.trace_id(),
            span_context.span_id(),
            span_context.trace_flags().to_u8()
        )
    })
}

/// Makes `span` a child of the span `traceparent` names (ignored when it
/// does not parse, or `span` is not traced).
pub fn continue_from(span: &tracing::Span, traceparent: &str) {
    if span.is_disabled() {
        return;
    }
    if let Some(remote) = parse(traceparent) {
        let parent = opentelemetry::Context::new().with_remote_span_context(remote);
        let _ = span.set_parent(parent);
    }
}

/// The trace id (32 hex digits) of a `traceparent` value.
pub fn trace_id(traceparent: &str) -> Option<&str> {
    let id = traceparent.split('-').nth(1)?;
    (id.len() == 32 && id.bytes().all(|byte| byte.is_ascii_hexdigit())).then_some(id)
}

fn parse(traceparent: &str) -> Option<SpanContext> {
    let mut parts = traceparent.split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version != "00" || trace.len() != 32 || span.len() != 16 || flags.len() != 2 {
        return None;
    }
    let trace = TraceId::from_hex(trace).ok()?;
    let span = SpanId::from_hex(span).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let context = SpanContext::new(
        trace,
        span,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    );
    context.is_valid().then_some(context)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_parsed_and_refused_when_malformed() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let parsed = parse(good).expect("parsed");
        assert_eq!(
            parsed.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert!(parsed.is_sampled());
        assert_eq!(trace_id(good), Some("4bf92f3577b34da6a3ce929d0e0e4736"));
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-xyz-00f067aa0ba902b7-01",
        ] {
            assert!(parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn without_a_layer_nothing_is_traced() {
        let span = tracing::info_span!(target: TARGET, "fire");
        assert_eq!(traceparent(&span), None);
        continue_from(
            &span,
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        );
    }
}
