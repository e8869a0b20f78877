//! The global flags of logs, traces and metrics: `--log-format`, and the
//! OpenTelemetry settings, each a flag named after its standard variable
//! (`--otel-traces-sampler` is `OTEL_TRACES_SAMPLER`) and a key of
//! `cronbox.toml` (`[otel] traces_sampler`).

use clap::Args;

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Whether metrics go by OTLP too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MetricsExporter {
    Otlp,
    None,
}

/// Logs, traces and metrics; every flag is global.
#[derive(Debug, Args)]
pub struct TelemetryArgs {
    /// How logs are written to stderr: `text` for people, or `json`, one
    /// object a line (level, target, message, fields; trace_id and span_id
    /// inside a traced run) for a log pipeline.
    #[arg(
        long,
        global = true,
        env = "CRONBOX_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    log_format: LogFormat,
    #[command(flatten)]
    otel: OtelArgs,
}

/// The OpenTelemetry settings, each named after its standard variable: in
/// their own section of `--help`, left out of `-h`.
#[derive(Debug, Args)]
#[command(next_help_heading = "OpenTelemetry")]
struct OtelArgs {
    /// Export every run's spans by OTLP over HTTP to this collector (its
    /// base URL; spans go to URL/v1/traces). Traces are off without it.
    #[arg(
        long,
        global = true,
        hide_short_help = true,
        env = "OTEL_EXPORTER_OTLP_ENDPOINT",
        value_name = "URL"
    )]
    otel_endpoint: Option<String>,
    /// The name this process's spans carry (default cronbox-admin,
    /// cronbox-executor, or cronbox).
    #[arg(
        long,
        global = true,
        hide_short_help = true,
        env = "OTEL_SERVICE_NAME",
        value_name = "NAME"
    )]
    otel_service_name: Option<String>,
    /// Headers sent with every export, `key=value,...` (values
    /// URL-encoded), such as a collector's API key.
    #[arg(
        long,
        global = true,
        hide_short_help = true,
        env = "OTEL_EXPORTER_OTLP_HEADERS",
        hide_env_values = true,
        value_name = "KEY=VALUE,..."
    )]
    otel_exporter_otlp_headers: Option<String>,
    /// Which traces are kept: always_on (the default), always_off,
    /// traceidratio, parentbased_always_on, parentbased_always_off,
    /// parentbased_traceidratio.
    #[arg(
        long,
        global = true,
        hide_short_help = true,
        env = "OTEL_TRACES_SAMPLER",
        value_name = "SAMPLER"
    )]
    otel_traces_sampler: Option<cronbox_telemetry::SamplerName>,
    /// The ratio of traces the traceidratio samplers keep, 0 to 1
    /// (default 1).
    #[arg(
        long,
        global = true,
        hide_short_help = true,
        env = "OTEL_TRACES_SAMPLER_ARG",
        value_name = "RATIO"
    )]
    otel_traces_sampler_arg: Option<f64>,
    /// Spans held for export at most (default 2048); past it new spans
    /// are dropped. A busy admin wants more (docs/operating.md).
    #[arg(
        long,
        global = true,
        hide_short_help = true,
        env = "OTEL_BSP_MAX_QUEUE_SIZE",
        value_name = "SPANS"
    )]
    otel_bsp_max_queue_size: Option<usize>,
    /// Spans sent in one request at most (default 512).
    #[arg(
        long,
        global = true,
        hide_short_help = true,
        env = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
        value_name = "SPANS"
    )]
    otel_bsp_max_export_batch_size: Option<usize>,
    /// Milliseconds spans wait before a batch is sent (default 5000).
    #[arg(
        long,
        global = true,
        hide_short_help = true,
        env = "OTEL_BSP_SCHEDULE_DELAY",
        value_name = "MS"
    )]
    otel_bsp_schedule_delay: Option<u64>,
    /// Send the admin's and executor's metrics by OTLP to the endpoint
    /// too (`otlp`, the default when an endpoint is set), or not (`none`).
    #[arg(
        long,
        global = true,
        hide_short_help = true,
        env = "OTEL_METRICS_EXPORTER",
        value_enum,
        value_name = "EXPORTER"
    )]
    otel_metrics_exporter: Option<MetricsExporter>,
    /// Milliseconds between two sends of the metrics (default 60000).
    #[arg(
        long,
        global = true,
        hide_short_help = true,
        env = "OTEL_METRIC_EXPORT_INTERVAL",
        value_name = "MS"
    )]
    otel_metric_export_interval: Option<u64>,
}

impl TelemetryArgs {
    /// Installs the process's logs and traces; `service` names a process
    /// whose spans have no `--otel-service-name`.
    pub fn init(&self, service: &str) -> cronbox_telemetry::Telemetry {
        let format = match self.log_format {
            LogFormat::Text => cronbox_telemetry::LogFormat::Text,
            LogFormat::Json => cronbox_telemetry::LogFormat::Json,
        };
        let otel = &self.otel;
        let settings = cronbox_telemetry::OtelSettings {
            endpoint: otel.otel_endpoint.clone(),
            service_name: otel
                .otel_service_name
                .clone()
                .unwrap_or_else(|| service.to_owned()),
            headers: otel.otel_exporter_otlp_headers.clone(),
            sampler: otel.otel_traces_sampler,
            sampler_ratio: otel.otel_traces_sampler_arg,
            batch: cronbox_telemetry::BatchSettings {
                max_queue_size: otel.otel_bsp_max_queue_size,
                max_export_batch_size: otel.otel_bsp_max_export_batch_size,
                schedule_delay: otel
                    .otel_bsp_schedule_delay
                    .map(std::time::Duration::from_millis),
            },
            metrics: otel.otel_metrics_exporter != Some(MetricsExporter::None),
            metric_export_interval: otel
                .otel_metric_export_interval
                .map(std::time::Duration::from_millis),
        };
        cronbox_telemetry::init(format, &settings)
    }
}
