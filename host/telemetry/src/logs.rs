//! Log lines on stderr: text for people, or one JSON object a line for a
//! log pipeline. A JSON line written inside a traced run carries the
//! OpenTelemetry `trace_id` and `span_id` of the span it was written in, so
//! a log search and a trace viewer meet on the same ids.

use tracing_subscriber::Layer;
use tracing_subscriber::fmt::format::{self, FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::{FmtContext, MakeWriter};
use tracing_subscriber::layer::Filter;
use tracing_subscriber::registry::LookupSpan;

/// How logs are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// For people.
    Text,
    /// One JSON object a line: `timestamp`, `level`, `target`, `fields`
    /// (the message among them), the current span's fields, and inside a
    /// traced run `trace_id` and `span_id`.
    Json,
}

/// The log layer writing to `writer` in `format`, filtered by `filter`.
pub(crate) fn layer<S, W>(
    format: LogFormat,
    writer: W,
    filter: impl Filter<S> + Send + Sync + 'static,
) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    // Colours for a person at a terminal only: a file, a pipe or a
    // journal gets plain text (and `NO_COLOR` is honoured).
    let colours = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty());
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(colours);
    match format {
        LogFormat::Text => logs.with_filter(filter).boxed(),
        LogFormat::Json => logs
            .fmt_fields(format::JsonFields::new())
            .event_format(JsonWithTraceIds(format::format().json()))
            .with_filter(filter)
            .boxed(),
    }
}

/// tracing-subscriber's JSON line, with the ids of the OpenTelemetry span
/// active on this thread (entering a traced span activates its context)
/// added at the end. Outside a traced span the line is the plain one.
struct JsonWithTraceIds(format::Format<format::Json>);

impl<S, N> FormatEvent<S, N> for JsonWithTraceIds
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        context: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let Some((trace_id, span_id)) = current_trace_ids() else {
            return self.0.format_event(context, writer, event);
        };
        let mut line = String::new();
        self.0
            .format_event(context, Writer::new(&mut line), event)?;
        let Some(object) = line.trim_end().strip_suffix('}') else {
            return writer.write_str(&line);
        };
        writeln!(
            writer,
            "{object},\"trace_id\":\"{trace_id}\",\"span_id\":\"{span_id}\"}}"
        )
    }
}

fn current_trace_ids() -> Option<(opentelemetry::trace::TraceId, opentelemetry::trace::SpanId)> {
    use opentelemetry::trace::TraceContextExt as _;
    opentelemetry::Context::map_current(|context| {
        let span = context.span();
        let span = span.span_context();
        span.is_valid().then(|| (span.trace_id(), span.span_id()))
    })
}
