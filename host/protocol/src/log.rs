//! A run's log: what the guest printed and logged, in order.

use serde::{Deserialize, Serialize};

/// Severity of a guest log call (mirrors `level` in `wit/job.wit`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

impl std::fmt::Display for LogLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            LogLevel::Trace => "TRACE",
            LogLevel::Debug => "DEBUG",
            LogLevel::Info => "INFO",
            LogLevel::Warn => "WARN",
            LogLevel::Error => "ERROR",
        })
    }
}

/// Where a log line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case", tag = "source", content = "level")]
pub enum LogSource {
    /// A line the guest wrote to stdout.
    Stdout,
    /// A line the guest wrote to stderr (a panic message lands here).
    Stderr,
    /// A `context.log` call at the given level.
    Guest(LogLevel),
    /// A line the host added: the truncation marker, for example.
    Host,
}

/// One line of a run's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LogLine {
    /// Milliseconds since the Unix epoch when the line was recorded.
    pub at_ms: i64,
    /// Where the line came from.
    #[serde(flatten)]
    pub source: LogSource,
    /// The text, without its trailing newline.
    pub text: String,
}

impl std::fmt::Display for LogLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.source {
            LogSource::Stdout => write!(f, "[stdout] {}", self.text),
            LogSource::Stderr => write!(f, "[stderr] {}", self.text),
            LogSource::Guest(level) => write!(f, "[{level:<5}] {}", self.text),
            LogSource::Host => write!(f, "[cronbox] {}", self.text),
        }
    }
}
